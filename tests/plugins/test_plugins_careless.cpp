// Careless plugins (issue 23): rows, offsets, features, given weights and embeddings a plugin was
// handed but never wrote; an attention spec's own baseline; prints to stdout; blame for bad values;
// plugin text that is huge or holds control bytes; a data symbol as entry point; crashes and exit()
// inside a plugin. Each case was exit 0 with numbers that did not come from the inputs, or a crash
// without a message, before the host's checks below.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_plugins.hpp"

namespace fs = std::filesystem;
using namespace plugin_tests;

namespace {

const fs::path kGen = kCases / "careless-gen" / "careless-gen.so";
const fs::path kW = kCases / "careless-weighting" / "careless-weighting.so";
const std::string kDirs = " --plugin-dir " + q(kGen.parent_path()) + " --plugin-dir " + q(kW.parent_path());

// `args` must fail with exit 1, naming `plugin_file` and every part of `expect`, on one clean
// line, leaving nothing in the output folder.
void refused(const std::string& args, const fs::path& plugin_file, const std::vector<std::string>& expect) {
  TempDir out;
  auto r = cli(args + kDirs + " --per-report " + q(out.path / "rows.csv") + " --summary " + q(out.path / "s.json"));
  INFO("headsep " << args << "\n" << r.err);
  CHECK(r.rc == 1);
  CHECK(contains(r.err, plugin_file.string()));
  for (const auto& part : expect) CHECK(contains(r.err, part));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(out.entries().empty());
}

std::string weighting(const std::string& mode, const std::string& more = "") {
  return "run -s ops-reports -p reports=30 -w careless-weighting -p careless-weighting.mode=" + mode + " --threads 1 " + more;
}
std::string generator(const std::string& mode, const std::string& w, const std::string& more = "") {
  return "run -s careless-gen -p careless-gen.mode=" + mode + " -w " + w + " --threads 1 " + more;
}

}  // namespace

TEST_CASE("careless plugins behaving well run", "[plugins][careless]") {
  TempDir out;
  for (const std::string& args : {weighting("ok"), weighting("ok", "--slot-by-slot"), generator("ok", "table"),
                                  generator("ok", "careless-weighting"), generator("empty", "uniform")}) {
    auto r = cli(args + kDirs + " --quiet --summary " + q(out.path / "s.json"));
    INFO(args << "\n" << r.err);
    CHECK(r.rc == 0);
  }
}

TEST_CASE("weights a scheme never wrote are refused by name, in every call path", "[plugins][careless]") {
  // Was: exit 0, the unwritten rows read as whatever the buffer held (zeros: contexts of 0).
  for (const char* path : {"", "--slot-by-slot", "--precision f32"}) {
    CAPTURE(path);
    refused(weighting("skip-head", path), kW, {"head2 weight of token 1 was not written by weights()", "row 2, head 2"});
    refused(weighting("half-tokens", path), kW, {"was not written by weights()"});
    refused(weighting("skip-baseline", path), kW, {"single weight of token 1 was not written", "row 0, the single-head baseline"});
  }
  // ABI 1.3: every slot asked at once, slot 0 filled alone (was: the other scenario's contexts all 0).
  refused(weighting("slot0-only"), kW, {"scenario 'design_b'", "was not written by weights()", "of slot 1"});
  TempDir out;
  auto r = cli(weighting("slot0-only", "--slot-by-slot") + kDirs + " --quiet --summary " + q(out.path / "s.json"));
  CHECK(r.rc == 0);  // one slot at a time it fills what it is asked
  // Per-query maps: one query row of head 1 left unwritten.
  refused(weighting("maps-skip"), kW, {"head1 attention row of query 1, key 1 was not written by weights()"});
}

TEST_CASE("buffers a generator never wrote are refused by name", "[plugins][careless]") {
  refused(generator("feature-half", "uniform"), kGen, {"feature 'evidence_axis' of token", "was not written"});
  refused(generator("offset-skip", "uniform"), kGen, {"token offset", "was not written"});
  refused(generator("given-skip", "table"), kGen, {"given head2 weight was not written"});
  refused(generator("embedding-skip", "qkv"), kGen, {"embedding value 1 of 4 was not written"});
}

TEST_CASE("bad values are blamed on the plugin that produced them", "[plugins][careless]") {
  // Was: blamed on `table` (given weights) and on `qkv` (embeddings).
  refused(generator("given-nan", "table", "--chunk 2"), kGen, {"report '#2'", "given head1 weight is nan"});
  refused(generator("given-negative", "table"), kGen, {"given head1 weight is -0.5", "(weights must be finite and >= 0)"});
  refused(generator("embedding-nan", "qkv"), kGen, {"token 1: embedding value 3 of 4 is nan"});
  // Was: an overflow naming neither plugin.
  refused(generator("big", "uniform"), kGen, {"overflowed", "weighting plugin 'uniform'"});
}

TEST_CASE("an attention spec's own baseline matrices are used over seeded heads", "[plugins][careless]") {
  TempDir out;
  auto run = [&](const std::string& mode) {
    const auto file = out.path / (mode + ".json");
    auto r = cli(weighting(mode, "--quiet") + kDirs + " --summary " + q(file));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    return slurp(file);
  };
  // Was: identical (the seeded baseline replaced the plugin's all-zero one).
  CHECK(run("spec-zero-baseline") != run("spec-seeded"));
  refused(weighting("spec-half-baseline"), kW, {"s_w_q, s_w_k and s_w_v are given together or not at all (NULL: s_w_k s_w_v)"});
  // The plugin named once (was: "LABEL: attention spec 0: LABEL: ...").
  TempDir out2;
  auto r = cli(weighting("spec-nan-baseline") + kDirs + " --summary " + q(out2.path / "s.json"));
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(contains(r.err, "attention spec 0: its matrices: s_w_q"));
  const auto first = r.err.find(kW.string());
  CHECK((first != std::string::npos && r.err.find(kW.string(), first + 1) == std::string::npos));
}

TEST_CASE("what plugins print never reaches the data on stdout", "[plugins][careless]") {
  // Was: "careless: ..." lines among the JSON rows, exit 0.
  auto r = cli(generator("print", "careless-weighting -p careless-weighting.mode=print", "--format jsonl --quiet") + kDirs);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::size_t lines = 0;
  for (std::size_t at = 0; at < r.out.size(); ++lines) {
    const auto end = r.out.find('\n', at);
    CHECK(r.out[at] == '{');
    at = end == std::string::npos ? r.out.size() : end + 1;
  }
  CHECK(lines == 80);  // 40 reports x 2 designs
  CHECK(contains(r.err, "careless: garbage from next_chunk"));
  CHECK(contains(r.err, "careless: raw write to fd 1"));
  CHECK(contains(r.err, "careless: hello from create"));
  // `-o /dev/stdout` is the data channel too.
  auto o = cli(generator("print", "uniform", "--format jsonl --quiet -o /dev/stdout") + kDirs);
  CHECK(o.rc == 0);
  CHECK(o.out.rfind("{", 0) == 0);
  CHECK_FALSE(contains(o.out, "careless"));
}

TEST_CASE("plugin text is bounded and escaped in messages", "[plugins][careless]") {
  auto r = cli(weighting("huge-error") + kDirs);
  CHECK(r.rc == 1);
  CHECK(r.err.size() < 4000);  // was: a 10 MB line
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(contains(r.err, "bad\\x1b[2J\\x0d\\x0afake line"));
  // A description holding ESC (valid UTF-8) in the listing.
  auto l = cli("plugins --plugin-dir " + q(kGen.parent_path()));
  CHECK(l.rc == 0);
  CHECK(l.out.find('\x1b') == std::string::npos);
  CHECK(contains(l.out, "on request \\x1b[2J(ESC: shown escaped)"));
}

TEST_CASE("a crash or exit() inside a plugin names the plugin and the call", "[plugins][careless]") {
  TempDir out;
  auto child = [&](const std::string& mode) {
    return testutil::run_child({"run", "-s", "ops-reports", "-p", "reports=30", "-w", "careless-weighting", "-p",
                                "careless-weighting.mode=" + mode, "--threads", "2", "--plugin-dir", kW.parent_path().string(),
                                "--temporaries", "named", "--summary", (out.path / "s.json").string(), "--per-report",
                                (out.path / "rows.csv").string()});
  };
  auto segv = child("segv");
  INFO(segv.err);
  CHECK(segv.status == 128 + SIGSEGV);
  CHECK(contains(segv.err, "headsep: fatal: SIGSEGV in weighting plugin 'careless-weighting' (" + kW.string() +
                               "), during its weights()"));
  auto ab = child("abort");
  INFO(ab.err);
  CHECK(ab.status == 128 + SIGABRT);
  CHECK(contains(ab.err, "fatal: SIGABRT in weighting plugin 'careless-weighting'"));
  auto ex = child("exit");  // exit(0) on a worker thread: was SIGSEGV in oneTBB's finalizer, or exit 0
  INFO(ex.err);
  CHECK(ex.status == 1);
  CHECK(contains(ex.err, "headsep: error: weighting plugin 'careless-weighting' (" + kW.string() +
                             ") called exit() during its weights()"));
  CHECK(out.entries().empty());
}

TEST_CASE("a library whose entry point is a data symbol is skipped, naming it", "[plugins][careless]") {
  const fs::path bad = kCases / "data-entry" / "data-entry.so";
  // Was: exit 139 for every command that scanned the folder.
  auto l = cli("plugins --plugin-dir " + q(bad.parent_path()));
  INFO(l.err);
  CHECK(l.rc == 0);
  CHECK(contains(l.err, "headsep: warning: skipped " + bad.string() + ": 'headsep_plugin_entry' is not a function"));
  TempDir out;
  auto r = cli("run -s ops-reports -p reports=10 -w uniform --quiet --plugin-dir " + q(bad.parent_path()) + " --summary " +
               q(out.path / "s.json"));
  CHECK(r.rc == 0);
}

TEST_CASE("outputs are checked before any plugin runs", "[plugins][careless]") {
  // Was: the whole run computed (the generator called for every chunk), then "cannot create output".
  auto r = cli(generator("print", "uniform", "--quiet --summary /nonexistent/s.json") + kDirs);
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(contains(r.err, "--summary /nonexistent/s.json: cannot create output"));
  CHECK_FALSE(contains(r.err, "careless: garbage"));
}
