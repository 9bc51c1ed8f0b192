// --profile and --trace on `headsep run --model DIR` (run_model's own pipeline, the engine's
// profiler): the model's stages (input or generation, token ids + axes, the model forward and its
// parts, the head metrics, the serial merge), per-thread busy/idle, the diagnosis, the summary's "profile"
// section and a Chrome trace covering every batch; without --profile no output byte changes (the
// run's measured seconds aside). Few MiniLM reports (the suite runs under TSan too), no absolute
// times asserted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "model/model_dir.hpp"
#include "test_util.hpp"

using json = nlohmann::ordered_json;
using Catch::Contains;
using testutil::run_cli;
using testutil::shell_quote;

namespace {

std::string model_arg() { return " --model " + shell_quote(testutil::model_dir().string()); }

// stdout without its last line (the run's time and throughput).
std::string without_timing(const std::string& out) {
  std::string s = out;
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(0, s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n'));
}

}  // namespace

TEST_CASE("model --profile: the model's stages, threads and diagnosis, and no output byte changed without it", "[model][profile][cli]") {
  testutil::TempDir tmp;
  // 8 reports in 4 batches of 2 on 2 threads (ops-text is random access: generation in parallel).
  // --token-axes: every token has an axis value, so no "no silent zeros" warning on stderr.
  const std::string job = "run -s ops-text -p reports=8 -p seed=7 --top 3 --threads 2 --chunk 2 --token-axes all" + model_arg();
  auto plain = run_cli(job + " --summary " + shell_quote(tmp.file("a.json")));
  auto prof = run_cli(job + " --profile --summary " + shell_quote(tmp.file("b.json")) + " --trace " + shell_quote(tmp.file("t.json")));
  INFO(plain.err << prof.err);
  REQUIRE(plain.status == 0);
  REQUIRE(prof.status == 0);
  CHECK(plain.err.empty());
  CHECK(without_timing(plain.out) == without_timing(prof.out));
  CHECK_THAT(prof.out, Contains("mean attention entropy"));
  CHECK_THAT(prof.err, Contains("model forward (") && Contains("  - products (weights)") && Contains("head metrics") && Contains("generate (+ tokenize)") &&
                           Contains("merge: scenario sums in batch order (serial)") && Contains("thread 0") &&
                           Contains("diagnosis: "));

  // The summary: byte for byte the same without its "profile" member and the run's seconds.
  const std::string a_text = testutil::read_file(tmp.file("a.json"));
  json a = json::parse(a_text), b = json::parse(testutil::read_file(tmp.file("b.json")));
  CHECK_FALSE(a.contains("profile"));
  REQUIRE(b.contains("profile"));
  const json p = b["profile"];
  b.erase("profile");
  b["seconds"] = a["seconds"];
  b["run"]["execution"] = a["run"]["execution"];  // the command lines differ (docs/SUMMARY.md)
  CHECK(b.dump(1) + "\n" == a_text);

  // The profile section: the model's stages, each batch once through the per-batch ones; stage
  // times tile the threads' busy time (the same clock reads, summed two ways).
  CHECK(p["batches"] == 4);
  CHECK(p["reports"] == 8);
  std::map<std::string, json> by_kind;
  double stage_busy = 0, stage_cpu = 0, thread_busy = 0, thread_cpu = 0;
  for (const auto& s : p["stages"]) {
    by_kind[s["kind"].get<std::string>()] = s;
    stage_busy += s["busy_s"].get<double>(), stage_cpu += s["cpu_s"].get<double>();
  }
  for (const char* k : {"input", "generate", "axes", "forward", "heads", "consume"}) {
    INFO(k);
    REQUIRE(by_kind.count(k));
  }
  CHECK(by_kind["input"]["name"] == "input (dispatch)");
  CHECK(by_kind["input"]["serial"] == true);
  CHECK(by_kind["consume"]["serial"] == true);
  CHECK_THAT(by_kind["generate"]["plugin"].get<std::string>(), Contains("ops-text"));
  for (const char* k : {"axes", "forward", "heads", "consume"}) {
    INFO(k);
    CHECK(by_kind[k]["batches"] == 4);
  }
  // The forward does nearly all the work of a model run.
  CHECK(by_kind["forward"]["busy_s"].get<double>() > by_kind["consume"]["busy_s"].get<double>());
  REQUIRE(p["thread_detail"].size() >= 1);
  for (const auto& t : p["thread_detail"]) {
    thread_busy += t["busy_s"].get<double>(), thread_cpu += t["cpu_s"].get<double>();
    CHECK(t["busy_s"].get<double>() + t["idle_s"].get<double>() == Approx(p["wall_s"].get<double>()).margin(1e-3));
  }
  CHECK(std::abs(stage_busy - thread_busy) <= 0.005 * thread_busy + 1e-3);
  CHECK(std::abs(stage_cpu - thread_cpu) <= 0.005 * thread_cpu + 1e-3);
  REQUIRE(p["diagnosis"].size() >= 1);
  // The forward's parts tile it (clock reads inside the forward stage: a little less than it);
  // an encoder runs no RoPE and no separate activation pass (GELU is fused into its product).
  REQUIRE(p.contains("forward_parts_s"));
  const json& parts = p["forward_parts_s"];
  double part_sum = 0;
  for (const auto& [name, sec] : parts.items()) part_sum += sec.get<double>();
  const double forward_busy = by_kind["forward"]["busy_s"].get<double>();
  CHECK(part_sum <= forward_busy * 1.001 + 1e-4);
  CHECK(part_sum >= 0.9 * forward_busy);
  CHECK(parts["products (weights)"].get<double>() > 0);
  CHECK(parts["attention + head metrics"].get<double>() > 0);
  CHECK(parts["RoPE + K copies"].get<double>() == 0);
  CHECK(parts["activations (GELU, SiLU x up)"].get<double>() == 0);

  // The trace: Chrome trace-event JSON, every batch through the model's stages.
  const json t = json::parse(testutil::read_file(tmp.file("t.json")));
  std::map<std::uint64_t, std::set<std::string>> stages_of;
  for (const auto& e : t["traceEvents"]) {
    for (const char* f : {"name", "ph", "pid", "tid"}) REQUIRE(e.contains(f));
    if (e["ph"] != "X") continue;
    REQUIRE(e["ts"].is_number());
    REQUIRE(e["dur"].is_number());
    stages_of[e["args"]["batch"].get<std::uint64_t>()].insert(e["name"].get<std::string>());
  }
  REQUIRE(stages_of.size() == 4);
  for (std::uint64_t i = 0; i < 4; ++i) {
    INFO("batch " << i);
    for (const char* s : {"input (dispatch)", "generate (+ tokenize)", "token ids + axes projection",
                          "head metrics (sums, sketches, top)", "merge: scenario sums in batch order"})
      CHECK(stages_of[i].count(s));
    bool forward = false;
    for (const auto& s : stages_of[i]) forward = forward || s.rfind("model forward (", 0) == 0;
    CHECK(forward);
  }
}

TEST_CASE("model --profile: a sequential text source's serial input stage, named with its plugin", "[model][profile][cli]") {
  testutil::TempDir tmp;
  const std::string csv = tmp.file("r.csv");
  testutil::write_file(csv,
                       "report_id,scenario,text\n"
                       "a,night,\"Stop decision: pressure anomaly, restart when stable.\"\n"
                       "b,day,Hold decision until the seal is replaced.\n"
                       "c,night,Return when vibration is below 4 mm/s.\n");
  const std::string job = "run -q -s text -p path=" + shell_quote(csv) + model_arg() + " --chunk 1 --threads 2";
  auto plain = run_cli(job + " --summary " + shell_quote(tmp.file("a.json")));
  auto prof = run_cli(job + " --profile --summary " + shell_quote(tmp.file("b.json")));
  INFO(plain.err << prof.err);
  REQUIRE(plain.status == 0);
  REQUIRE(prof.status == 0);
  CHECK(plain.out.empty());
  CHECK(prof.out.empty());  // -q: the table stays on stderr, the summary unchanged
  CHECK_THAT(prof.err, Contains("input (read + parse + tokenize) (serial)") && Contains("diagnosis: "));
  json a = json::parse(testutil::read_file(tmp.file("a.json"))), b = json::parse(testutil::read_file(tmp.file("b.json")));
  const json p = b["profile"];
  b.erase("profile");
  b["seconds"] = a["seconds"];
  b["run"]["execution"] = a["run"]["execution"];  // the command lines differ (docs/SUMMARY.md)
  CHECK(a == b);
  CHECK(p["batches"] == 3);
  bool input = false;
  for (const auto& s : p["stages"])
    if (s["kind"] == "input") {
      input = true;
      CHECK(s["name"] == "input (read + parse + tokenize)");
      CHECK_THAT(s["plugin"].get<std::string>(), Contains("'text'"));
      CHECK(s["batches"] == 3);
    } else {
      CHECK(s["kind"] != "generate");  // a sequential source generates in its input stage
    }
  CHECK(input);
  // A failed run writes neither the summary nor the trace.
  const std::string bad = tmp.file("bad.csv");
  testutil::write_file(bad, "report_id,text\na,fine text\nb,bad \xff byte\n");  // (an empty text is a report)
  auto fail = run_cli("run -q -s text -p path=" + shell_quote(bad) + model_arg() + " --profile --summary " +
                      shell_quote(tmp.file("c.json")) + " --trace " + shell_quote(tmp.file("u.json")));
  CHECK(fail.status == 1);
  CHECK_FALSE(std::filesystem::exists(tmp.file("c.json")));
  CHECK_FALSE(std::filesystem::exists(tmp.file("u.json")));
}

TEST_CASE("headsep scaling --model: the model's run at each count, the same summary at every count", "[model][profile][cli]") {
  testutil::TempDir tmp;
  // 6 ops-text reports in batches of 2 at 1 and 2 threads (few reports: the suite runs under TSan).
  auto r = run_cli("scaling -s ops-text -p reports=6 -p seed=3 --chunk 2 --counts 1,2 -q --json " +
                   shell_quote(tmp.file("s.json")) + model_arg());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("speedup") && Contains("efficiency"));
  const json j = json::parse(testutil::read_file(tmp.file("s.json")));
  CHECK(j["outputs_identical"] == true);
  CHECK_THAT(j["job"].get<std::string>(), Contains("model"));
  REQUIRE(j["counts"].size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& c = j["counts"][i];
    CHECK(c["threads"] == i + 1);
    CHECK(c["identical"] == true);
    CHECK(c["reports"] == 6);
    std::set<std::string> kinds;  // the model's own stages, profiled at every count
    for (const auto& s : c["profile"]["stages"]) kinds.insert(s["kind"].get<std::string>());
    CHECK((kinds.count("forward") && kinds.count("heads") && kinds.count("consume")));
  }
  auto all = run_cli("scaling -s ops-text -p reports=2 --counts 1 --check all" + model_arg());
  CHECK(all.status == 2);
  CHECK_THAT(all.err, Contains("--check summary"));
}
