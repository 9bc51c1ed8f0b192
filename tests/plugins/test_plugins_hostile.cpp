// Hostile plugins: plain-C generators and weighting schemes that break one rule each (chunk
// sizes, report counts, names, NaN, a kept headsep_chunk_out) and declarations that break the
// rules; each must be refused with exit 1, naming the plugin file, and nothing written.
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"
#include "test_plugins.hpp"

namespace fs = std::filesystem;
using namespace headsep;
using namespace plugin_tests;

namespace {
// Runs the CLI writing --per-report and --summary into a fresh folder; the run must fail with
// exit 1, a message naming the plugin file and containing every part of `expect`, and leave the
// folder empty (no result, no temporary).
void expect_refused(const std::string& args, const fs::path& plugin_file, const std::vector<std::string>& expect) {
  TempDir out;
  auto r = cli(args + " --per-report " + q(out.path / "out.csv") + " --summary " + q(out.path / "s.json"));
  INFO("headsep " << args << "\n" << r.err);
  CHECK(r.rc == 1);
  CHECK(contains(r.err, plugin_file.string()));
  for (const auto& part : expect) CHECK(contains(r.err, part));
  CHECK(out.entries().empty());
}
const fs::path kHostileGen = kCases / "hostile-gen" / "hostile-gen.so";
const fs::path kHostileW = kCases / "hostile-weighting" / "hostile-weighting.so";
// One thread, so the first bad chunk is always the one reported (with several, any bad chunk may be).
std::string gen(const std::string& mode, const std::string& more = "") {
  return "run -s hostile-gen -w uniform --threads 1 -p mode=" + mode + " " + more + " --plugin-dir " +
         q(kHostileGen.parent_path());
}
}  // namespace

TEST_CASE("hostile plugins behaving well run (the baseline of the cases below)", "[plugins][hostile]") {
  TempDir out;
  auto r = cli("run -s hostile-gen -w uniform --chunk 16 --plugin-dir " + q(kHostileGen.parent_path()) + " --summary " +
               q(out.path / "s.json"));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(slurp(out.path / "s.json"), "\"count\": 100"));
  auto w = cli("run -s ops-reports -p reports=20 -w hostile-weighting --quiet --summary " + q(out.path / "w.json") +
               " --plugin-dir " + q(kHostileW.parent_path()));
  INFO(w.err);
  CHECK(w.rc == 0);
  // Random access through the library: every chunking gives all 100 reports.
  auto reg = PluginRegistry::discover({kHostileGen.parent_path()});
  auto src = open_scenario_plugin(reg, "hostile-gen", {});
  for (std::size_t chunk : {1u, 7u, 16u, 100u, 1000u}) {
    std::uint64_t n = 0;
    ReportBatch b;
    for (std::uint64_t i = 0; src->fill(i, chunk, b); ++i) n += b.n_reports();
    CHECK(n == 100);
  }
}

TEST_CASE("hostile generators: chunk sizes and report counts are checked against the contract", "[plugins][hostile]") {
  const std::string rule = "(random access: chunk i holds reports [i*max_reports, (i+1)*max_reports) of total_reports = 100, max_reports = 16)";
  SECTION("chunks shorter than max_reports (was: 50 of 100 reports, exit 0)") {
    expect_refused(gen("short-chunks", "--chunk 16"), kHostileGen, {"chunk 0 holds 8 reports instead of 16", rule});
    // Default chunk: the engine may first probe chunk 0 with fewer reports to size its batches.
    expect_refused(gen("short-chunks"), kHostileGen, {"chunk 0 holds ", " reports instead of ", "total_reports = 100"});
  }
  SECTION("END at chunk 1, data after it (was: 16 of 100 reports, exit 0)") {
    expect_refused(gen("end-early", "--chunk 16"), kHostileGen,
                   {"chunk 1: next_chunk returned END, but reports 16..31 are still to come", rule});
  }
  SECTION("END then data, total_reports unknown") {
    expect_refused(gen("end-early-unknown", "--chunk 16"), kHostileGen,
                   {"chunk 2 holds 16 reports, but chunk 1 returned END"});
  }
  SECTION("a short chunk followed by a full one, total_reports unknown") {
    expect_refused(gen("short-then-more", "--chunk 16"), kHostileGen,
                   {"chunk 1 holds 16 reports, but chunk 0 holds 8 < max_reports = 16 reports, so it must be the last"});
  }
  SECTION("data past the declared total_reports") {
    expect_refused(gen("past-total", "--chunk 16"), kHostileGen, {"chunk 6 holds 16 reports instead of 4", rule});
    expect_refused(gen("past-total", "-p reports=96 --chunk 16"), kHostileGen,
                   {"chunk 6 holds 16 reports, but chunk 5 ends the declared total_reports = 96"});
  }
  SECTION("a sequential generator that ends before its total_reports") {
    expect_refused(gen("seq-short", "--chunk 16"), kHostileGen,
                   {"next_chunk returned END after 50 reports, but describe() declared total_reports = 100"});
  }
}

TEST_CASE("hostile generators: schemas with NULL, bad or duplicate names and huge counts", "[plugins][hostile]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"null-features", "describe(): feature_names is NULL but n_features = 3"},
      {"null-feature-entry", "describe(): feature name 2 of 3 (feature_names[1]) is NULL"},
      {"empty-feature", "describe(): feature name 2 of 3 (feature_names[1]) is empty"},
      {"dup-features", "describe(): feature 'decision_axis' is listed twice (features 1 and 3"},
      {"bad-utf8-feature", "(feature_names[1]) 'evidence_\\xff\\xfe' is not valid UTF-8 (byte 10)"},
      {"null-scenarios", "describe(): scenario_names is NULL but n_scenarios = 2"},
      {"null-scenario-entry", "describe(): scenario name 2 of 2 (scenario_names[1]) is NULL"},
      {"dup-scenarios", "describe(): scenario 'alpha' is listed twice"},
      {"many-features", "describe(): n_features = 4294967295 is over the limit of 4096"},
      {"given-heads-max", "describe(): given_heads = 4294967295 is over the limit of 1024"},
  };
  for (const auto& [mode, message] : cases) {
    CAPTURE(mode);
    expect_refused(gen(mode), kHostileGen, {message});
  }
}

TEST_CASE("hostile generators: chunks with duplicate or non-UTF-8 names, NaN features", "[plugins][hostile]") {
  SECTION("a chunk naming one scenario twice (was: 200 reports counted for 100)") {
    expect_refused(gen("dup-chunk-scenarios"), kHostileGen,
                   {"chunk 0 is malformed: scenario 'alpha' is listed twice (each scenario is evaluated once per report)"});
  }
  SECTION("a scenario name that is not UTF-8 (was: invalid JSON lines, exit 0)") {
    expect_refused(gen("bad-utf8-scenario"), kHostileGen, {"chunk 0", "scenario(): the name 'caf\\xc3' is not valid UTF-8"});
  }
  SECTION("a report id that is not UTF-8") {
    expect_refused(gen("bad-utf8-id"), kHostileGen, {"chunk 0", "report_id(): id 6 of the chunk, 'r5\\xff', is not valid UTF-8"});
  }
  SECTION("a NaN feature value (was: reported as an overflow, plugin not named)") {
    expect_refused(gen("nan-feature", "--chunk 2"), kHostileGen,
                   {"chunk 1: report '#3' (report 2 of the chunk): feature 'evidence_axis' of token 2 is nan "
                    "(feature values must be finite)"});
  }
}

TEST_CASE("hostile generators: a headsep_chunk_out kept and used after its call is refused", "[plugins][hostile]") {
  // The old host handed out a stack object: this wrote into dead stack memory (segfaults).
  for (int i = 0; i < 5; ++i)
    expect_refused(gen("stale-out", "--chunk 10"), kHostileGen,
                   {"feature() was called through the headsep_chunk_out of chunk 0 after that next_chunk call had returned"});
  expect_refused(gen("stale-out"), kHostileGen, {"through the headsep_chunk_out of chunk 0"});  // one chunk, then END
}

TEST_CASE("hostile weighting schemes: heads and own scenarios", "[plugins][hostile]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"heads-max", "describe_weighting(): heads = 4294967295 is over the limit of 1024"},
      {"heads-million", "describe_weighting(): heads = 1000000 is over the limit of 1024"},
      {"null-scenarios", "describe_weighting(): scenario_names is NULL but n_scenarios = 2"},
      {"null-scenario-entry", "describe_weighting(): scenario name 2 of 2 (scenario_names[1]) is NULL"},
      {"dup-scenarios", "describe_weighting(): scenario 'design_a' is listed twice"},
      {"bad-utf8-scenario", "(scenario_names[1]) 'design_\\xe2\\x82' is not valid UTF-8"},
  };
  for (const auto& [mode, message] : cases) {
    CAPTURE(mode);
    expect_refused("run -s ops-reports -p reports=50 -w hostile-weighting -p mode=" + mode + " --plugin-dir " +
                       q(kHostileW.parent_path()),
                   kHostileW, {message});
  }
}

TEST_CASE("plugins whose declarations break the rules fail to load, naming the file and the field", "[plugins][hostile]") {
  struct Case {
    std::string dir, name, message;
  };
  const std::vector<Case> cases = {
      {"bad-default", "bad-default", "plugin 'bad-default': parameter 'reports' (int) has the default 'abc', which is not an integer"},
      {"dotted-param", "dotted-param", "parameter 1 has an invalid name: the name 'model.path' has the character '.'"},
      {"bad-name", "bad-name", "invalid plugin name: the name 'Bad.Name' has the character 'B' (allowed: a-z, 0-9, '_', '-')"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.dir);
    const auto file = kCases / c.dir / (c.name + ".so");
    REQUIRE_THROWS_WITH(inspect_plugin(file), Catch::Contains(c.message) && Catch::Contains(file.string()));
    expect_refused("run -s ops-reports -w " + c.name + " --plugin-dir " + q(file.parent_path()), file, {c.message});
    // `headsep plugins NAME` does not show it (the bad default used to be printed as is).
    auto l = cli("plugins " + c.name + " --plugin-dir " + q(file.parent_path()));
    CHECK(l.rc == 1);
    CHECK(contains(l.err, file.string() + ": "));
    CHECK(contains(l.err, c.message));
  }
  // Defaults reach plugins in canonical form, like user values.
  auto info = inspect_plugin(kHostileGen);
  REQUIRE(info.params.size() == 2);
  CHECK(info.params[1].default_value == std::optional<std::string>("100"));
}
