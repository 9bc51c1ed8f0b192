#include <catch2/catch.hpp>

#include "io/csv_reader.hpp"
#include "headsep/error.hpp"
#include "headsep/source.hpp"
#include "test_util.hpp"

using namespace headsep;
using testutil::TempDir;
using testutil::write_file;

namespace {

std::vector<std::vector<std::string>> read_all(const std::string& bytes) {
  CsvReader r("mem.csv", bytes);
  std::vector<std::vector<std::string>> rows;
  while (r.next()) {
    rows.emplace_back();
    for (std::size_t i = 0; i < r.size(); ++i) rows.back().emplace_back(r[i]);
  }
  return rows;
}

const std::vector<std::string> kSeedFeatures = {"decision_axis", "evidence_axis", "condition_axis"};

std::unique_ptr<ReportSource> open_text(const TempDir& dir, const std::string& bytes,
                                        std::vector<std::string> reports = {}) {
  const std::string path = dir.file("in.csv");
  write_file(path, bytes);
  CsvSourceOptions o;
  o.path = path;
  o.features = kSeedFeatures;
  o.reports = std::move(reports);
  return open_csv_source(o);
}

// Reads every batch; returns the first InputError message or "" when none.
std::string drain_error(ReportSource& s) {
  ReportBatch b;
  try {
    while (s.next(b, 4)) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& bytes, std::vector<std::string> reports = {}) {
  TempDir dir;
  try {
    auto s = open_text(dir, bytes, std::move(reports));
    return drain_error(*s);
  } catch (const InputError& e) {
    return e.what();
  }
}

const std::string kHeader =
    "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight\n";

}  // namespace

TEST_CASE("RFC 4180 records: quotes, doubled quotes, newlines, CRLF, BOM, blank lines", "[csv]") {
  auto rows = read_all("\xEF\xBB\xBF" "a,b,c\r\n\"x,1\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n\r\n,,\nlast,row,no-newline");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == std::vector<std::string>{"a", "b", "c"});
  CHECK(rows[1] == std::vector<std::string>{"x,1", "say \"hi\"", "two\nlines"});
  CHECK(rows[2] == std::vector<std::string>{"", "", ""});
  CHECK(rows[3] == std::vector<std::string>{"last", "row", "no-newline"});
}

TEST_CASE("CSV reader reports the line where a record starts, counting quoted newlines", "[csv]") {
  CsvReader r("mem.csv", "h\n\"a\nb\"\n\nc\n");
  REQUIRE(r.next());
  CHECK(r.line() == 1);
  REQUIRE(r.next());
  CHECK(r.line() == 2);
  REQUIRE(r.next());
  CHECK(r.line() == 5);
  CHECK(r[0] == "c");
  CHECK_FALSE(r.next());
}

TEST_CASE("CSV reader refuses malformed quoting with file and line", "[csv]") {
  auto err = [](const std::string& bytes) {
    try {
      CsvReader r("bad.csv", bytes);
      while (r.next()) {
      }
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(err("a,b\n1,\"open\n2,3\n"), Catch::Contains("bad.csv:2") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a\n\"x\"y\n"), Catch::Contains("bad.csv:2") && Catch::Contains("after the closing quote"));
  CHECK_THAT(err("a\nx\"y\n"), Catch::Contains("bad.csv:2") && Catch::Contains("quote inside unquoted"));
}

TEST_CASE("a record longer than the read buffer streams through", "[csv]") {
  std::string big(3u << 20, 'x');
  auto rows = read_all("h1,h2\n\"" + big + "\",2\n");
  REQUIRE(rows.size() == 2);
  CHECK(rows[1][0].size() == big.size());
  CHECK(rows[1][1] == "2");
}

TEST_CASE("CSV source: columns in any order, extra columns ignored, scenarios grouped", "[csv]") {
  TempDir dir;
  auto src = open_text(dir,
                       "extra,head2_weight,token,scenario,report_id,single_weight,condition_axis,decision_axis,"
                       "head1_weight,evidence_axis,note\n"
                       "x,0.2,tA,s1,r1,0.5,0.3,1.0,0.1,0.2,free text\n"
                       "x,0.3,tB,s1,r1,0.5,0.4,2.0,0.2,0.1,\"quoted, with comma\"\n"
                       "x,0.4,tA,s2,r1,0.6,0.3,1.0,0.3,0.2,\n"
                       "x,0.5,tB,s2,r1,0.7,0.4,2.0,0.4,0.1,\n");
  CHECK(src->schema().given_heads == 2);
  ReportBatch b;
  REQUIRE(src->next(b, 100));
  REQUIRE(b.n_reports() == 1);
  CHECK(b.report_ids[0] == "r1");
  CHECK(b.token_names == std::vector<std::string>{"tA", "tB"});
  // Feature columns in the file's order, whatever order they were asked in (docs/ATTENTION.md).
  CHECK(src->schema().feature_names == std::vector<std::string>{"condition_axis", "decision_axis", "evidence_axis"});
  CHECK(b.features[0] == std::vector<double>{0.3, 0.4});  // condition_axis
  CHECK(b.features[1] == std::vector<double>{1.0, 2.0});  // decision_axis
  REQUIRE(b.scenarios.size() == 2);
  CHECK(src->schema().scenario_names[b.scenarios[1]] == "s2");
  // given_weights[j*(N+1)+h]
  CHECK(b.given_weights[0] == std::vector<double>{0.5, 0.5});
  CHECK(b.given_weights[2] == std::vector<double>{0.2, 0.3});
  CHECK(b.given_weights[3 + 1] == std::vector<double>{0.3, 0.4});
  CHECK(b.source_rows == 4);
  CHECK_FALSE(src->next(b, 100));
  CHECK(src->rows_read() == 4);
}

TEST_CASE("CSV source: batches split at the chunk size and where the scenario list changes", "[csv]") {
  TempDir dir;
  std::string csv = kHeader;
  for (int r = 0; r < 5; ++r)
    for (const char* s : {"a", "b"}) csv += "r" + std::to_string(r) + "," + s + ",t,1,2,3,0.5,0.5,0.5\n";
  csv += "r5,c,t,1,2,3,0.5,0.5,0.5\n";
  auto src = open_text(dir, csv);
  ReportBatch b;
  std::vector<std::size_t> sizes;
  std::vector<std::uint64_t> firsts;
  while (src->next(b, 2)) {
    sizes.push_back(b.n_reports());
    firsts.push_back(b.first_report);
  }
  CHECK(sizes == std::vector<std::size_t>{2, 2, 1, 1});
  CHECK(firsts == std::vector<std::uint64_t>{0, 2, 4, 5});
}

TEST_CASE("CSV source: --report selection keeps file order and names missing ids", "[csv]") {
  TempDir dir;
  std::string csv = kHeader + "r1,s,t,1,2,3,1,1,1\nr2,s,t,1,2,3,1,1,1\nr3,s,t,1,2,3,1,1,1\n";
  auto src = open_text(dir, csv, {"r3", "r1"});
  ReportBatch b;
  REQUIRE(src->next(b, 10));
  CHECK(b.report_ids == std::vector<std::string>{"r1", "r3"});
  CHECK(b.source_rows == 2);
  CHECK_FALSE(src->next(b, 10));
  CHECK(src->rows_read() == 3);
  CHECK_THAT(error_of(csv, {"r2", "nope"}), Catch::Contains("report 'nope' not found"));
}

TEST_CASE("CSV source: every kind of bad input names file, line and column", "[csv]") {
  using Catch::Contains;
  CHECK_THAT(error_of(""), Contains("in.csv") && Contains("empty file"));
  CHECK_THAT(error_of(kHeader), Contains("no data rows"));
  CHECK_THAT(error_of("report_id,scenario,token,evidence_axis,condition_axis,single_weight,head1_weight\nr,s,t,1,2,3,4\n"),
             Contains("in.csv:1") && Contains("column 'decision_axis'") && Contains("missing"));
  CHECK_THAT(error_of("report_id,scenario,token,decision_axis,evidence_axis,condition_axis,head1_weight\n"),
             Contains("column 'single_weight'"));
  CHECK_THAT(error_of("report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight\n"),
             Contains("column 'head1_weight'"));
  CHECK_THAT(error_of("report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,"
                      "head3_weight\n"),
             Contains("column 'head3_weight'") && Contains("head2_weight is missing"));
  CHECK_THAT(error_of("report_id,report_id,scenario\n"), Contains("duplicate column"));
  CHECK_THAT(error_of(kHeader + "r,s,t,1,abc,3,1,1,1\n"),
             Contains("in.csv:2") && Contains("column 'evidence_axis'") && Contains("'abc' is not a finite number"));
  CHECK_THAT(error_of(kHeader + "r,s,t,1,2,3,1,1,1\nr,s,u,1,2,nan,1,1,1\n"),
             Contains("in.csv:3") && Contains("column 'condition_axis'") && Contains("not a finite"));
  CHECK_THAT(error_of(kHeader + "r,s,t,1,2,3,1,inf,1\n"), Contains("column 'head1_weight'"));
  CHECK_THAT(error_of(kHeader + "r,s,t,1,2,3,1,1\n"), Contains("in.csv:2") && Contains("expected 9 fields") && Contains("found 8"));
  CHECK_THAT(error_of(kHeader + "r,s,t,1,2,3,1,1,1,9\n"), Contains("found 10"));
  CHECK_THAT(error_of(kHeader + "r,s,\"t,1,2,3,1,1,1\n"), Contains("in.csv:2") && Contains("unterminated"));
  CHECK_THAT(error_of(kHeader + "r,s,t\xff,1,2,3,1,1,1\n"), Contains("in.csv:2") && Contains("column 'token'") && Contains("UTF-8"));
  CHECK_THAT(error_of(kHeader + "r\xc3,s,t,1,2,3,1,1,1\n"), Contains("column 'report_id'") && Contains("UTF-8"));
  CHECK_THAT(error_of(kHeader + "r,a,t,1,2,3,1,1,1\nr,b,u,1,2,3,1,1,1\n"),
             Contains("in.csv:3") && Contains("token 'u'") && Contains("scenario 'a' has 't'"));
  CHECK_THAT(error_of(kHeader + "r,a,t,1,2,3,1,1,1\nr,a,u,1,2,3,1,1,1\nr,b,t,1,2,3,1,1,1\n"),
             Contains("scenario 'b' has 1 tokens") && Contains("'a' has 2"));
  CHECK_THAT(error_of(kHeader + "r,a,t,1,2,3,1,1,1\nr,b,t,1,2,4,1,1,1\n"),
             Contains("in.csv:3") && Contains("column 'condition_axis'") && Contains("differs"));
  CHECK_THAT(error_of(kHeader + "r,a,t,1,2,3,1,1,1\nq,a,t,1,2,3,1,1,1\nr,a,t,1,2,3,1,1,1\n"),
             Contains("in.csv:4") && Contains("resume"));
  CHECK_THAT(error_of(kHeader + ",a,t,1,2,3,1,1,1\n"), Contains("empty report id"));
}

TEST_CASE("CSV source: a missing file is an error naming it", "[csv]") {
  CsvSourceOptions o;
  o.path = "/nonexistent/dir/file.csv";
  o.features = kSeedFeatures;
  CHECK_THROWS_WITH(open_csv_source(o), Catch::Contains("/nonexistent/dir/file.csv") && Catch::Contains("cannot open"));
}
