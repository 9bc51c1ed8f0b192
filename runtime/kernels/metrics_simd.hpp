// Private: the SIMD metric kernel, written once as a function object templated on the xsimd
// architecture (metrics_simd_impl.hpp) and instantiated in one .cpp per architecture, each
// compiled with that architecture's flags only. Callers see only these declarations, so no
// AVX code is ever generated in a translation unit that runs before the CPU check.
#pragma once
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "headsep/kernels.hpp"

namespace headsep::kernels {

/// How a kernel puts reports into vector lanes. `automatic` is what compute_metrics uses;
/// the others exist so tests and benchmarks can pin and compare one.
enum class Strategy {
  automatic,
  transpose,  ///< lanes across reports; tokens de-interleaved through a stack tile (scalar copies)
  gather,     ///< lanes across reports; tokens de-interleaved with gathers (uniform length; and
              ///< ragged reports of <= kShuffleMax tokens at avx2/avx512 with hardware gathers only)
  shuffle,    ///< lanes across reports; L contiguous vectors de-interleaved in registers (blend +
              ///< permute; uniform length <= kShuffleMax only, else transpose). Ragged f64 at
              ///< avx2/avx512: contiguous pair loads + unpack, as automatic
  tokens,     ///< long reports. f32: lanes across the tokens of one report, horizontal sum at
              ///< the end (not bit-identical). f64: one report at a time with all (head, axis)
              ///< sums interleaved, each still in token order (bit-identical)
};

/// Short name of a strategy, for test messages and benchmark names.
constexpr const char* to_string(Strategy s) noexcept {
  switch (s) {
    case Strategy::automatic: return "auto";
    case Strategy::transpose: return "transpose";
    case Strategy::gather: return "gather";
    case Strategy::shuffle: return "shuffle";
    case Strategy::tokens: return "tokens";
  }
  return "?";
}

/// Metric kernel for one architecture. Computes a prefix [0, n) of the reports, n a multiple
/// of the vector width, and returns n; the caller finishes [n, n_reports) with metrics_scalar
/// (so the scalar reference is never compiled with AVX flags: see runtime/kernels/CMakeLists.txt).
template <class Arch>
struct metrics_kernel {
  std::size_t operator()(const KernelArgs<double>& a, Strategy how = Strategy::automatic) const;
  std::size_t operator()(const KernelArgs<float>& a, Strategy how = Strategy::automatic) const;
  /// True when w[0, n) are all finite and >= 0 (-0.0 included): the engine's weight check.
  bool valid_weights(const double* w, std::size_t n) const noexcept;
  /// bucket_keys for a prefix [0, m) of x, m a multiple of the vector width; returns m.
  std::size_t bucket_keys(const double* x, std::size_t n, std::int64_t subdivisions, std::int64_t* key) const noexcept;
  /// finite_extremes for a prefix [0, m) of x, m a multiple of the vector width; returns m.
  std::size_t finite_extremes(const double* x, std::size_t n, double& lo, double& hi, bool& finite) const noexcept;
};

using fma3_avx2 = xsimd::fma3<xsimd::avx2>;

extern template struct metrics_kernel<xsimd::sse2>;
extern template struct metrics_kernel<fma3_avx2>;
extern template struct metrics_kernel<xsimd::avx512bw>;

/// compute_metrics with the strategy pinned (tests, benchmarks). Throws UsageError for a level
/// this build or CPU cannot run.
void compute_metrics(const KernelArgs<double>& a, SimdLevel level, Strategy how);
void compute_metrics(const KernelArgs<float>& a, SimdLevel level, Strategy how);

/// Throws UsageError for a level this build or CPU cannot run (cheap: a cached bit set).
void require_supported(SimdLevel level);

/// True when w[0, n) are all finite and >= 0 (-0.0 included), at `level` (the scalar reference
/// tests the bits: float_bits.hpp). Every level gives the same answer.
bool valid_weights(const double* w, std::size_t n, SimdLevel level);

/// |x| below this counts as zero in a QuantileSketch (its zero bucket).
inline constexpr double kSketchZero = 1e-300;

/// QuantileSketch's bucket of each finite x[i] (headsep/stats.hpp), as key[i] = 4 * index + store:
/// store 0 for x > 0 and 1 for x < 0, index = the bucket of |x| with `subdivisions` (N, 1 <= N <
/// 4096) equal-width buckets per binary octave — (exponent - 1023) * N + floor(mantissa * N / 2^52)
/// —; key 2 (store 2, index 0) for |x| < kSketchZero. Integer arithmetic: every level gives the
/// same keys.
void bucket_keys(const double* x, std::size_t n, std::int64_t subdivisions, std::int64_t* key, SimdLevel level);

/// QuantileSketch::add's first look at a row: false when some x[i] is not finite; else lo =
/// min(lo, x[0..n)), hi = max(hi, ...). Which zero an extreme of ±0 is depends on the level
/// (the caller redoes that rare case in order); any other extreme has one bit pattern.
bool finite_extremes(const double* x, std::size_t n, double& lo, double& hi, SimdLevel level);

/// Longest uniform length the in-register de-interleave (Strategy::shuffle) handles.
inline constexpr std::size_t kShuffleMax = 8;

/// Batches whose mean report length is at least this use Strategy::tokens under `automatic`.
inline constexpr std::size_t kLongReport = 16;

}  // namespace headsep::kernels
