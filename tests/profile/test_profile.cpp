// The profiler: --profile names the bottleneck (a weighting plugin that sleeps), its numbers add
// up, --trace is Chrome trace-event JSON covering every batch (bounded when long), `headsep
// scaling` gives identical outputs at every thread count, and no output changes without --profile.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>
#include <sstream>

#include "headsep/plugin_host.hpp"
#include "headsep/profile.hpp"
#include "headsep/run.hpp"
#include "headsep/summary.hpp"
#include "profile/scaling.hpp"
#include "test_util.hpp"

using namespace testutil;
using namespace headsep;
using Catch::Contains;

namespace {

const std::string kSleepDir = HEADSEP_PROFILE_PLUGIN_DIR;

struct Job {
  PluginRegistry reg = PluginRegistry::discover(plugin_search_path({}));
  std::unique_ptr<ReportSource> source;
  std::unique_ptr<Weighting> weighting;
  AxisMap axes;
  Job(std::int64_t reports, const std::string& w = "axis-focus") {
    source = open_scenario_plugin(reg, "ops-reports",
                                  resolve_params(reg.require("ops-reports", PluginKind::scenario), {{"reports", std::to_string(reports)}}));
    weighting = open_weighting_plugin(reg, w, resolve_params(reg.require(w, PluginKind::weighting), {}), source->schema());
    auto specs = parse_axes(kSeedAxes);
    axes = AxisMap::bind(specs, source->schema().feature_names);
  }
};

}  // namespace

TEST_CASE("profile: names a weighting plugin that sleeps as the dominant stage", "[profile]") {
  TempDir dir;
  auto r = run_cli("run --plugin-dir " + shell_quote(kSleepDir) +
                   " -s ops-reports -p reports=4000 -w sleep-weighting -p us=20000 --chunk 500 --threads 2 -q --profile"
                   " --summary " + shell_quote(dir.file("s.json")));
  REQUIRE(r.status == 0);
  // The headline names the plugin and its file; the weighting stages top the table.
  CHECK_THAT(r.err, Contains("diagnosis: weighting plugin 'sleep-weighting' (") && Contains("sleep-weighting.so)"));
  CHECK_THAT(r.err, Contains("it waits more than it computes"));
  auto j = nlohmann::json::parse(read_file(dir.file("s.json")));
  REQUIRE(j.contains("profile"));
  const auto& p = j["profile"];
  double weighting = 0, total = 0;
  for (const auto& s : p["stages"]) {
    total += s["busy_s"].get<double>();
    if (s["kind"] == "weighting") {
      weighting += s["busy_s"].get<double>();
      CHECK_THAT(s["plugin"].get<std::string>(), Contains("weighting plugin 'sleep-weighting'"));
      CHECK(s["batches"] == 8);
    }
  }
  // 8 batches x 1 scenario x 20 ms asleep against microseconds of everything else.
  CHECK(weighting > 0.8 * total);
  CHECK(weighting >= 8 * 0.020 * 0.99);
  CHECK(p["batches"] == 8);
  CHECK(p["reports"] == 4000);
  CHECK(p["counters"]["note"].get<std::string>().rfind("hardware counters", 0) == 0);
}

TEST_CASE("profile: stage times add up to the threads' busy time", "[profile]") {
  // The same clock reads are summed per stage and per thread: stage wall (and CPU) times summed
  // over stages equal the threads' busy wall (CPU) summed over threads within 0.5 % + 1 ms (they
  // tile each filter invocation); no thread is busy longer than the run; every batch passes
  // every per-batch stage once.
  for (unsigned threads : {1u, 2u, 3u}) {
    Job job(200000);
    Summary summary(RunInfo{job.axes.names(), job.weighting->heads()});
    Profiler prof;
    RunOptions opt;
    opt.threads = threads;
    opt.chunk_reports = 4096;
    opt.simd = default_level();
    opt.profiler = &prof;
    auto stats = run(*job.source, *job.weighting, job.axes, opt, {&summary});
    const ProfileResult& p = prof.result();
    double stage_busy = 0, stage_cpu = 0, thread_busy = 0, thread_cpu = 0;
    for (const auto& s : p.stages) {
      stage_busy += s.busy_s, stage_cpu += s.cpu_s;
      CHECK(s.active_s <= s.busy_s * 1.01 + 1e-3);  // the union of intervals (read under a lock)
      CHECK(s.active_s <= p.wall_s + 1e-3);
      if (s.kind == "generate" || s.kind == "axes" || s.kind == "kernels" || s.kind == "weighting" || s.kind == "prepare" ||
          s.kind == "consume")
        CHECK(s.batches == stats.batches);
    }
    for (const auto& t : p.thread_list) {
      thread_busy += t.busy_s, thread_cpu += t.cpu_s;
      CHECK(t.busy_s <= p.wall_s + 1e-3);
      CHECK(t.busy_s + t.idle_s == Approx(p.wall_s).margin(1e-3));
    }
    INFO("threads " << threads << ": stages " << stage_busy << " s, threads " << thread_busy << " s");
    CHECK(std::abs(stage_busy - thread_busy) <= 0.005 * thread_busy + 1e-3);
    CHECK(std::abs(stage_cpu - thread_cpu) <= 0.005 * thread_cpu + 1e-3);
    CHECK(p.busy_s == Approx(stage_busy));
    CHECK(p.thread_list.size() <= threads + 1);  // TBB workers plus the calling thread
    CHECK(thread_busy <= double(p.thread_list.size()) * p.wall_s * 1.01 + 1e-3);
    double shares = 0;
    for (const auto& s : p.stages) shares += s.share;
    CHECK(shares == Approx(1.0));
    CHECK(p.reports == 200000);
    CHECK(p.groups == 600000);
    CHECK_FALSE(p.diagnosis.empty());
  }
}

TEST_CASE("profile: the JSON reads back into the same result (scaling --ranks reads rank 0's from its summary)", "[profile]") {
  Job job(50000);
  Summary summary(RunInfo{job.axes.names(), job.weighting->heads()});
  Profiler prof;
  RunOptions opt;
  opt.threads = 2;
  opt.chunk_reports = 4096;
  opt.profiler = &prof;
  run(*job.source, *job.weighting, job.axes, opt, {&summary});
  const ProfileResult& p = prof.result();
  const ProfileResult q = prof::profile_from_json(prof.json());
  CHECK(q.wall_s == p.wall_s);  // JSON doubles round-trip exactly
  CHECK(q.threads == p.threads);
  CHECK(q.batches == p.batches);
  CHECK(q.reports == p.reports);
  CHECK(q.groups == p.groups);
  CHECK(q.busy_s == p.busy_s);
  CHECK(q.cpu_s == p.cpu_s);
  REQUIRE(q.stages.size() == p.stages.size());
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    CHECK(q.stages[i].name == p.stages[i].name);
    CHECK(q.stages[i].kind == p.stages[i].kind);
    CHECK(q.stages[i].plugin == p.stages[i].plugin);
    CHECK(q.stages[i].serial == p.stages[i].serial);
    CHECK(q.stages[i].busy_s == p.stages[i].busy_s);
    CHECK(q.stages[i].active_s == p.stages[i].active_s);
    CHECK(q.stages[i].batches == p.stages[i].batches);
  }
  REQUIRE(q.thread_list.size() == p.thread_list.size());
  for (std::size_t i = 0; i < p.thread_list.size(); ++i) CHECK(q.thread_list[i].busy_s == p.thread_list[i].busy_s);
  CHECK(q.diagnosis == p.diagnosis);
  CHECK(q.counters_note == p.counters_note);
  CHECK_THROWS_WITH(prof::profile_from_json(R"({"wall_s": 1})"), Contains("profile JSON"));
}

TEST_CASE("trace: writes Chrome trace-event JSON covering every batch", "[profile]") {
  TempDir dir;
  auto r = run_cli("run -s ops-reports -w axis-focus -p reports=30000 --chunk 1000 --threads 2 -q --summary " +
                   shell_quote(dir.file("s.json")) + " --trace " + shell_quote(dir.file("t.json")));
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());  // --trace alone prints nothing
  auto j = nlohmann::json::parse(read_file(dir.file("t.json")));
  CHECK_FALSE(nlohmann::json::parse(read_file(dir.file("s.json"))).contains("profile"));
  std::map<std::uint64_t, std::set<std::string>> stages_of;  // batch -> stage names
  std::size_t complete = 0;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("name"));
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    if (e["ph"] != "X") continue;
    ++complete;
    REQUIRE(e["ts"].is_number());
    REQUIRE(e["dur"].is_number());
    CHECK(e["dur"].get<double>() >= 0);
    const auto batch = e["args"]["batch"].get<std::uint64_t>();
    CHECK(e["args"]["reports"] == 1000);
    stages_of[batch].insert(e["name"].get<std::string>());
  }
  CHECK(complete > 0);
  REQUIRE(stages_of.size() == 30);
  for (std::uint64_t b = 0; b < 30; ++b) {
    INFO("batch " << b);
    REQUIRE(stages_of.count(b));
    // axis-focus weights every design in one call (ABI 1.3 HEADSEP_WEIGHTING_ALL_SLOTS).
    for (const char* s : {"input (dispatch)", "generate", "axes projection", "metric kernels", "validation",
                          "weighting [every scenario, one call]", "sink prepare: Summary", "sink consume: Summary"})
      CHECK(stages_of[b].count(s));
  }
}

TEST_CASE("trace: a long run's trace keeps the first batches, then an evenly strided sample", "[profile]") {
  Job job(100000);
  Summary summary(RunInfo{job.axes.names(), job.weighting->heads()});
  ProfileOptions po;
  po.trace = true;
  po.trace_full_batches = 8;
  po.trace_sampled_batches = 10;
  Profiler prof(po);
  RunOptions opt;
  opt.threads = 2;
  opt.chunk_reports = 500;  // 200 batches
  opt.profiler = &prof;
  auto stats = run(*job.source, *job.weighting, job.axes, opt, {&summary});
  REQUIRE(stats.batches == 200);
  auto j = nlohmann::json::parse(prof.trace_json());
  std::set<std::uint64_t> batches;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") batches.insert(e["args"]["batch"].get<std::uint64_t>());
  const std::uint64_t stride = prof.result().trace_stride;
  CHECK(stride == 32);  // indices 8..199: 192 of them, at most 10 kept -> stride 32 (6 kept)
  CHECK(batches.size() <= 18);
  CHECK(batches.size() == prof.result().trace_batches);
  for (std::uint64_t b = 0; b < 8; ++b) CHECK(batches.count(b));
  for (auto b : batches)
    if (b >= 8) CHECK((b - 8) % stride == 0);
  CHECK(batches.count(8 + 5 * 32));
}

TEST_CASE("headsep scaling: the same output at every thread count", "[profile][cli]") {
  TempDir dir;
  auto r = run_cli("scaling -s ops-reports -w axis-focus -p reports=40000 --chunk 2000 --counts 1,2,3 --check all -q --json " +
                   shell_quote(dir.file("scaling.json")));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("threads") && Contains("speedup") && Contains("efficiency"));
  auto j = nlohmann::json::parse(read_file(dir.file("scaling.json")));
  CHECK(j["outputs_identical"] == true);
  REQUIRE(j["counts"].size() == 3);
  unsigned expect[] = {1, 2, 3};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& c = j["counts"][i];
    CHECK(c["threads"] == expect[i]);
    CHECK(c["identical"] == true);
    CHECK(c["groups"] == 120000);
    CHECK(c["profile"]["stages"].size() > 5);
  }
  CHECK(j["counts"][0]["speedup"] == 1.0);
  auto bad = run_cli("scaling -s ops-reports -w axis-focus --counts 1,zero");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Contains("--counts: 'zero'"));
}

TEST_CASE("headsep scaling --repeat: counts interleaved, order reversed every other round, the median run kept",
          "[profile][cli]") {
  TempDir dir;
  auto r = run_cli("scaling -s ops-reports -w axis-focus -p reports=20000 --chunk 1000 --counts 1,2 --repeat 3 --check all "
                   "--json " + shell_quote(dir.file("scaling.json")));
  INFO(r.err);
  REQUIRE(r.status == 0);
  // Progress lines in run order: 1 2, then 2 1, then 1 2.
  std::vector<unsigned> order;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);)
    if (line.rfind("scaling: ", 0) == 0) order.push_back(unsigned(std::stoul(line.substr(9))));
  CHECK(order == std::vector<unsigned>{1, 2, 2, 1, 1, 2});
  CHECK_THAT(r.out, Contains("median s") && Contains("min s") && Contains("max s"));
  auto j = nlohmann::json::parse(read_file(dir.file("scaling.json")));
  CHECK(j["outputs_identical"] == true);
  REQUIRE(j["counts"].size() == 2);
  for (const auto& c : j["counts"]) {
    REQUIRE(c["walls_s"].size() == 3);
    std::vector<double> w = c["walls_s"].get<std::vector<double>>();
    std::sort(w.begin(), w.end());
    CHECK(c["wall_s"].get<double>() == w[1]);
    CHECK(c["groups"] == 60000);
  }
  auto bad = run_cli("scaling -s ops-reports -w axis-focus --counts 1 --repeat 0");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Contains("--repeat"));
}

TEST_CASE("headsep scaling --ceiling: N independent 1-thread copies at once, the engine's share of their speedup",
          "[profile][cli]") {
  TempDir dir;
  auto r = run_cli("scaling -s ops-reports -w axis-focus -p reports=20000 --chunk 1000 --counts 1,2 --repeat 2 --ceiling "
                   "--check all --json " + shell_quote(dir.file("scaling.json")));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("ceiling") && Contains("2 independent 1-thread copies at once"));
  // Each round: the count, then (for 2) its copies.
  int copy_lines = 0;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) copy_lines += line.rfind("scaling: 2 independent", 0) == 0;
  CHECK(copy_lines == 2);
  auto j = nlohmann::json::parse(read_file(dir.file("scaling.json")));
  CHECK(j["outputs_identical"] == true);
  REQUIRE(j["counts"].size() == 2);
  CHECK_FALSE(j["counts"][0].contains("ceiling"));
  const auto& two = j["counts"][1];
  REQUIRE(two.contains("ceiling"));
  const auto& c = two["ceiling"];
  CHECK(c["copies"] == 2);
  CHECK(c["identical"] == true);
  REQUIRE(c["walls_s"].size() == 2);
  std::vector<double> w = c["walls_s"].get<std::vector<double>>();
  CHECK(c["wall_s"].get<double>() == std::min(w[0], w[1]));  // the median of two: the lower
  const double w1 = j["counts"][0]["wall_s"].get<double>(), w2 = two["wall_s"].get<double>();
  const double wc = c["wall_s"].get<double>();
  CHECK(c["speedup"].get<double>() == Approx(2 * w1 / wc).epsilon(1e-12));
  CHECK(c["engine_share"].get<double>() == Approx(wc / (2 * w2)).epsilon(1e-12));

  auto no_one = run_cli("scaling -s ops-reports -w axis-focus -p reports=100 --counts 2,4 --ceiling");
  CHECK(no_one.status == 2);
  CHECK_THAT(no_one.err, Contains("--ceiling") && Contains("put 1 in --counts"));
}

TEST_CASE("profile: --profile changes no output byte, and without it nothing is profiled", "[profile][cli]") {
  TempDir dir;
  const std::string job = "run -s ops-reports -w axis-focus -p reports=20000 -p seed=3 --top 4 --threads 2 ";
  auto plain = run_cli(job + "--format csv --summary " + shell_quote(dir.file("a.json")) + " --per-report " +
                       shell_quote(dir.file("a.jsonl")));
  auto prof = run_cli(job + "--format csv --profile --summary " + shell_quote(dir.file("b.json")) + " --per-report " +
                      shell_quote(dir.file("b.jsonl")) + " --trace " + shell_quote(dir.file("t.json")));
  REQUIRE(plain.status == 0);
  REQUIRE(prof.status == 0);
  CHECK(plain.out == prof.out);  // rows on stdout
  CHECK(plain.err.empty());
  CHECK_THAT(prof.err, Contains("diagnosis: "));
  CHECK(read_file(dir.file("a.jsonl")) == read_file(dir.file("b.jsonl")));
  auto a = nlohmann::ordered_json::parse(read_file(dir.file("a.json")));
  auto b = nlohmann::ordered_json::parse(read_file(dir.file("b.json")));
  CHECK_FALSE(a.contains("profile"));
  REQUIRE(b.contains("profile"));
  b.erase("profile");
  CHECK(a.dump(2) + "\n" == read_file(dir.file("a.json")));  // the layout the profile section extends
  a["run"].erase("execution"), b["run"].erase("execution");  // the command lines differ (docs/SUMMARY.md)
  CHECK(a == b);
  // A failed run leaves no trace file behind.
  auto fail = run_cli("run -s ops-reports -w axis-focus -p reports=10 --axes 'x=nope' --trace " + shell_quote(dir.file("u.json")));
  CHECK(fail.status != 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("u.json")));
}
