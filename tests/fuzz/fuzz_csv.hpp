// Fuzz harness: the CSV input (runtime/io/csv_reader.cpp tokenizer, runtime/io/csv_source.cpp seed-schema
// source). The whole input is the file, so the corpus is plain CSV. Each input goes through:
//  1. the tokenizer alone, every record (it must never stop with anything but an InputError),
//     once in one block and once in blocks of a few bytes — the records must be the same;
//  2. the source as `headsep run --input` opens it: the seed's feature columns, weight columns;
//  3. the source as `--report A --report B` with no weights opens it, one report per batch.
// Every batch is checked against what a ReportSource promises (fuzz_common.hpp check_batch).
#pragma once
#include <string>
#include <vector>

#include "io/csv_reader.hpp"
#include "fuzz_common.hpp"
#include "headsep/source.hpp"

namespace headsep::fuzz::csv {

inline void drain(const CsvSourceOptions& o, std::size_t max_reports) {
  auto src = open_csv_source(o);
  ReportBatch b;
  std::uint64_t reports = 0;
  while (src->next(b, max_reports)) {
    check_batch(src->schema(), b, "csv source");
    expect(b.n_reports() >= 1 && b.n_reports() <= max_reports, "csv source: batch size outside 1..max_reports");
    expect(b.first_report == reports, "csv source: first_report skips or repeats reports");
    expect(b.report_ids.size() == b.n_reports(), "csv source: a batch without report ids");
    expect(!b.scenarios.empty(), "csv source: a batch without scenarios (the CSV names them)");
    reports += b.n_reports();
  }
  expect(!src->next(b, max_reports), "csv source: next() after the end returned data");
}

// Every record, or the error that stopped the reader (its message after the records).
inline std::vector<std::string> tokenize(const std::string& bytes, std::size_t block) {
  std::vector<std::string> out;
  try {
    CsvReader r("fuzz.csv", bytes, block);
    std::uint64_t last_line = 0;
    while (r.next()) {
      expect(r.size() >= 1, "csv reader: a record without fields");
      expect(r.line() > last_line, "csv reader: record lines do not increase");
      last_line = r.line();
      std::string rec = std::to_string(r.line());
      std::size_t total = 0;
      for (std::size_t i = 0; i < r.size(); ++i) rec.append(1, '\x1f').append(r[i]), total += r[i].size();
      expect(total <= bytes.size(), "csv reader: a record longer than the input");
      out.push_back(std::move(rec));
    }
  } catch (const InputError& e) {
    out.push_back(std::string("error: ") + e.what());
  }
  return out;
}

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  // A copy: CsvSourceOptions::bytes with a null data() means "read the path" instead.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // 1. The tokenizer, in one block and in blocks of 4..19 bytes: every quote, CR/LF pair and field
  //    then straddles a refill, and the result must not change.
  const std::size_t small = 4 + (size ? data[size - 1] % 16 : 0);
  expect(tokenize(bytes, CsvReader::kBlock) == tokenize(bytes, small),
         "csv reader: records depend on the block size (" + std::to_string(small) + " bytes)");
  CsvSourceOptions o;
  o.path = "fuzz.csv";
  o.bytes = bytes;
  o.features = {"decision_axis", "evidence_axis", "condition_axis"};
  accepted([&] { drain(o, 3); });
  o.features = {"evidence_axis"};
  o.weights = false;
  o.reports = {"ops_pressure_return", "r1"};
  accepted([&] { drain(o, 1); });
  return 0;
}

}  // namespace headsep::fuzz::csv
