// Plugins: discovery, listing, typed parameters, the built-in plugins, determinism of
// ops-reports, library lifetime, deliberately broken plugins, and an out-of-tree plugin built
// against an installed headsep.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"

namespace fs = std::filesystem;
using namespace headsep;

namespace {

const std::string kCli = HEADSEP_CLI;
const fs::path kCases = HEADSEP_TEST_CASES_DIR;
const std::string kSeedCsv = std::string(HEADSEP_SOURCE_DIR) + "/data/qkv-multihead-report-scenarios.csv";

// A fresh temporary folder, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() / ("headsep-test-plugins-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(path)) v.push_back(e.path().filename().string());
    return v;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

struct Cli {
  int rc = -1;
  std::string out, err;
};

Cli sh(const std::string& command) {
  TempDir t;
  const auto o = t.path / "stdout", e = t.path / "stderr";
  int st = std::system((command + " >" + q(o) + " 2>" + q(e)).c_str());
  Cli r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

Cli cli(const std::string& args) { return sh(q(kCli) + " " + args); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

PluginRegistry builtins() { return PluginRegistry::discover({builtin_plugin_dir()}); }

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
  CHECK(range.rc == 1);
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
  CHECK(designs_bad.rc == 1);
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

namespace {
// Runs the CLI with --output into a fresh folder; checks a failure left nothing behind.
Cli run_bad(const std::string& args) {
  TempDir out;
  auto r = cli(args + " -o " + q(out.path / "result.txt"));
  CHECK(r.rc != 0);
  CHECK(out.entries().empty());  // no result.txt, no result.txt.tmp-*
  return r;
}
}  // namespace

TEST_CASE("bad plugins: clear message naming the file, non-zero exit, nothing written", "[plugins][bad]") {
  SECTION("a file that is not a shared library") {
    TempDir d;
    std::ofstream(d.path / "junk.so") << "this is not an ELF file\n";
    auto r = run_bad("run -s junk -w uniform --plugin-dir " + q(d.path));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (d.path / "junk.so").string()));
    CHECK(contains(r.err, "not a loadable shared library: file too short"));  // dlerror's reason, file named once
    CHECK_FALSE(contains(r.err, "): "));  // not Boost's wrapper with its stale errno ("): Bad file descriptor")
    auto l = cli("plugins --plugin-dir " + q(d.path));
    CHECK(l.rc == 0);
    CHECK(contains(l.err, "junk.so"));
  }
  SECTION("a library without the entry symbol") {
    auto r = run_bad("run -s ops-reports -w no-entry --plugin-dir " + q(kCases / "no-entry"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "no-entry" / "no-entry.so").string()));
    CHECK(contains(r.err, "no entry symbol 'headsep_plugin_entry'"));
  }
  SECTION("an ABI major mismatch") {
    auto r = run_bad("run -s ops-reports -w from-the-future --plugin-dir " + q(kCases / "abi-major"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "abi-major" / "from-the-future.so").string()));
    CHECK(contains(r.err, "plugin ABI 99.3"));
    CHECK(contains(r.err, "ABI " + std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + "." + std::to_string(HEADSEP_PLUGIN_ABI_MINOR)));
    REQUIRE_THROWS_WITH(inspect_plugin(kCases / "abi-major" / "from-the-future.so"), Catch::Contains("99.3"));
  }
  SECTION("a descriptor with a missing required function") {
    auto r = run_bad("run -s ops-reports -w no-weights --plugin-dir " + q(kCases / "missing-fn"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "missing-fn" / "no-weights.so").string()));
    CHECK(contains(r.err, "lacks required descriptor field 'weights'"));
  }
  SECTION("a plugin whose create fails") {
    auto r = run_bad("run -s ops-reports -w create-fails --plugin-dir " + q(kCases / "create-fails"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "create-fails" / "create-fails.so").string()));
    CHECK(contains(r.err, "create failed: the model file 'weights.bin' does not exist"));
  }
  const auto bad = kCases / "bad-weights";
  const std::string file = (bad / "bad-weights.so").string();
  SECTION("a C++ plugin that throws in its constructor") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=throw-create --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "constructor exploded on purpose"));
  }
  SECTION("a C++ plugin that throws while weighting") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=throw --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "weights() exploded on purpose"));
  }
  SECTION("a weighting scheme that returns NaN") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=nan -p reports=10 --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "report '#1'"));
    CHECK(contains(r.err, "scenario 'bad-weights'"));
    CHECK(contains(r.err, "head1 weight of token 2 is nan"));
  }
  SECTION("a weighting scheme that returns negative weights") {
    auto r = run_bad("run --input " + q(kSeedCsv) + " -w bad-weights -p mode=negative --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "report 'proc_valve_lockout', scenario 'balanced_heads'"));
    CHECK(contains(r.err, "is -0.25"));
  }
  SECTION("two plugins with the same name") {
    TempDir d;
    fs::copy_file(fs::path(HEADSEP_BINARY_DIR) / "plugins" / "uniform.so", d.path / "my-uniform.so");
    auto r = run_bad("run -s ops-reports -w uniform --plugin-dir " + q(d.path));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, "two plugins are named 'uniform'"));
    CHECK(contains(r.err, (d.path / "my-uniform.so").string()));
    CHECK(contains(r.err, (fs::path(HEADSEP_BINARY_DIR) / "plugins" / "uniform.so").string()));
  }
  SECTION("an unknown plugin name lists what exists") {
    auto r = run_bad("run -s ops-reports -w nope");
    CHECK(r.rc == 1);
    CHECK(contains(r.err, "no weighting plugin named 'nope'"));
    CHECK(contains(r.err, "axis-focus"));
  }
}

TEST_CASE("a newer ABI minor with a longer descriptor is accepted", "[plugins]") {
  auto info = inspect_plugin(kCases / "newer-minor" / "newer-minor.so");
  CHECK(info.abi_major == 1);
  CHECK(info.abi_minor == HEADSEP_PLUGIN_ABI_MINOR + 7);
  auto r = cli("run -s ops-reports -w newer-minor -p reports=3 --format text --plugin-dir " + q(kCases / "newer-minor"));
  CHECK(r.rc == 0);
  CHECK(contains(r.out, "[newer-minor]"));
}

TEST_CASE("HEADSEP_PLUGIN_PATH is searched, the current directory is not", "[plugins]") {
  auto env = sh("HEADSEP_PLUGIN_PATH=" + q(kCases / "newer-minor") + " " + q(kCli) + " plugins");
  CHECK(contains(env.out, "newer-minor"));
  auto cwd = sh("cd " + q(kCases / "newer-minor") + " && " + q(kCli) + " plugins");
  CHECK_FALSE(contains(cwd.out, "newer-minor"));
}

TEST_CASE("an out-of-tree plugin builds against an installed headsep and runs", "[plugins][install][slow]") {
  TempDir t;
  const auto prefix = t.path / "prefix", build = t.path / "build", drop = t.path / "drop";
  const std::string cmake = HEADSEP_CMAKE_COMMAND;
  auto inst = sh(q(cmake) + " --install " + q(HEADSEP_BINARY_DIR) + " --prefix " + q(prefix));
  INFO(inst.out << inst.err);
  REQUIRE(inst.rc == 0);
  REQUIRE(fs::exists(prefix / "lib" / "headsep" / "plugins" / "ops-reports.so"));
  auto conf = sh(q(cmake) + " -S " + q(std::string(HEADSEP_SOURCE_DIR) + "/examples/plugin-template") + " -B " + q(build) +
                 " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" + q(HEADSEP_CXX_COMPILER) +
                 " -DCMAKE_PREFIX_PATH=" + q(prefix));
  INFO(conf.out << conf.err);
  REQUIRE(conf.rc == 0);
  auto bld = sh(q(cmake) + " --build " + q(build));
  INFO(bld.out << bld.err);
  REQUIRE(bld.rc == 0);
  fs::create_directories(drop);
  fs::copy_file(build / "template-reports.so", drop / "template-reports.so");
  // The installed runtime: its own plugins from <prefix>/lib/headsep/plugins, the new one from --plugin-dir.
  const auto headsep = prefix / "bin" / "headsep";
  auto list = sh(q(headsep) + " plugins --plugin-dir " + q(drop));
  CHECK(contains(list.out, "template-reports"));
  CHECK(contains(list.out, (prefix / "lib" / "headsep" / "plugins" / "axis-focus.so").string()));
  auto run = sh(q(headsep) + " run --plugin-dir " + q(drop) + " -s template-reports -w axis-focus -p reports=3 -p prefix=demo --format text");
  INFO(run.err);
  REQUIRE(run.rc == 0);
  CHECK(contains(run.out, "report_id = 'demo-2'"));
  CHECK(contains(run.out, "tokens = ['decision', 'evidence', 'condition']"));
}

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
