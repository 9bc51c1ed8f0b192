// Private: the body of metrics_kernel<Arch>. Include it ONLY from metrics_<arch>.cpp.
//
// Why the code looks the way it does:
// - Every helper is a template on the architecture A, so each per-arch object file gets its own
//   symbols. A helper that did not depend on A (or a std:: container instantiated here) would be
//   an identical COMDAT in several objects compiled with different flags, and the linker could
//   keep the AVX-512 copy for a machine without AVX-512.
// - Lanes across reports (each lane = one report) keep the scalar reference's order of
//   operations exactly: per lane, s = +0.0, then s = s + w[t]*x[t] for t in order, unfused in
//   f64. So f64 is bit-identical to metrics_scalar at every level. Ragged reports are padded
//   with w = x = +0.0: the running sum is never -0.0 under round-to-nearest (it starts at +0.0),
//   so s + (+0.0*+0.0) == s bit for bit, NaN and infinities included.
// - f32 may fuse (xsimd::fma) and, for long reports, uses lanes across tokens with a
//   horizontal sum: not bit-identical, within the tolerance stated in tests/kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <immintrin.h>  // every level's intrinsics are declared; bucket_keys uses its own level's only

#include "kernels/metrics_simd_k.hpp"
#include "kernels/metrics_simd_ragged.hpp"

namespace headsep::kernels {

template <class Arch>
bool metrics_kernel<Arch>::valid_weights(const double* w, std::size_t n) const noexcept {
  // 0 <= x <= DBL_MAX, as ordered compares: false for NaN, infinities and negatives, true for
  // -0.0. Four vectors per step; the tail one by one.
  using B = xsimd::batch<double, Arch>;
  constexpr std::size_t W = B::size;
  const B zero(0.0), top(1.7976931348623157e308);
  auto in = [&](const B& v) { return (v >= zero) & (v <= top); };
  std::size_t i = 0;
  auto ok = in(B(0.0));
  for (; i + 4 * W <= n; i += 4 * W)
    ok = ok & in(B::load_unaligned(w + i)) & in(B::load_unaligned(w + i + W)) & in(B::load_unaligned(w + i + 2 * W)) &
         in(B::load_unaligned(w + i + 3 * W));
  for (; i + W <= n; i += W) ok = ok & in(B::load_unaligned(w + i));
  bool good = xsimd::all(ok);
  for (; i < n; ++i) good = good && w[i] >= 0.0 && w[i] <= 1.7976931348623157e308;
  return good;
}

template <class Arch>
std::size_t metrics_kernel<Arch>::bucket_keys(const double* x, std::size_t n, std::int64_t N, std::int64_t* key) const noexcept {
  // The scalar reference's integer steps, W lanes at a time. floor(m N / 2^52) for the 52-bit
  // mantissa m needs a 64-bit product, which x86 lacks below AVX-512DQ; with m = h 2^20 + l
  // (h < 2^32, l < 2^20) and the 32 x 32 -> 64 multiply: floor((h N + floor(l N / 2^20)) / 2^32).
  // Zero and sign by double compares (x is finite): |x| < kSketchZero, x < 0 (-0.0 is a zero).
  constexpr std::int64_t kMant = (std::int64_t(1) << 52) - 1, kAbs = ~(std::int64_t(1) << 63);
  const std::int64_t bias = 1023 * N;
  std::size_t i = 0;
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
    const __m512i vn = _mm512_set1_epi64(N), mant = _mm512_set1_epi64(kMant), low = _mm512_set1_epi64((1 << 20) - 1);
    const __m512i abs = _mm512_set1_epi64(kAbs), vbias = _mm512_set1_epi64(bias);
    const __m512d zero = _mm512_set1_pd(kSketchZero);
    for (; i + 8 <= n; i += 8) {
      const __m512d v = _mm512_loadu_pd(x + i);
      const __m512i mag = _mm512_and_si512(_mm512_castpd_si512(v), abs), m = _mm512_and_si512(mag, mant);
      const __m512i hi = _mm512_mul_epu32(_mm512_srli_epi64(m, 20), vn);
      const __m512i lo = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_and_si512(m, low), vn), 20);
      const __m512i sub = _mm512_srli_epi64(_mm512_add_epi64(hi, lo), 32);
      const __m512i index = _mm512_sub_epi64(_mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(mag, 52), vn), sub), vbias);
      __m512i k = _mm512_slli_epi64(index, 2);
      k = _mm512_mask_add_epi64(k, _mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_LT_OQ), k, _mm512_set1_epi64(1));
      k = _mm512_mask_blend_epi64(_mm512_cmp_pd_mask(_mm512_castsi512_pd(mag), zero, _CMP_LT_OQ), k, _mm512_set1_epi64(2));
      _mm512_storeu_si512(key + i, k);
    }
  } else if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
    const __m256i vn = _mm256_set1_epi64x(N), mant = _mm256_set1_epi64x(kMant), low = _mm256_set1_epi64x((1 << 20) - 1);
    const __m256i abs = _mm256_set1_epi64x(kAbs), vbias = _mm256_set1_epi64x(bias), one = _mm256_set1_epi64x(1);
    const __m256d zero = _mm256_set1_pd(kSketchZero);
    for (; i + 4 <= n; i += 4) {
      const __m256d v = _mm256_loadu_pd(x + i);
      const __m256i mag = _mm256_and_si256(_mm256_castpd_si256(v), abs), m = _mm256_and_si256(mag, mant);
      const __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(m, 20), vn);
      const __m256i lo = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_and_si256(m, low), vn), 20);
      const __m256i sub = _mm256_srli_epi64(_mm256_add_epi64(hi, lo), 32);
      const __m256i index = _mm256_sub_epi64(_mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(mag, 52), vn), sub), vbias);
      const __m256i neg = _mm256_castpd_si256(_mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_LT_OQ));
      const __m256i k = _mm256_add_epi64(_mm256_slli_epi64(index, 2), _mm256_and_si256(neg, one));
      const __m256i is_zero = _mm256_castpd_si256(_mm256_cmp_pd(_mm256_castsi256_pd(mag), zero, _CMP_LT_OQ));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(key + i), _mm256_blendv_epi8(k, _mm256_set1_epi64x(2), is_zero));
    }
  } else {
    const __m128i vn = _mm_set1_epi64x(N), mant = _mm_set1_epi64x(kMant), low = _mm_set1_epi64x((1 << 20) - 1);
    const __m128i abs = _mm_set1_epi64x(kAbs), vbias = _mm_set1_epi64x(bias), one = _mm_set1_epi64x(1), two = _mm_set1_epi64x(2);
    const __m128d zero = _mm_set1_pd(kSketchZero);
    for (; i + 2 <= n; i += 2) {
      const __m128d v = _mm_loadu_pd(x + i);
      const __m128i mag = _mm_and_si128(_mm_castpd_si128(v), abs), m = _mm_and_si128(mag, mant);
      const __m128i hi = _mm_mul_epu32(_mm_srli_epi64(m, 20), vn);
      const __m128i lo = _mm_srli_epi64(_mm_mul_epu32(_mm_and_si128(m, low), vn), 20);
      const __m128i sub = _mm_srli_epi64(_mm_add_epi64(hi, lo), 32);
      const __m128i index = _mm_sub_epi64(_mm_add_epi64(_mm_mul_epu32(_mm_srli_epi64(mag, 52), vn), sub), vbias);
      const __m128i neg = _mm_castpd_si128(_mm_cmplt_pd(v, _mm_setzero_pd()));
      const __m128i k = _mm_add_epi64(_mm_slli_epi64(index, 2), _mm_and_si128(neg, one));
      const __m128i is_zero = _mm_castpd_si128(_mm_cmplt_pd(_mm_castsi128_pd(mag), zero));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(key + i),
                       _mm_or_si128(_mm_andnot_si128(is_zero, k), _mm_and_si128(is_zero, two)));
    }
  }
  return i;
}

template <class Arch>
std::size_t metrics_kernel<Arch>::finite_extremes(const double* x, std::size_t n, double& lo, double& hi,
                                                  bool& finite) const noexcept {
  // Four vectors per step, each its own min and max chain; |x| <= DBL_MAX is false for NaN and
  // the infinities. After the loop, NaN (if any) has left min/max undefined, but then finite is false.
  using B = xsimd::batch<double, Arch>;
  constexpr std::size_t W = B::size;
  if (n < 4 * W) return 0;
  const B top(1.7976931348623157e308);
  B l[4] = {B(lo), B(lo), B(lo), B(lo)}, h[4] = {B(hi), B(hi), B(hi), B(hi)};
  auto ok = top >= top;
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W)
    for (std::size_t k = 0; k < 4; ++k) {
      const B v = B::load_unaligned(x + i + k * W);
      ok = ok & (xsimd::abs(v) <= top);
      l[k] = xsimd::min(l[k], v);
      h[k] = xsimd::max(h[k], v);
    }
  finite = xsimd::all(ok);
  alignas(64) double t[W];
  xsimd::min(xsimd::min(l[0], l[1]), xsimd::min(l[2], l[3])).store_aligned(t);
  lo = t[0];
  for (std::size_t j = 1; j < W; ++j) lo = t[j] < lo ? t[j] : lo;
  xsimd::max(xsimd::max(h[0], h[1]), xsimd::max(h[2], h[3])).store_aligned(t);
  hi = t[0];
  for (std::size_t j = 1; j < W; ++j) hi = t[j] > hi ? t[j] : hi;
  return i;
}

template <class Arch>
std::size_t metrics_kernel<Arch>::operator()(const KernelArgs<double>& a, Strategy how) const {
  return simd_detail::K<Arch, double>::run(a, how);
}
template <class Arch>
std::size_t metrics_kernel<Arch>::operator()(const KernelArgs<float>& a, Strategy how) const {
  return simd_detail::K<Arch, float>::run(a, how);
}

}  // namespace headsep::kernels
