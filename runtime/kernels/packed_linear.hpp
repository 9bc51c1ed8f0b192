// Private: an nn.Linear packed for the panel GEMM in the dtype it is held in, and the one
// project_rows that takes it. f32 weights are pack_panels' block and go through the f32 kernel
// (attention_simd_project.hpp) unchanged; bf16 weights are held as bf16 (half the memory, half
// the bytes streamed per product) and multiplied by project_bf16_*.cpp:
//  - bf16 panels: pack_panels' panels and slices (kPanel, kSlice), but each slice is
//    [ceil(K/2) k-pairs][kSlice columns][2] bf16: one 64-byte line per k-pair, the pair of a column
//    adjacent, as vdpbf16ps multiplies it (K odd: the last pair's odd half is 0).
//  - AVX-512 with AVX512-BF16 (Zen 4, Sapphire Rapids): X rounded to bf16 once per call (RNE),
//    vdpbf16ps accumulating in f32: two products per lane per instruction. Its results are those
//    of X rounded to bf16 times the weights, summed in f32 (not the bits of any other level).
//  - every other level (and AVX-512 without BF16, or with set_bf16_dot(false)): each panel widened
//    to f32 by shifts (exact) into a per-thread buffer, once per product, then the f32 kernel on
//    it: the bits of the f32 kernel on the widened weights, at every level, and its speed.
//  - SimdLevel::scalar: the f32 reference on the widened weights (bias + Σ_k x·w, unfused).
//  - f16 weights (WeightType::f16): the same panels of f16, always widened (F16C; x86 has no f16
//    dot product): the f32 kernel's bits too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "headsep/kernels.hpp"
#include "kernels/attention_simd.hpp"  // kPanel, kSlice

namespace headsep::kernels {

/// f16 (a float16 folder's weights) runs as the widening bf16 path does, F16C converting each
/// slice's pair (no f16 dot product on x86): the f32 kernel's bits at every level.
enum class WeightType : std::uint8_t { f32, bf16, f16 };

/// A packed nn.Linear (y = x Wᵀ + b): `in` = K, `out` = N. Copies share the panels.
struct PackedLinear {
  WeightType type = WeightType::f32;
  std::size_t in = 0, out = 0;
  std::shared_ptr<const float> f32;            ///< f32: pack_panels' block (panels, then the bias)
  std::shared_ptr<const std::uint16_t> bf16;   ///< bf16 or f16: the panels (bf16_panel_index), of `type`
  std::shared_ptr<const float> bias;           ///< bf16 or f16: N values padded to whole panels (zeros)
  explicit operator bool() const noexcept { return f32 || bf16; }
  /// Bytes held (panels and bias), for the profile's weight memory.
  std::size_t bytes() const noexcept;
};

/// K rounded up to whole k-pairs (the bf16 panels' rows).
constexpr std::size_t bf16_pairs(std::size_t K) noexcept { return (K + 1) / 2; }
/// Where pack_linear_bf16 puts W[n][k] (B[k][n]) in the bf16 panels of a K-row matrix.
constexpr std::size_t bf16_panel_index(std::size_t K, std::size_t k, std::size_t n) noexcept {
  const std::size_t KP = bf16_pairs(K);
  return n / kPanel * KP * 2 * kPanel + n % kPanel / kSlice * KP * 2 * kSlice + k / 2 * 2 * kSlice + n % kSlice * 2 + k % 2;
}

/// f32 -> bf16, round to nearest even (NaN kept a NaN). What vcvtne2ps2bf16 does to normal numbers.
constexpr std::uint16_t round_bf16(std::uint32_t f32_bits) noexcept {
  if ((f32_bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((f32_bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((f32_bits + 0x7fffu + ((f32_bits >> 16) & 1u)) >> 16);
}

/// f32 -> f16 (IEEE binary16), round to nearest even; overflow to inf, NaN kept a NaN. Exact for
/// values that came from f16.
std::uint16_t round_f16(float v) noexcept;

/// nn.Linear's weight [out][in] (row-major) and bias (nullptr = 0) packed in f32 (pack_panels).
PackedLinear pack_linear_f32(const float* w, const float* bias, std::size_t out, std::size_t in);
/// The same held as bf16: each weight rounded to nearest even (exact for values that came from
/// bf16); the bias stays f32.
PackedLinear pack_linear_bf16(const float* w, const float* bias, std::size_t out, std::size_t in);
/// pack_linear_bf16 in pieces (a loader that never holds the whole matrix in f32): a bf16 linear
/// of zero weights and bias, then rows [row0, row0 + rows) of W from `w` ([rows][in]) and `bias`
/// (those rows' values; nullptr = 0). Not for a PackedLinear already in use.
/// (`type` bf16 or f16: the 16-bit panels hold that format.)
PackedLinear alloc_linear_bf16(std::size_t out, std::size_t in, WeightType type = WeightType::bf16);
void pack_rows_bf16(PackedLinear& p, const float* w, const float* bias, std::size_t row0, std::size_t rows);

/// C[m][0, N) = bias + X[m]·Wᵀ for rows m < M at `level`, in w's dtype (see the top of this file).
/// K and N must be w.in and w.out. A row's result never depends on the other rows of the call.
/// `next` (f32 weights only): the matrix multiplied next, prefetched (project_rows' `next`).
/// `gelu`: C = GELU(bias + X·Wᵀ), BERT's erf GELU (kernels/gelu.hpp): the f32 kernel's fused
/// epilogue for f32 weights and in the widening kernels (the f32 path's bits on widened weights);
/// after vdpbf16ps and the scalar reference, gelu_inplace over the rows.
void project_rows(SimdLevel level, const float* x, std::size_t ldx, std::size_t M, std::size_t K,
                  const PackedLinear& w, std::size_t N, float* c, std::size_t ldc, const PackedLinear* next = nullptr,
                  bool gelu = false);

/// Whether bf16 products at SimdLevel::avx512 use vdpbf16ps: the CPU has AVX512-BF16 and
/// set_bf16_dot has not turned it off.
bool bf16_dot_active() noexcept;
/// Test hook (process-wide, set it before products run): false makes the AVX-512 level widen
/// bf16 panels as the other levels do, so both AVX-512 paths can be tested on one CPU.
void set_bf16_dot(bool on) noexcept;

// ---- the per-level kernels (project_bf16_<arch>.cpp; no std:: container code inside) ----------

/// The widening kernel at xsimd architecture A: `panels` as pack_linear_bf16 left them, `bias`
/// its padded bias.
template <class A>
struct bf16_project {
  /// `work`: K x kPanel floats, 64-byte aligned, where each panel is widened before the f32 kernel runs on it.
  void operator()(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
                  const float* bias, std::size_t N, float* c, std::size_t ldc, float* work, bool gelu = false) const noexcept;
  /// The same with f16 panels (F16C on AVX2 and AVX-512, element by element on SSE2).
  void f16(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
           const float* bias, std::size_t N, float* c, std::size_t ldc, float* work, bool gelu = false) const noexcept;
};

/// The vdpbf16ps kernel (project_bf16_dot.cpp, compiled with -mavx512bf16): `xb` the rows of X
/// as bf16 pairs (row m at xb + m * ldxb, bf16_pairs(K) pairs, an odd K's last pair padded 0).
void bf16_dot_project(const std::uint32_t* xb, std::size_t ldxb, std::size_t M, std::size_t K,
                      const std::uint16_t* panels, const float* bias, std::size_t N, float* c,
                      std::size_t ldc) noexcept;

}  // namespace headsep::kernels
