// headsep on the peers' data: reads the arrays bench/peers.py generated, computes the same
// metrics (seed axes, contexts, differences, separation) into full in-memory outputs, checks
// them against NumPy's separations, and prints the throughput as one JSON line.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "headsep/batch.hpp"
#include "headsep/kernels.hpp"

using namespace headsep;

namespace {

template <class T>
std::vector<T> load(const std::string& path, std::size_t n) {
  std::vector<double> raw(n);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(raw.data()), std::streamsize(n * sizeof(double)))) {
    std::fprintf(stderr, "peer_bench: cannot read %zu doubles from %s\n", n, path.c_str());
    std::exit(1);
  }
  return std::vector<T>(raw.begin(), raw.end());
}

template <class T>
int bench(const std::string& dir, std::size_t R, std::size_t L, std::uint32_t N, unsigned threads, SimdLevel level,
          int repeats) {
  const std::size_t n_tok = R * L, C = 2;
  auto feat = load<T>(dir + "/features.f64", 3 * n_tok);
  auto w = load<T>(dir + "/weights.f64", (N + 1) * n_tok);
  auto ref_sep = load<double>(dir + "/separation.f64", R);
  std::vector<std::uint64_t> off(R + 1);
  for (std::size_t r = 0; r <= R; ++r) off[r] = r * L;
  std::vector<T> axis(C * n_tok), ctx((N + 1) * C * R), diff(N * C * R), pw(pair_count(N) * R), sep(R);
  oneapi::tbb::global_control cap(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  const std::size_t grain = 16384;
  auto once = [&] {
    oneapi::tbb::parallel_for(std::size_t(0), (R + grain - 1) / grain, [&](std::size_t blk) {
      const std::size_t r0 = blk * grain, r1 = std::min(R, r0 + grain);
      // Seed axes: decision = f0; evidence+condition = f1 + f2 (0 + a + b, as the seed sums).
      for (std::size_t t = r0 * L; t < r1 * L; ++t) {
        axis[t] = T(0) + feat[t];
        axis[n_tok + t] = (T(0) + feat[n_tok + t]) + feat[2 * n_tok + t];
      }
      const T* ap[2] = {axis.data(), axis.data() + n_tok};
      std::vector<const T*> wp;
      for (std::uint32_t h = 0; h <= N; ++h) wp.push_back(w.data() + h * n_tok);
      KernelArgs<T> a;
      a.n_reports = r1 - r0;
      a.token_offset = off.data() + r0;
      a.uniform_length = std::uint32_t(L);
      a.axes = C;
      a.heads = N;
      a.axis = ap;
      a.weight = wp.data();
      a.stride = R;
      a.context = ctx.data() + r0;
      a.difference = diff.data() + r0;
      a.pairwise = pw.data() + r0;
      a.separation = sep.data() + r0;
      compute_metrics(a, level);
    });
  };
  once();  // warm-up, and the result we check
  double max_err = 0;
  for (std::size_t r = 0; r < R; ++r) max_err = std::max(max_err, std::fabs(double(sep[r]) - ref_sep[r]));
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    once();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("{\"groups_per_s\": %.6g, \"seconds\": %.6g, \"max_abs_diff_vs_numpy\": %.3g, \"simd\": \"%s\", \"threads\": %u}\n",
              double(R) / best, best, max_err, std::string(to_string(level)).c_str(), threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s DIR REPORTS LENGTH HEADS THREADS f64|f32 SIMD [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::size_t R = std::strtoull(argv[2], nullptr, 10), L = std::strtoull(argv[3], nullptr, 10);
  const auto N = std::uint32_t(std::strtoul(argv[4], nullptr, 10));
  const auto threads = unsigned(std::strtoul(argv[5], nullptr, 10));
  const std::string prec = argv[6];
  const SimdLevel level = std::string(argv[7]) == "best" ? default_level() : parse_simd_level(argv[7]);
  const int repeats = argc > 8 ? std::atoi(argv[8]) : 5;
  return prec == "f32" ? bench<float>(dir, R, L, N, threads, level, repeats)
                       : bench<double>(dir, R, L, N, threads, level, repeats);
}
