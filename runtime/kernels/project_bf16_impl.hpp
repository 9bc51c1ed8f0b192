// bf16_project<A>: the bf16- (and f16-) panel product that widens the weights (packed_linear.hpp says when it
// runs). Written once, instantiated in project_bf16_<arch>.cpp with that architecture's flags only.
// Why it looks the way it does:
//  - Each panel (K x kPanel) is widened once into `work` (f32 in pack_panels' slice layout), then
//    the f32 kernel itself (AK::project_t: micro-kernel, prefetch, GELU epilogue) runs on it, so
//    its bits are those of the f32 kernel on the widened weights at every level: a bf16 -> f32
//    widening is exact (a shift), f16 -> f32 too (F16C). Holding the weights in bf16 changes memory
//    and speed, never a bit of the result.
//  - Once per panel, not once per row tile: widening inside the micro-kernel redid it for every
//    GMR rows, two integer operations per k beside each tile's FMAs (the 1B-shaped decoder at
//    --simd avx2 ran at 0.69x its f32 speed on Zen 4).
//  - A k-pair of W columns is one W-lane u32 load: the even k is the low half (<< 16), the odd k
//    the high half (& 0xffff0000).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <immintrin.h>

#include "kernels/attention_simd_ak.hpp"
#include "kernels/attention_simd_project.hpp"  // AK::project_t: the f32 kernel
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

  /// The k-pair's f16 halves at p widened: the half's W values gathered into one vector of f16, then F16C.
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

  /// Panel `bp` (bf16 or f16 pairs) widened into `work`, pack_panels' f32 layout of one panel:
  /// slice s's row k at work + s·K·kSlice + k·kSlice.
  template <bool F16>
  static void widen_panel(const std::uint16_t* bp, std::size_t K, float* work) noexcept {
    const std::size_t KP = bf16_pairs(K);
    for (std::size_t s = 0; s < kPanel / kSlice; ++s)
      for (std::size_t q = 0; q < KP; ++q) {
        const std::uint16_t* src = bp + (s * KP + q) * 2 * kSlice;
        float* dst = work + (s * K + 2 * q) * kSlice;
        for (std::size_t u = 0; u < kSlice; u += W) widen<F16>(src + 2 * u, 0).store_aligned(dst + u);
        if (2 * q + 1 < K)  // (an odd K's padded last half is not a row)
          for (std::size_t u = 0; u < kSlice; u += W) widen<F16>(src + 2 * u, 1).store_aligned(dst + kSlice + u);
      }
  }

  template <bool F16, bool G>
  static void project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
                      const float* bias, std::size_t N, float* c, std::size_t ldc, float* work) noexcept {
    if (M == 0 || N == 0) return;
    const std::size_t KP = bf16_pairs(K), panels_n = (N + kPanel - 1) / kPanel;
    for (std::size_t p = 0; p < panels_n; ++p) {
      const std::uint16_t* bp = panels + p * KP * 2 * kPanel;
      widen_panel<F16>(bp, K, work);
      // The f32 kernel on this one panel; it prefetches the next bf16 panel (KP·2·kPanel halves:
      // the lines of KP f32 rows) while it runs.
      const float* next = p + 1 < panels_n ? reinterpret_cast<const float*>(bp + KP * 2 * kPanel) : nullptr;
      const std::size_t cols = N - p * kPanel < kPanel ? N - p * kPanel : kPanel;
      AK::template project_t<G>(x, ldx, M, K, work, bias + p * kPanel, cols, c + p * kPanel, ldc, next, KP);
    }
  }
};

}  // namespace bf16_detail

template <class A>
void bf16_project<A>::operator()(const float* x, std::size_t ldx, std::size_t M, std::size_t K,
                                 const std::uint16_t* panels, const float* bias, std::size_t N, float* c,
                                 std::size_t ldc, float* work, bool gelu) const noexcept {
  if (gelu) return bf16_detail::K16<A>::template project<false, true>(x, ldx, M, K, panels, bias, N, c, ldc, work);
  bf16_detail::K16<A>::template project<false, false>(x, ldx, M, K, panels, bias, N, c, ldc, work);
}

template <class A>
void bf16_project<A>::f16(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const std::uint16_t* panels,
                          const float* bias, std::size_t N, float* c, std::size_t ldc, float* work, bool gelu) const noexcept {
  if (gelu) return bf16_detail::K16<A>::template project<true, true>(x, ldx, M, K, panels, bias, N, c, ldc, work);
  bf16_detail::K16<A>::template project<true, false>(x, ldx, M, K, panels, bias, N, c, ldc, work);
}

}  // namespace headsep::kernels
