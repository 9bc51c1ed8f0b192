// exp and log throughput per core (Google Benchmark): scalar libm (std::exp / std::log on floats)
// vs the vector versions the attention kernel calls (AK<A>::exp2_neg / log_pos: softmax, entropy,
// JS divergence) and xsimd's own, at every level this CPU runs. One thread, 4096 floats in L1, so
// the number is the arithmetic's, not memory's: the transcendental ceiling of bench/roofline.sh.
// The engine's exp is timed in the base the kernel calls it in, 2^t (the softmax folds log2 e into
// its scaling FMA), over the same values: t = y·log2 e for the same y.
// Names: transcendental/<exp|log>/<libm|LEVEL-engine|LEVEL-xsimd>; items_per_second = values/s;
// counter max_rel_err = the largest relative error against double-precision libm over the array.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "transcendental_arch.hpp"

namespace {
using namespace headsep::bench_transcendental;

constexpr std::size_t kN = 4096;

struct Arrays {
  float* in;
  float* out;
  bool base2;
  std::unique_ptr<float, decltype(&std::free)> hold_in{nullptr, &std::free}, hold_out{nullptr, &std::free};
  Arrays(bool is_exp, bool base2) : base2(base2) {
    hold_in.reset(static_cast<float*>(std::aligned_alloc(64, kN * sizeof(float))));
    hold_out.reset(static_cast<float*>(std::aligned_alloc(64, kN * sizeof(float))));
    in = hold_in.get(), out = hold_out.get();
    for (std::size_t i = 0; i < kN; ++i) {
      const double t = (double(i) + 0.5) / double(kN);  // exp: y in (-20, 0) (a softmax's range); log: x in (1e-6, 1)
      in[i] = is_exp ? float(-20.0 * t * (base2 ? 1.4426950408889634 : 1.0))
                     : float(std::exp(std::log(1e-6) * (1.0 - t)));
    }
  }
  double max_rel_err(bool is_exp) const {
    double worst = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      const double x = double(in[i]);
      const double ref = is_exp ? (base2 ? std::exp2(x) : std::exp(x)) : (base2 ? std::log2(x) : std::log(x));
      if (ref != 0) worst = std::max(worst, std::abs((double(out[i]) - ref) / ref));
    }
    return worst;
  }
};

void run(benchmark::State& state, bool is_exp, bool base2, Fn fn) {
  Arrays a(is_exp, base2);
  for (auto _ : state) {
    fn(a.in, a.out, kN);
    benchmark::DoNotOptimize(a.out);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(kN));
  state.counters["max_rel_err"] = a.max_rel_err(is_exp);
}

void libm_exp(const float* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}
void libm_log(const float* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = std::log(in[i]);
}

void register_level(const std::string& level, ArchFns f) {
  for (bool is_exp : {true, false}) {
    const std::string op = is_exp ? "exp" : "log";
    benchmark::RegisterBenchmark(("transcendental/" + op + "/" + level + "-engine").c_str(), run, is_exp, is_exp,
                                 is_exp ? f.exp_engine : f.log_engine);
    benchmark::RegisterBenchmark(("transcendental/" + op + "/" + level + "-xsimd").c_str(), run, is_exp, false,
                                 is_exp ? f.exp_xsimd : f.log_xsimd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("transcendental/exp/libm", run, true, false, &libm_exp);
  benchmark::RegisterBenchmark("transcendental/log/libm", run, false, false, &libm_log);
  register_level("sse2", sse2_fns());
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) register_level("avx2", avx2_fns());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    register_level("avx512", avx512_fns());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
