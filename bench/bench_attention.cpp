// AttentionPlan::run (QKV projections + fused attention + every metric) on the shapes,
// B reports x n tokens x d_model x heads (d_k = d_v = d_model / heads), 2 context axes, all
// queries, no mask, every supported level, 1 and 2 threads (tbb::parallel_for over chunks of
// reports, one AttentionScratch per thread).
//
// Names:  run/<shape>/<level>/threads:<t>      the whole plan (what the engine calls)
//         run-blas/<shape>/<level>/threads:<t> the same with OpenBLAS projections (the A/B of the
//                                             projection backend; only code switches it)
//         kernel/<shape>/<level>              attention_report only, on projections computed once
//         kernel-causal/<shape>/<level>,      the same under a causal mask, and with Mistral's
//         kernel-window<w>/<shape>/<level>    sliding window of w keys (a long-report shape only)
//         project/<shape>/<level>             the projections only, our panel kernel, one group
//         gemm/<shape>                        the projections only, one OpenBLAS sgemm, same group
//                                             (group: the rows run() projects at once)
// Counters: items_per_second = reports/s; GFLOPS = the work done, 2·n·d_model·width (projections)
//   + 2·n²·Σd_k (scores, heads 0..H) + 2·n²·Σd_v (A·V, heads 1..H) per report; pct_peak = GFLOPS over
//   measure_fp32_peak_gflops() x threads (the peak is one core's, at the best level).
// A shape's data is built once; the big shape's X is 64 MiB (cf. HEADSEP_BENCH_REPORTS to scale B).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"
#include "kernels/attention_simd.hpp"

using namespace headsep;

namespace {

struct Shape {
  std::size_t reports, n, d_model, heads;
  std::string name() const {
    return std::to_string(reports) + "x" + std::to_string(n) + "x" + std::to_string(d_model) + "x" +
           std::to_string(heads);
  }
  std::size_t dk() const { return d_model / heads; }
  /// Columns the projections compute (AttentionPlan::proj_width).
  std::size_t width() const { return d_model + 3 * heads * dk(); }
  /// The work done (AttentionPlan::report_flops): projections, scores of heads 0..H (the baseline
  /// d_model wide, its Q0' against X), A·V of heads 1..H.
  double flops_per_report() const {
    return 2.0 * double(n) * double(d_model) * double(width()) +
           2.0 * double(n) * double(n) * double(d_model + 2 * heads * dk());
  }
};

constexpr std::size_t kChunkTokens = 2048;  // reports per parallel task: about one sgemm group
constexpr std::uint32_t kAxes = 2;

struct Data {
  Shape s;
  std::vector<float> x;
  std::vector<std::uint64_t> off;
  std::vector<std::vector<float>> axis;
  std::vector<const float*> axp;
  std::unique_ptr<AttentionPlan> plan;
  std::vector<double> ctx, hs, ps;  // outputs, stride = reports
};

Data& data_for(const Shape& s) {
  static std::map<std::string, std::unique_ptr<Data>> all;
  auto& d = all[s.name()];
  if (d) return *d;
  d = std::make_unique<Data>();
  d->s = s;
  const std::size_t T = s.reports * s.n;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  d->x.resize(T * s.d_model);
  for (auto& v : d->x) v = u(rng);
  d->off.resize(s.reports + 1);
  for (std::size_t r = 0; r <= s.reports; ++r) d->off[r] = r * s.n;
  d->axis.assign(kAxes, std::vector<float>(T));
  for (auto& a : d->axis)
    for (auto& v : a) v = 3.0f * u(rng);
  for (auto& a : d->axis) d->axp.push_back(a.data());
  const auto dk = static_cast<std::uint32_t>(s.dk());
  d->plan = std::make_unique<AttentionPlan>(
      seeded_attention_weights(static_cast<std::uint32_t>(s.d_model), static_cast<std::uint32_t>(s.heads), dk, dk, 7,
                               false),
      AttentionConfig{});
  d->ctx.resize((s.heads + 1) * kAxes * s.reports);
  d->hs.resize((s.heads + 1) * kHeadStats * s.reports);
  d->ps.resize(s.heads * (s.heads - 1) / 2 * kPairStats * s.reports + 1);
  return *d;
}

tbb::task_arena& arena(int threads) {
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  auto& a = arenas[threads];
  if (!a) a = std::make_unique<tbb::task_arena>(threads);
  return *a;
}

void set_counters(benchmark::State& st, const Shape& s, std::size_t reports_per_iter, int threads) {
  const double iters = double(st.iterations());
  const double flops = iters * double(reports_per_iter) * s.flops_per_report();
  st.SetItemsProcessed(static_cast<std::int64_t>(iters * double(reports_per_iter)));
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  st.counters["pct_peak"] =
      benchmark::Counter(flops * 1e-9 / (measure_fp32_peak_gflops() * threads) * 100.0, benchmark::Counter::kIsRate);
}

void run(benchmark::State& st, Shape s, SimdLevel level, int threads, bool blas) {
  Data& d = data_for(s);
  kernels::set_attention_gemm_blas(blas);
  const std::size_t chunk = std::max<std::size_t>(1, kChunkTokens / s.n);
  tbb::enumerable_thread_specific<AttentionScratch> scratch;
  for (auto _ : st) {
    arena(threads).execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, s.reports, chunk),
          [&](const tbb::blocked_range<std::size_t>& r) {
            AttentionOut out;
            out.context = d.ctx.data() + r.begin();
            out.head_stats = d.hs.data() + r.begin();
            out.pair_stats = d.ps.data() + r.begin();
            out.stride = s.reports;
            d.plan->run(d.x.data(), d.off.data() + r.begin(), r.size(), kAxes, d.axp.data(), level, out,
                        scratch.local());
          },
          tbb::simple_partitioner());
    });
    benchmark::ClobberMemory();
  }
  kernels::set_attention_gemm_blas(false);
  set_counters(st, s, s.reports, threads);
}

/// The projections of the first group's reports, as run() builds them (the plan's layout).
struct Projected {
  std::size_t reports = 0;
  std::vector<float> qkv;
};

Projected project(const Data& d, SimdLevel level) {
  const Shape& s = d.s;
  Projected p;
  p.reports = std::max<std::size_t>(1, kChunkTokens / s.n);
  AttentionScratch scratch;
  d.plan->project(d.x.data(), p.reports * s.n, level, scratch);
  p.qkv = std::move(scratch.qkv);
  return p;
}

void kernel_only(benchmark::State& st, Shape s, SimdLevel level, AttentionConfig config = {}) {
  Data& d = data_for(s);
  const Projected p = project(d, level);
  AttentionScratch scratch;
  AttentionReport in = d.plan->report_view();
  in.config = config;
  in.n = static_cast<std::uint32_t>(s.n);
  in.axes = kAxes;
  const float* ax[kAxes];
  in.axis = ax;
  for (auto _ : st) {
    for (std::size_t r = 0; r < p.reports; ++r) {
      in.qkv = p.qkv.data() + r * s.n * in.ld;
      for (std::uint32_t c = 0; c < kAxes; ++c) ax[c] = d.axp[c] + r * s.n;
      AttentionReportOut out;
      out.context = d.ctx.data() + r, out.head_stats = d.hs.data() + r, out.pair_stats = d.ps.data() + r;
      out.stride = s.reports;
      attention_report(in, out, level, scratch);
    }
    benchmark::ClobberMemory();
  }
  if (config.mask != MaskKind::none) {  // reports/s only: the FLOP counts are those of every key
    st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * p.reports));
    return;
  }
  set_counters(st, s, p.reports, 1);
  // FLOPs of the kernel alone (no projections), for its own efficiency: scores 2 n² d_k per head
  // (the baseline's d_model wide), A·V 2 n² d_v per head 1..H (the baseline has no values).
  const double kflops = double(st.iterations()) * double(p.reports) * 2.0 * double(s.n) * double(s.n) *
                        double(s.d_model + 2 * s.heads * s.dk());
  st.counters["kernel_GFLOPS"] = benchmark::Counter(kflops * 1e-9, benchmark::Counter::kIsRate);
}

/// Rows AttentionPlan::run projects at once for this shape (whole reports, <= 2048 tokens, ~1 MiB).
std::size_t group_rows(const Shape& s) {
  const std::size_t ld = s.width() >= 64 ? (s.width() + 15) / 16 * 16 : s.width();
  const std::size_t tokens = std::min<std::size_t>(2048, (std::size_t(1) << 20) / (ld * sizeof(float)));
  return std::max<std::size_t>(1, tokens / s.n) * s.n;
}

void projection_counters(benchmark::State& st, const Shape& s, std::size_t T) {
  const double flops = double(st.iterations()) * 2.0 * double(T) * double(s.d_model) * double(s.width());
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * (T / s.n)));
  st.counters["rows"] = double(T);
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  st.counters["pct_peak"] =
      benchmark::Counter(flops * 1e-9 / measure_fp32_peak_gflops() * 100.0, benchmark::Counter::kIsRate);
}

void gemm_only(benchmark::State& st, Shape s) {
  Data& d = data_for(s);
  const std::size_t T = group_rows(s), w = s.width();
  std::vector<float> c(T * w);
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(w),
                static_cast<int>(s.d_model), 1.0f, d.x.data(), static_cast<int>(s.d_model), d.plan->proj().data(),
                static_cast<int>(w), 0.0f, c.data(), static_cast<int>(w));
    benchmark::DoNotOptimize(c.data());
  }
  projection_counters(st, s, T);
}

void project_only(benchmark::State& st, Shape s, SimdLevel level) {
  Data& d = data_for(s);
  const std::size_t T = group_rows(s), w = s.width();
  std::vector<float> c(T * w);
  const auto packed = kernels::pack_panels(d.plan->proj().data(), s.d_model, w, nullptr);
  for (auto _ : st) {
    kernels::project_rows(level, d.x.data(), s.d_model, T, s.d_model, packed.get(), w, c.data(), w);
    benchmark::DoNotOptimize(c.data());
  }
  projection_counters(st, s, T);
}

std::vector<Shape> shapes() {
  std::vector<Shape> v{{2048, 64, 64, 4}, {256, 256, 256, 8}, {65536, 3, 2, 2}, {16, 1024, 256, 8}};
  if (const char* scale = std::getenv("HEADSEP_BENCH_REPORTS"))  // e.g. 0.25 for a quick run
    for (auto& s : v) s.reports = std::max<std::size_t>(8, std::size_t(double(s.reports) * std::atof(scale)));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  for (const Shape& s : shapes()) {
    benchmark::RegisterBenchmark(("gemm/" + s.name()).c_str(), [=](benchmark::State& st) { gemm_only(st, s); })
        ->Unit(benchmark::kMillisecond);
    for (auto level : supported_levels()) {
      const std::string lv(to_string(level));
      benchmark::RegisterBenchmark(("project/" + s.name() + "/" + lv).c_str(),
                                   [=](benchmark::State& st) { project_only(st, s, level); })
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("kernel/" + s.name() + "/" + lv).c_str(),
                                   [=](benchmark::State& st) { kernel_only(st, s, level); })
          ->Unit(benchmark::kMillisecond);
      if (s.n >= 1024)  // a window skips the keys before it: n·w instead of n²/2
        for (std::uint32_t w : {0u, 128u}) {
          const AttentionConfig c{QueryMode::all, 0, MaskKind::causal, w};
          const std::string name = w ? "kernel-window" + std::to_string(w) + "/" : std::string("kernel-causal/");
          benchmark::RegisterBenchmark((name + s.name() + "/" + lv).c_str(),
                                       [=](benchmark::State& st) { kernel_only(st, s, level, c); })
              ->Unit(benchmark::kMillisecond);
        }
      for (bool blas : {false, true})
        for (int threads : {1, 2})
          benchmark::RegisterBenchmark(
              ((blas ? "run-blas/" : "run/") + s.name() + "/" + lv + "/threads:" + std::to_string(threads)).c_str(),
              [=](benchmark::State& st) { run(st, s, level, threads, blas); })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fp32_peak_gflops_per_core", std::to_string(measure_fp32_peak_gflops()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
