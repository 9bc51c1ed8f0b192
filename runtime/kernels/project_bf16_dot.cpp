// bf16_dot_project: bf16 panels x bf16 rows with vdpbf16ps (AVX512-BF16), accumulating in f32.
// Compiled with -mavx512f -mavx512bw -mavx512bf16 (CMakeLists.txt) and called only when the CPU
// has AVX512-BF16 (packed_linear.cpp checks). Raw intrinsics and no xsimd: nothing here is an
// inline function another object could share (the linker could pick this copy, with BF16
// instructions in it, for a CPU without them).
//  - One instruction multiplies a k-pair per lane: acc += x[2q]·w[2q] + x[2q+1]·w[2q+1], products of
//    bf16 exact in f32. Per k-pair of one row, one broadcast (the pair as a u32) feeds GV = 3
//    instructions (one per slice of the panel); 8 rows x 3 = 24 accumulators.
//  - The pair's order within the instruction is the hardware's: results are compared with X
//    rounded to bf16 times the weights summed in double, within f32 summation error (tests).
#include <immintrin.h>

#include "kernels/packed_linear.hpp"

namespace headsep::kernels {
namespace {

constexpr std::size_t GV = kPanel / kSlice, GMR = 8;

template <std::size_t R>
void dot_tile(const std::uint32_t* xb, std::size_t ldxb, std::size_t KP, const std::uint16_t* bp, const float* bias,
              float* c, std::size_t ldc) noexcept {
  __m512 acc[R][GV];
  for (std::size_t j = 0; j < GV; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + j * kSlice);
    for (std::size_t r = 0; r < R; ++r) acc[r][j] = b;
  }
  for (std::size_t q = 0; q < KP; ++q) {
    __m512bh b[GV];
    for (std::size_t j = 0; j < GV; ++j) b[j] = (__m512bh)_mm512_loadu_si512(bp + j * KP * 2 * kSlice + q * 2 * kSlice);
    for (std::size_t r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(xb[r * ldxb + q]));
      for (std::size_t j = 0; j < GV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], a, b[j]);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < GV; ++j) _mm512_storeu_ps(c + r * ldc + j * kSlice, acc[r][j]);
}

template <std::size_t R>
void dot_rows(std::size_t n, const std::uint32_t* xb, std::size_t ldxb, std::size_t KP, const std::uint16_t* bp,
              const float* bias, float* c, std::size_t ldc) noexcept {
  if constexpr (R > 1)
    if (n < R) return dot_rows<R - 1>(n, xb, ldxb, KP, bp, bias, c, ldc);
  dot_tile<R>(xb, ldxb, KP, bp, bias, c, ldc);
}

}  // namespace

void bf16_dot_project(const std::uint32_t* xb, std::size_t ldxb, std::size_t M, std::size_t K,
                      const std::uint16_t* panels, const float* bias, std::size_t N, float* c,
                      std::size_t ldc) noexcept {
  if (M == 0 || N == 0) return;
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ, as the other kernels (vdpbf16ps itself ignores MXCSR's)
  alignas(64) float tmp[GMR * kPanel];
  const std::size_t KP = bf16_pairs(K), panels_n = (N + kPanel - 1) / kPanel;
  for (std::size_t p = 0; p < panels_n; ++p) {
    const std::uint16_t* bp = panels + p * KP * 2 * kPanel;
    const std::size_t col = p * kPanel, cols = N - col < kPanel ? N - col : kPanel;
    for (std::size_t m0 = 0; m0 < M; m0 += GMR) {
      const std::size_t R = M - m0 < GMR ? M - m0 : GMR;
      if (cols == kPanel) {
        dot_rows<GMR>(R, xb + m0 * ldxb, ldxb, KP, bp, bias + col, c + m0 * ldc + col, ldc);
      } else {  // the last panel's columns through a stack tile: nothing past column N is written
        dot_rows<GMR>(R, xb + m0 * ldxb, ldxb, KP, bp, bias + col, tmp, kPanel);
        for (std::size_t r = 0; r < R; ++r)
          for (std::size_t j = 0; j < cols; ++j) c[(m0 + r) * ldc + col + j] = tmp[r * kPanel + j];
      }
    }
  }
  _mm_setcsr(saved);
}

}  // namespace headsep::kernels
