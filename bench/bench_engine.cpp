// End-to-end engine throughput and thread scaling: the real ops-reports generator and a real
// weighting plugin (loaded from the build tree, as a user runs them), metric kernels at the
// best level, and the per-scenario summary — the README's main job. Counter: (report, scenario)
// groups per second of wall time.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <random>
#include <oneapi/tbb/info.h>

#include "headsep/plugin_host.hpp"
#include "headsep/profile.hpp"
#include "headsep/run.hpp"
#include "headsep/stats.hpp"
#include "headsep/summary.hpp"
#include "profile/stage_timer.hpp"

using namespace headsep;

namespace {

const PluginRegistry& registry() {
  static PluginRegistry reg = PluginRegistry::discover(plugin_search_path({}));
  return reg;
}

// args: threads, report length (min = max tokens; 0 = the README's 3..6), weighting (0 axis-focus,
// 1 uniform), precision (0 f64, 1 f32), profile (0 off, 1 --profile, 2 --profile --trace)
void BM_end_to_end(benchmark::State& state) {
  const auto threads = unsigned(state.range(0));
  const auto min_len = std::to_string(state.range(1) ? state.range(1) : 3);
  const auto max_len = std::to_string(state.range(1) ? state.range(1) : 6);
  const std::string weighting = state.range(2) == 0 ? "axis-focus" : "uniform";
  const std::int64_t reports = 2'000'000;
  const auto& reg = registry();
  auto source = open_scenario_plugin(
      reg, "ops-reports",
      resolve_params(reg.require("ops-reports", PluginKind::scenario),
                     {{"reports", std::to_string(reports)}, {"min_tokens", min_len}, {"max_tokens", max_len}}));
  auto weights = open_weighting_plugin(reg, weighting, resolve_params(reg.require(weighting, PluginKind::weighting), {}),
                                       source->schema());
  auto specs = parse_axes(kSeedAxes);
  auto axes = AxisMap::bind(specs, source->schema().feature_names);
  RunOptions opt;
  opt.threads = threads;
  opt.simd = default_level();
  opt.precision = state.range(3) ? Precision::f32 : Precision::f64;
  std::uint64_t groups = 0;
  const auto profile = state.range(4);
  // Process CPU time (all threads): steadier than wall time on a shared machine.
  auto cpu_now = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double cpu0 = cpu_now();
  for (auto _ : state) {
    Summary summary(RunInfo{axes.names(), weights->heads()});
    ProfileOptions po;
    po.trace = profile == 2;
    Profiler prof(po);
    opt.profiler = profile ? &prof : nullptr;
    auto stats = run(*source, *weights, axes, opt, {&summary});
    groups += stats.groups;
    benchmark::DoNotOptimize(summary.groups());
  }
  state.counters["groups_per_s"] = benchmark::Counter(double(groups), benchmark::Counter::kIsRate);
  state.counters["cpu_s_per_run"] = (cpu_now() - cpu0) / double(state.iterations());
  state.SetLabel(weighting + " " + std::string(to_string(opt.simd)) + (state.range(3) ? " f32" : " f64") +
                 (profile == 1 ? " profile" : profile == 2 ? " profile+trace" : ""));
}

void args(benchmark::internal::Benchmark* b) {
  const int max_threads = oneapi::tbb::info::default_concurrency();
  for (int w : {0, 1})
    for (int t = 1; t <= max_threads; t *= 2) b->Args({t, 3, w, 0, 0});
  for (int t = 1; t <= max_threads; t *= 2) b->Args({t, 3, 0, 1, 0});
  b->Args({max_threads, 8, 0, 0, 0});
  b->Args({max_threads, 32, 0, 0, 0});
  // The README's main job (3..6 tokens), profiler off / on / on with a trace: its cost.
  for (int t = 1; t <= max_threads; t *= 2)
    for (int p : {0, 1, 2}) b->Args({t, 0, 0, 0, p});
}

// The profiler's cost per stage transition (what --profile adds per stage of every batch): one
// StageTimer::to() = thread-CPU clock read + wall clock read under two stage locks (+ trace event).
void BM_stage_lap(benchmark::State& state) {
  ProfileOptions po;
  po.trace = state.range(0) != 0;
  Profiler prof(po);
  prof.impl().begin_run({1, true, false, "", "", {}});
  std::uint64_t batch = 0;
  for (auto _ : state) {
    prof::StageTimer t(&prof, batch++ & 1023);  // trace: stays within the first 1024 batches
    t.to(prof::kGenerate);
    t.to(prof::kAxes);
    t.to(prof::kKernels);
    t.to(prof::kValidate);
  }
  state.SetItemsProcessed(state.iterations() * 4);
}

// The summary's per-batch sketch input (Summary::prepare): rows of 8192 metric values, in sketch
// mode (past the exact capacity), 0.5 % accuracy as the summary uses. arg 0: mixed sign N(0, 0.2)
// into one long-lived sketch; 1: the same rows, a fresh sketch per row (what prepare() does per
// batch and metric: the stores grow on every row); 2: a narrow positive metric (entropy-like,
// U(0.60, 0.66): ~9 buckets, so consecutive values share buckets), a fresh sketch per row; 3: a wide
// positive metric (U(0.05, 1.0): ~300 buckets, as the main job's), a fresh sketch per row.
void BM_sketch_add(benchmark::State& state) {
  const auto mode = state.range(0);
  std::mt19937_64 g(5);
  std::normal_distribution<double> nd(0, 0.2);
  std::uniform_real_distribution<double> ud(0.60, 0.66), wide(0.05, 1.0);
  std::vector<double> row(8192);
  for (auto& x : row) x = mode == 2 ? ud(g) : mode == 3 ? wide(g) : nd(g);
  QuantileSketch s(0.005, 0);
  for (auto _ : state) {
    if (mode == 0) {
      s.add(row.data(), row.size());
    } else {
      QuantileSketch fresh(0.005, 0);
      fresh.add(row.data(), row.size());
      benchmark::DoNotOptimize(fresh.count());
    }
  }
  benchmark::DoNotOptimize(s.count());
  state.SetItemsProcessed(state.iterations() * std::int64_t(row.size()));
}

}  // namespace

BENCHMARK(BM_sketch_add)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2)->Arg(3);
BENCHMARK(BM_stage_lap)->Arg(0)->Arg(1);
BENCHMARK(BM_end_to_end)->ArgNames({"threads", "tokens", "weighting", "f32", "profile"})->Apply(args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
