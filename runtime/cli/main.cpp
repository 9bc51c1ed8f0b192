// headsep — command-line front end.
// Exit status: 0 ok, 1 bad input or plugin error (message on stderr), 2 usage error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "headsep/output.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"

namespace headsep {
extern const std::string_view seed_csv;
}

namespace {

using namespace headsep;

struct RunArgs {
  std::string input, axes{kSeedAxes}, format = "text", output, simd, precision = "f64";
  std::vector<std::string> reports;
  unsigned threads = 0;
  std::size_t chunk = 8192;
};

struct Totals : ResultSink {
  ResultSink* next = nullptr;
  std::uint64_t rows = 0;
  void consume(const BatchResult& r) override {
    rows += r.batch->source_rows;
    next->consume(r);
  }
};

int run_csv(const RunArgs& a, std::string_view bytes = {}) {
  auto specs = parse_axes(a.axes);
  const Format format = parse_format(a.format);  // usage errors before any file is touched
  CsvSourceOptions so;
  so.path = a.input;
  so.bytes = bytes;
  so.features = axis_columns(specs);
  so.reports = a.reports;
  auto source = open_csv_source(so);
  auto axes = AxisMap::bind(specs, source->schema().feature_names);
  auto weighting = make_table_weighting(source->schema().given_heads);

  RunOptions opt;
  opt.chunk_reports = a.chunk;
  opt.threads = a.threads;
  opt.simd = a.simd.empty() ? default_level() : parse_simd_level(a.simd);
  if (a.precision == "f64") opt.precision = Precision::f64;
  else if (a.precision == "f32") opt.precision = Precision::f32;
  else throw UsageError("--precision must be f64 or f32");

  RunInfo info{axes.names(), weighting->heads()};
  OutputFile out(a.output);
  auto writer = make_writer(format, out, info);
  Totals totals;
  totals.next = writer.get();
  run(*source, *weighting, axes, opt, totals);
  writer->finish(source->rows_read(), totals.rows);
  out.commit();
  return 0;
}

int info_cmd() {
  auto join = [](const std::vector<SimdLevel>& v) {
    std::string s;
    for (auto l : v) s += (s.empty() ? "" : " ") + std::string(to_string(l));
    return s;
  };
  std::printf("headsep %s\n", "0.1.0");
  std::printf("simd compiled:  %s\n", join(compiled_levels()).c_str());
  std::printf("simd supported: %s\n", join(supported_levels()).c_str());
  std::printf("simd chosen:    %s\n", std::string(to_string(default_level())).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headsep — how multi-head attention keeps relations apart"};
  app.require_subcommand(1);
  RunArgs ex, ra;

  auto* example = app.add_subcommand("example", "Print the seed exercise's output, computed from the bundled seed CSV");

  auto* runc = app.add_subcommand("run", "Analyse a report set");
  runc->add_option("--input,-i", ra.input, "CSV in the seed schema ('-' = stdin)")->required();
  runc->add_option("--report", ra.reports, "Report id to analyse (repeatable; default: all)");
  runc->add_option("--axes", ra.axes, "Context axes, e.g. 'd=decision_axis;ec=evidence_axis+condition_axis'")
      ->capture_default_str();
  runc->add_option("--format,-f", ra.format, "Output format: text, jsonl or csv")->capture_default_str();
  runc->add_option("--output,-o", ra.output, "Write to this file (atomically) instead of stdout");
  runc->add_option("--threads", ra.threads, "Worker threads (0 = all cores)");
  runc->add_option("--simd", ra.simd, "Force a SIMD level: scalar, sse2, avx2, avx512 (default: best, or $HEADSEP_SIMD)");
  runc->add_option("--precision", ra.precision, "f64 (default, the seed's arithmetic) or f32")->capture_default_str();
  runc->add_option("--chunk", ra.chunk, "Reports per batch")->check(CLI::PositiveNumber)->capture_default_str();

  auto* infoc = app.add_subcommand("info", "Show build and CPU capabilities");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*example) {
      ex.input = "qkv-multihead-report-scenarios.csv";
      ex.reports = {"ops_pressure_return"};
      return run_csv(ex, seed_csv);
    }
    if (*runc) return run_csv(ra);
    if (*infoc) return info_cmd();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "headsep: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headsep: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
