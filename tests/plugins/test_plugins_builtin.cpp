// Plugins: the built-in plugins found and listed, typed parameters, the csv and ops-reports
// generators, determinism of ops-reports, the weighting schemes, and library lifetime. Loading
// refusals are in test_plugins_loading.cpp, hostile plugins in test_plugins_hostile.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"
#include "test_plugins.hpp"

namespace fs = std::filesystem;
using namespace headsep;
using namespace plugin_tests;

namespace {

// Every token value of a report source, in order, plus offsets: what must not depend on chunking.
struct Flat {
  std::vector<std::uint64_t> lengths;
  std::vector<double> values;
  bool operator==(const Flat&) const = default;
};
void append(Flat& f, const ReportBatch& b) {
  for (std::size_t r = 0; r < b.n_reports(); ++r) f.lengths.push_back(b.report_length(r));
  for (std::size_t t = 0; t < b.n_tokens(); ++t)
    for (const auto& col : b.features) f.values.push_back(col[t]);
}

}  // namespace

TEST_CASE("the built-in plugins are found with no flags and listed", "[plugins]") {
  auto r = cli("plugins");
  REQUIRE(r.rc == 0);
  for (const char* name : {"csv", "ops-reports", "table", "axis-focus", "uniform"}) CHECK(contains(r.out, name));
  CHECK(contains(r.out, "scenario"));
  CHECK(contains(r.out, "weighting"));
  CHECK(contains(r.out, "1.0"));
  CHECK(contains(r.out, (fs::path(HEADSEP_BINARY_DIR) / "plugins" / "ops-reports.so").string()));
  CHECK(r.err.empty());

  auto reg = builtins();
  // csv, ops-reports, tensor, text, ops-text; table, axis-focus, uniform, qkv, positional
  REQUIRE(reg.plugins().size() == 10);
  CHECK(reg.failures().empty());
  CHECK(reg.find("ops-reports")->kind == PluginKind::scenario);
  CHECK(reg.find("uniform")->kind == PluginKind::weighting);
}

TEST_CASE("headsep plugins NAME shows parameters with types, defaults and help", "[plugins]") {
  auto r = cli("plugins ops-reports");
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "reports"));
  CHECK(contains(r.out, "int"));
  CHECK(contains(r.out, "default: 1000"));
  CHECK(contains(r.out, "number of reports to generate"));
  auto c = cli("plugins csv");
  CHECK(contains(c.out, "path"));
  CHECK(contains(c.out, "required"));
  auto missing = cli("plugins no-such-plugin");
  CHECK(missing.rc == 1);
  CHECK(contains(missing.err, "no-such-plugin"));
}

TEST_CASE("parameters are typed and validated", "[plugins]") {
  auto unknown = cli("run -s ops-reports -w uniform -p colour=red");
  CHECK(unknown.rc == 2);
  CHECK(contains(unknown.err, "'colour'"));
  CHECK(contains(unknown.err, "reports, seed, min_tokens, max_tokens, names"));
  CHECK(contains(unknown.err, "heads"));

  auto bad = cli("run -s ops-reports -w uniform -p reports=lots");
  CHECK(bad.rc == 2);
  CHECK(contains(bad.err, "'reports'"));
  CHECK(contains(bad.err, "an integer"));
  CHECK(contains(bad.err, "'lots'"));

  auto bad_float = cli("run -s ops-reports -w axis-focus -p sharpness=inf");
  CHECK(bad_float.rc == 2);
  CHECK(contains(bad_float.err, "'sharpness' expects a finite number"));

  auto required = cli("run -s csv -w table");
  CHECK(required.rc == 2);
  CHECK(contains(required.err, "needs parameter 'path'"));

  auto range = cli("run -s ops-reports -w uniform -p min_tokens=0");
  CHECK(range.rc == 2);  // a value out of range is a usage error, as one of the wrong type
  CHECK(contains(range.err, "ops-reports.so"));
  CHECK(contains(range.err, "min_tokens"));

  auto reg = builtins();
  auto p = resolve_params(*reg.find("ops-reports"), {{"names", "YES"}, {"seed", "+5"}});
  CHECK(p == PluginParams{{"reports", "1000"}, {"seed", "5"}, {"min_tokens", "3"}, {"max_tokens", "6"}, {"names", "true"},
                          {"d_model", "0"}, {"noise", "0.1"}});
  auto split = split_params({"seed=3", "uniform.heads=4", "scenario.reports=9"}, *reg.find("ops-reports"), *reg.find("uniform"));
  CHECK(split.first == PluginParams{{"seed", "3"}, {"reports", "9"}});
  CHECK(split.second == PluginParams{{"heads", "4"}});
  CHECK_THROWS_AS(split_params({"nokey"}, *reg.find("ops-reports"), *reg.find("uniform")), UsageError);
}

TEST_CASE("run --input is the csv scenario with the table weighting, and matches the seed", "[plugins]") {
  auto shorthand = cli("run --input " + q(kSeedCsv) + " --report ops_pressure_return");
  REQUIRE(shorthand.rc == 0);
  auto example = cli("example");
  REQUIRE(example.rc == 0);
  CHECK(shorthand.out == example.out);
  CHECK(shorthand.out == slurp(std::string(HEADSEP_SOURCE_DIR) + "/tests/seed/expected-output.txt"));
  auto longhand = cli("run --scenario csv -p path=" + q(kSeedCsv) + " --weighting table --report ops_pressure_return");
  REQUIRE(longhand.rc == 0);
  CHECK(longhand.out == example.out);
}

TEST_CASE("ops-reports is deterministic whatever the chunking and threads", "[plugins][determinism]") {
  auto reg = builtins();
  const PluginParams params{{"reports", "2000"}, {"seed", "7"}, {"min_tokens", "2"}, {"max_tokens", "9"}};
  auto flat_seq = [&](std::size_t chunk) {
    auto src = open_scenario_plugin(reg, "ops-reports", params);
    Flat f;
    ReportBatch b;
    std::uint64_t expect_first = 0;
    while (src->next(b, chunk)) {
      REQUIRE(b.first_report == expect_first);
      expect_first += b.n_reports();
      append(f, b);
    }
    REQUIRE(expect_first == 2000);
    return f;
  };
  const Flat ref = flat_seq(2000);
  for (std::size_t chunk : {1u, 7u, 64u, 333u, 5000u}) CHECK(flat_seq(chunk) == ref);

  // Random access from several threads at once, chunks assembled in index order.
  auto src = open_scenario_plugin(reg, "ops-reports", params);
  REQUIRE(src->random_access());
  const std::size_t chunk = 97, n_chunks = (2000 + chunk - 1) / chunk;
  std::vector<ReportBatch> batches(n_chunks + 1);
  std::vector<std::thread> threads;
  std::atomic<bool> past_end_ok{true};
  for (unsigned w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (std::size_t i = w; i <= n_chunks; i += 4) {
        bool got = src->fill(i, chunk, batches[i]);
        if (got != (i < n_chunks)) past_end_ok = false;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(past_end_ok);
  Flat par;
  for (std::size_t i = 0; i < n_chunks; ++i) {
    CHECK(batches[i].first_report == i * chunk);
    append(par, batches[i]);
  }
  CHECK(par == ref);

  // Lengths stay in range; another seed gives other data.
  for (auto l : ref.lengths) CHECK((l >= 2 && l <= 9));
  auto other = open_scenario_plugin(reg, "ops-reports", {{"reports", "2000"}, {"seed", "8"}, {"min_tokens", "2"}, {"max_tokens", "9"}});
  ReportBatch b;
  Flat f8;
  while (other->next(b, 500)) append(f8, b);
  CHECK_FALSE(f8 == ref);

  // End to end: same output for any chunk size.
  auto a = cli("run -s ops-reports -w axis-focus -p reports=500 -f jsonl --chunk 1");
  auto c = cli("run -s ops-reports -w axis-focus -p reports=500 -f jsonl --chunk 333");
  REQUIRE(a.rc == 0);
  CHECK(a.out == c.out);
  CHECK(contains(a.out, "\"scenario\":\"decision_vs_condition_split\""));
}

TEST_CASE("weighting schemes: uniform, axis-focus, table", "[plugins]") {
  auto reg = builtins();
  auto src = open_scenario_plugin(reg, "ops-reports", {{"reports", "50"}});
  ReportBatch b;
  REQUIRE(src->next(b, 50));

  auto uni = open_weighting_plugin(reg, "uniform", {{"heads", "3"}}, src->schema());
  CHECK(uni->heads() == 3);
  CHECK(uni->own_scenarios() == std::vector<std::string>{"uniform"});  // synthetic data names no scenario
  auto focus = open_weighting_plugin(reg, "axis-focus", {}, src->schema());
  CHECK(focus->heads() == 2);
  CHECK(focus->own_scenarios() ==
        std::vector<std::string>{"balanced_heads", "decision_vs_condition_split", "condition_heavy_both_heads"});
  for (const Weighting* w : {uni.get(), focus.get()}) {
    const auto slots = w->own_scenarios().size();
    for (std::uint32_t s = 0; s < slots; ++s) {
      WeightBlock block;
      block.resize(w->heads(), b.n_tokens());
      w->weights(b, s, block);
      for (std::uint32_t h = 0; h <= w->heads(); ++h)
        for (std::size_t r = 0; r < b.n_reports(); ++r) {
          double sum = 0;
          for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) sum += block.rows[h][t];
          CHECK(sum == Approx(1.0));
        }
    }
  }
  // Heads that prefer different axes separate; uniform heads never do.
  auto split = cli("run -s ops-reports -w axis-focus -p reports=20 -p designs=x=decision_axis@5,evidence_condition_axis@5 -f csv");
  REQUIRE(split.rc == 0);
  CHECK(contains(split.out, "x"));
  auto designs_bad = cli("run -s ops-reports -w axis-focus -p designs=x=nowhere@1");
  CHECK(designs_bad.rc == 2);  // a parameter value refused (ParamError): a usage error
  CHECK(contains(designs_bad.err, "axis 'nowhere'"));

  // table needs data that carries weights.
  try {
    open_weighting_plugin(reg, "table", {}, src->schema());
    FAIL("table accepted data without weights");
  } catch (const PluginError& e) {
    CHECK(contains(e.what(), "table.so"));
    CHECK(contains(e.what(), "no weight columns"));
  }
  // uniform over data-named scenarios evaluates those scenarios.
  auto csv = open_scenario_plugin(reg, "csv", {{"path", kSeedCsv}});
  auto uni_csv = open_weighting_plugin(reg, "uniform", {}, csv->schema());
  CHECK(uni_csv->own_scenarios().empty());
}

TEST_CASE("axis-focus gives the same weights bit for bit on every code path", "[plugins]") {
  // HEADSEP_SIMD caps axis-focus's weights code (generic; 4 reports per vector with avx2; 8 with
  // avx512 where the CPU has it); --simd keeps the engine's kernels at one level. Lengths 1..20
  // cover the lane path with partial groups and the per-report path beyond 16 tokens.
  std::string first;
  for (const char* level : {"scalar", "avx2", "avx512"}) {
    auto r = sh(std::string("HEADSEP_SIMD=") + level + " " + q(kCli) +
                " run -s ops-reports -w axis-focus -p reports=3000 -p min_tokens=1 -p max_tokens=20 -p seed=9"
                " --chunk 777 -f jsonl --simd sse2");
    REQUIRE(r.rc == 0);
    REQUIRE(r.out.size() > 100000);
    if (first.empty()) first = r.out;
    else CHECK(r.out == first);
  }
}

TEST_CASE("a library stays loaded while what it returned is alive", "[plugins]") {
  std::unique_ptr<ReportSource> src;
  std::unique_ptr<Weighting> w;
  {
    auto reg = builtins();
    src = open_scenario_plugin(reg, "ops-reports", {{"reports", "10"}});
    w = open_weighting_plugin(reg, "axis-focus", {}, src->schema());
  }  // registry gone
  ReportBatch b;
  REQUIRE(src->next(b, 10));
  WeightBlock block;
  block.resize(w->heads(), b.n_tokens());
  w->weights(b, 1, block);
  CHECK(block.rows[1][0] > 0);
}
