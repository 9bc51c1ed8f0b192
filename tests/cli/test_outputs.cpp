// Outputs and options of a run (issue 23): two options naming one file are refused before the run;
// every output's folder is checked before the work; under a memory limit (ulimit -v) nothing hangs;
// usage errors share exit status 2. The all-or-nothing commit: tests/engine/test_faults.cpp.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/model_dir.hpp"

#include "test_util.hpp"

using namespace testutil;
using Catch::Contains;

namespace {
const std::string kSynth = "run -s ops-reports -p reports=50 -w axis-focus --quiet ";
}

TEST_CASE("two outputs on one file are refused before the run, naming both options", "[cli][output]") {
  TempDir dir;
  const std::string real = dir.file("real.jsonl");
  write_file(real, "keep me");
  REQUIRE(::symlink(real.c_str(), dir.file("link.jsonl").c_str()) == 0);
  REQUIRE(::link(real.c_str(), dir.file("hard.jsonl").c_str()) == 0);
  fs::create_directories(dir.file("sub"));
  struct Case {
    std::string args, first, second;
  };
  const std::vector<Case> cases = {
      {"--summary " + shell_quote(dir.file("x.jsonl")) + " --per-report " + shell_quote(dir.file("x.jsonl")), "--per-report",
       "--summary"},
      {"-o " + shell_quote(dir.file("x.csv")) + " --per-report " + shell_quote(dir.file("sub/../x.csv")), "--output",
       "--per-report"},
      {"--summary " + shell_quote(dir.file("link.jsonl")) + " --per-report " + shell_quote(real), "--per-report", "--summary"},
      {"--summary " + shell_quote(dir.file("hard.jsonl")) + " --attention " + shell_quote(real), "--summary", "--attention"},
      {"--trace " + shell_quote(real) + " --summary " + shell_quote(dir.file("./real.jsonl")), "--summary", "--trace"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    auto r = run_cli(kSynth + c.args);
    INFO(r.err);
    CHECK(r.status == 2);  // was: exit 0, one output silently lost
    CHECK_THAT(r.err, Contains(c.first) && Contains(c.second) && Contains("are the same file"));
  }
  CHECK(read_file(real) == "keep me");
  for (const auto& e : fs::directory_iterator(dir.path)) {
    const auto name = e.path().filename().string();
    CHECK((name == "real.jsonl" || name == "link.jsonl" || name == "hard.jsonl" || name == "sub"));
  }
}

TEST_CASE("an output folder that cannot take the file fails before the work, naming the option", "[cli][output]") {
  // Was: the whole run computed, then "cannot create output".
  for (const std::string opt : {"--summary", "--per-report", "--trace", "--report-html"}) {
    auto r = run_cli(kSynth + opt + " /nonexistent/out.jsonl");
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains(opt + " /nonexistent/out.jsonl: cannot create output"));
  }
  TempDir dir;
  auto r = run_cli(kSynth + "--summary " + shell_quote(dir.path.string()));
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("--summary " + dir.path.string() + ": is a folder"));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // sanitizers reserve terabytes of address space
TEST_CASE("under a memory limit (ulimit -v) commands finish instead of hanging", "[cli][limits]") {
  // Was: OpenBLAS's thread pool, started at load, spun on a failed allocation: every command hung.
  TempDir dir;
  for (const std::string& args : {std::string("plugins"), kSynth + "--summary " + shell_quote(dir.file("s.jsonl")),
                                 std::string("run -s ops-reports -p reports=20 -p d_model=16 -w qkv --quiet --summary ") +
                                     shell_quote(dir.file("q.jsonl"))}) {
    auto r = run_shell("ulimit -v 150000; timeout 60 " + shell_quote(HEADSEP_CLI) + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.status == 0);
  }
}
#endif

TEST_CASE("usage errors share exit status 2, out-of-range plugin values included", "[cli][usage]") {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"run -s ops-reports -p reports=-5 -w uniform", "parameter 'reports' must be >= 0, got -5"},  // was exit 1
      {"run -s ops-reports -p reports=abc -w uniform", "expects an integer, got 'abc'"},
      {"run -s ops-reports -p d_model=8 -w qkv -p qkv.heads=0", "parameter 'heads' must be in 1.."},
      {"run -s ops-reports -w uniform --top -1", "--top"},             // was: silently "keep all"
      {"run -s ops-reports -w uniform --bins 1000000000", "--bins"},  // was: "out of memory"
  };
  for (const auto& c : cases) {
    auto r = run_cli(c.args + " --quiet");
    INFO(c.args << "\n" << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains(c.message));
  }
}

TEST_CASE("run --model over no report writes a summary with an empty scenarios list", "[cli][model]") {
  TempDir dir;
  auto r = run_cli("run --model " + shell_quote(model_dir().string()) + " -s ops-text -p reports=0 --quiet --summary " +
                   shell_quote(dir.file("s.jsonl")));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_file(dir.file("s.jsonl")));
  REQUIRE(j.contains("scenarios"));  // was: no key at all
  CHECK(j["scenarios"].empty());
}

TEST_CASE("CSV input to an attention scheme: X's columns follow the file, not --axes", "[cli][attention]") {
  // Was: X's columns in --axes order, so reordering --axes changed every attention map (exit 0).
  TempDir dir;
  const std::string csv = source_path("data/qkv-multihead-report-scenarios.csv");
  auto maps = [&](const std::string& axes, const std::string& name) {
    auto r = run_cli("run -i " + shell_quote(csv) + " -w qkv -p qkv.input=features -p qkv.heads=2 --quiet --axes '" + axes +
                     "' --attention " + shell_quote(dir.file(name)) + " --attention-reports all");
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::vector<nlohmann::json> v;
    const std::string text = read_file(dir.file(name));
    for (std::size_t at = 0, end; at < text.size(); at = end + 1) {
      end = text.find('\n', at);
      const auto j = nlohmann::json::parse(text.substr(at, end - at));
      v.push_back({j["single"], j["heads"]});
    }
    return v;
  };
  const auto a = maps("d=decision_axis;e=evidence_axis;c=condition_axis", "a.jsonl");
  REQUIRE(a.size() > 3);
  CHECK(a == maps("c=condition_axis;d=decision_axis;e=evidence_axis", "b.jsonl"));
  CHECK(a == maps("e=evidence_axis+condition_axis;d=decision_axis", "c.jsonl"));
  // A column asked for twice is refused.
  auto twice = run_cli("run -i " + shell_quote(csv) + " -w qkv -p csv.features=decision_axis,decision_axis --quiet --axes d=decision_axis");
  CHECK(twice.status == 1);
  CHECK_THAT(twice.err, Contains("feature column 'decision_axis' is asked for twice"));
}

TEST_CASE("a text CSV with a column named twice is refused, as a seed CSV is", "[cli][model]") {
  TempDir dir;
  write_file(dir.file("t.csv"), "report_id,text,text\na,stop the line,resume\n");
  auto r = run_cli("run --model " + shell_quote(model_dir().string()) + " -s text -p path=" + shell_quote(dir.file("t.csv")) +
                   " --quiet --summary " + shell_quote(dir.file("s.jsonl")));
  INFO(r.err);
  CHECK(r.status == 1);  // was: exit 0, the last `text` column read
  CHECK_THAT(r.err, Contains("duplicate column name 'text' (columns 2 and 3)"));
  CHECK_FALSE(fs::exists(dir.file("s.jsonl")));
}
