// bf16_project<A>: the bf16- (and f16-) panel product that widens the weights (packed_linear.hpp says when it
// runs). Written once, instantiated in project_bf16_<arch>.cpp with that architecture's flags only.
// Why it looks the way it does:
//  - Bit-identity with the f32 kernel on the widened weights: each element is one FMA chain
//    (AK::fmadd: fused on AVX2/AVX-512, mul + add on SSE2) from the bias over k in order, with
//    FTZ/DAZ set as that kernel sets them; `gelu` the f32 kernel's epilogue (AK::gelu) on the sums. A bf16 -> f32 widening is exact (a shift), so holding
//    the weights in bf16 changes memory and speed, never a bit of the result.
//  - A k-pair of W columns is one W-lane u32 load: the even k is the low half (<< 16), the odd k
//    the high half (& 0xffff0000). The halves run one after the other so only GV weight vectors
//    are live next to the GMR x GV accumulators.
//  - Micro-kernel: GMR rows x GV vectors; panel outer, rows inner, as the f32 kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <immintrin.h>

#include "kernels/attention_simd_ak.hpp"
#include "kernels/attention_simd_project.hpp"  // AK::gelu: the f32 kernel's GELU epilogue
#include "headsep/safetensors.hpp"  // f16_to_f32 (SSE2)
#include "kernels/packed_linear.hpp"

namespace headsep::kernels {
namespace bf16_detail {

template <class A>
struct K16 {
  using AK = attn_detail::AK<A>;
  using B = typename AK::B;
  static constexpr std::size_t W = B::size;
  static constexpr bool kAvx512 = std::is_base_of_v<xsimd::avx512f, A>;
  static constexpr bool kAvx2 = std::is_base_of_v<xsimd::avx2, A>;
  /// Vectors per micro-kernel row (one per slice on AVX-512, a slice or half of one below) and
  /// rows: 24 accumulators of 32 registers on AVX-512, 12 of 16 on AVX2/SSE2.
  static constexpr std::size_t GV = kAvx512 ? 3 : 2;
  static constexpr std::size_t GMR = kAvx512 ? 8 : 6;
  static constexpr std::size_t SW = GV * W;

  /// The same for f16 pairs: the half's W values gathered into one vector of f16, then F16C.
  static B widen_f16(const std::uint16_t* p, int half) noexcept {
    if constexpr (kAvx512) {
      const __m512i v = _mm512_loadu_si512(p);
      return B(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(half ? _mm512_srli_epi32(v, 16) : v)));
    } else if constexpr (kAvx2) {
      __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      v = half ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
      return B(_mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))));
    } else {  // SSE2 has no F16C: element by element (exact, as the others)
      alignas(16) float f[W];
      for (std::size_t i = 0; i < W; ++i) f[i] = f16_to_f32(p[2 * i + std::size_t(half)]);
      return B::load_aligned(f);
    }
  }

  /// The k-pair of W columns at p (u16 pairs) widened: half 0 = the even k, 1 = the odd k.
  template <bool F16 = false>
  static B widen(const std::uint16_t* p, int half) noexcept {
    if constexpr (F16) return widen_f16(p, half);
    if constexpr (kAvx512) {
      const __m512i v = _mm512_loadu_si512(p);
      return B(_mm512_castsi512_ps(half ? _mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))) : _mm512_slli_epi32(v, 16)));
    } else if constexpr (kAvx2) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      return B(_mm256_castsi256_ps(half ? _mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))) : _mm256_slli_epi32(v, 16)));
    } else {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return B(_mm_castsi128_ps(half ? _mm_and_si128(v, _mm_set1_epi32(int(0xffff0000u))) : _mm_slli_epi32(v, 16)));
    }
  }

  /// GELU from the stack tile t (rows x GV vectors) into C: the f32 kernel's epilogue (AK::gelu,
  /// out of line for the same reason as AK::gelu_tile: its constants would take the k loop's registers).
  [[gnu::noinline]] static void gelu_tile(const float* t, float* c, std::size_t ldc, std::size_t rows) noexcept {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < GV; ++j) AK::gelu(B::load_aligned(t + (r * GV + j) * W)).store_unaligned(c + r * ldc + j * W);
  }

  template <bool F16, bool G, std::size_t R>
  static void tile(const float* x, std::size_t ldx, std::size_t K, const std::uint16_t* bp, std::size_t c0,
                   const float* bias, float* c, std::size_t ldc) noexcept {
    const std::size_t KP = bf16_pairs(K);
    B acc[R][GV];
    const std::uint16_t* bj[GV];
    for (std::size_t j = 0; j < GV; ++j) {
      const B b = B::load_unaligned(bias + j * W);
      for (std::size_t r = 0; r < R; ++r) acc[r][j] = b;
      const std::size_t col = c0 + j * W;
      bj[j] = bp + col / kSlice * KP * 2 * kSlice + col % kSlice * 2;
    }
    auto step = [&](std::size_t q, int half) {
      B b[GV];
      for (std::size_t j = 0; j < GV; ++j) b[j] = widen<F16>(bj[j] + q * 2 * kSlice, half);
      for (std::size_t r = 0; r < R; ++r) {
        const B a(x[r * ldx + 2 * q + std::size_t(half)]);
        for (std::size_t j = 0; j < GV; ++j) acc[r][j] = AK::fmadd(a, b[j], acc[r][j]);
      }
    };
    for (std::size_t q = 0; q < K / 2; ++q) step(q, 0), step(q, 1);
    if (K % 2) step(K / 2, 0);  // (the padded odd half is never read)
    if constexpr (G) {
      alignas(64) float t[R * GV * W];
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t j = 0; j < GV; ++j) acc[r][j].store_aligned(t + (r * GV + j) * W);
      gelu_tile(t, c, ldc, R);
    } else {
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t j = 0; j < GV; ++j) acc[r][j].store_unaligned(c + r * ldc + j * W);
    }
  }

  template <bool F16, bool G, std::size_t R>
  static void rows(std::size_t n, const float* x, std::size_t ldx, std::size_t K, const std::uint16_t* bp,
                   std::size_t c0, const float* bias, float* c, std::size_t ldc) noexcept {
    if constexpr (R > 1)
      if (n < R) return rows<F16, G, R - 1>(n, x, ldx, K, bp, c0, bias, c, ldc);
    tile<F16, G, R>(x, ldx, K, bp, c0, bias, c, ldc);
  }

  template <bool F16, bool G>
  static void project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
                      const float* bias, std::size_t N, float* c, std::size_t ldc) noexcept {
    if (M == 0 || N == 0) return;
    const typename AK::FlushDenormals ftz;
    alignas(64) float tmp[GMR * SW];
    const std::size_t KP = bf16_pairs(K), panels_n = (N + kPanel - 1) / kPanel;
    for (std::size_t p = 0; p < panels_n; ++p) {
      const std::uint16_t* bp = panels + p * KP * 2 * kPanel;
      for (std::size_t c0 = 0; c0 < kPanel && p * kPanel + c0 < N; c0 += SW) {
        const std::size_t col = p * kPanel + c0, cols = N - col < SW ? N - col : SW;
        for (std::size_t m0 = 0; m0 < M; m0 += GMR) {
          const std::size_t R = M - m0 < GMR ? M - m0 : GMR;
          if (cols == SW) {
            rows<F16, G, GMR>(R, x + m0 * ldx, ldx, K, bp, c0, bias + col, c + m0 * ldc + col, ldc);
          } else {  // the last columns through a stack tile: nothing past column N is written
            rows<F16, G, GMR>(R, x + m0 * ldx, ldx, K, bp, c0, bias + col, tmp, SW);
            for (std::size_t r = 0; r < R; ++r)
              for (std::size_t j = 0; j < cols; ++j) c[(m0 + r) * ldc + col + j] = tmp[r * SW + j];
          }
        }
      }
    }
  }
};

}  // namespace bf16_detail

template <class A>
void bf16_project<A>::operator()(const float* x, std::size_t ldx, std::size_t M, std::size_t K,
                                 const std::uint16_t* panels, const float* bias, std::size_t N, float* c,
                                 std::size_t ldc, bool gelu) const noexcept {
  if (gelu) return bf16_detail::K16<A>::template project<false, true>(x, ldx, M, K, panels, bias, N, c, ldc);
  bf16_detail::K16<A>::template project<false, false>(x, ldx, M, K, panels, bias, N, c, ldc);
}

template <class A>
void bf16_project<A>::f16(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
                          const float* bias, std::size_t N, float* c, std::size_t ldc, bool gelu) const noexcept {
  if (gelu) return bf16_detail::K16<A>::template project<true, true>(x, ldx, M, K, panels, bias, N, c, ldc);
  bf16_detail::K16<A>::template project<true, false>(x, ldx, M, K, panels, bias, N, c, ldc);
}

}  // namespace headsep::kernels
