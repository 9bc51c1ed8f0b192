// AK<A>'s elementary functions (exp, log, horizontal max and sums) and the in-register W x W transpose:
// the vector building blocks of the fused kernel, one branch per instruction set.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_simd_ak.hpp"

namespace headsep::kernels {
namespace attn_detail {

/// 2^t for -126.96 <= t <= 0 (the callers clamp; a tiny t > 0 from rounding gives 1 + t·ln2). The
/// softmax folds its scale and log2 e into the one FMA that makes t from a score, so the exp's own
/// conversion multiply is gone, and t - round(t) is exact: no two-part (Cody-Waite) reduction.
/// Below t = -125.9, where 2^t is near the smallest normal float, 0 (or a subnormal on AVX-512).
/// AVX-512: t = k + j/16 + r (vrndscaleps to sixteenths), |r| <= 1/32, 2^(j/16) from a 16-entry
/// in-register table and 2^r by its Taylor series to r³ (relative error 9e-9), 2^k by vscalefps
/// (which also underflows to 0 by itself): 4 operations on Zen 4's FMA pipes, 4 on its add pipes
/// (where the e^y form took 7 + 3). Other levels: the Cephes polynomial of e^(r·ln2), |r| <= 1/2.
template <class A>
inline auto AK<A>::exp2_neg(B t) noexcept -> B {
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    alignas(64) static constexpr float pow2_j16[16] = {
        1.0f,         1.04427373f, 1.09050775f, 1.13878858f, 1.18920708f, 1.24185777f, 1.29683959f, 1.35425556f,
        1.41421354f, 1.47682619f, 1.54221082f, 1.61049032f, 1.68179286f, 1.75625217f, 1.8340081f,  1.91520655f};
    // k + j/16 (round to nearest sixteenth: imm 4 << 4); its sixteenths land in the low 4 mantissa
    // bits of kq + 1.5·2^19 (ulp 1/16 there), which is all vpermps reads of an index.
    const B kq(_mm512_roundscale_ps(t, (4 << 4) | _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512i j = _mm512_castps_si512(kq + B(786432.0f));
    const B r = t - kq;  // exact (Sterbenz): kq is within 1/32 of t
    const B tab(_mm512_permutexvar_ps(j, _mm512_load_ps(pow2_j16)));
    const B q = fmadd(fmadd(r, B(0.0555041087f), B(0.240226507f)), r, B(0.693147181f));  // 2^r = 1 + r·q
    return B(_mm512_scalef_ps(fmadd(tab * r, q, tab), kq));  // 2^floor(kq) · 2^(j/16) · 2^r
  } else {
    const B magic(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer in the low bits
    const B tm = t + magic;
    const B n = tm - magic;
    const B r = (t - n) * B(0.693147181f);  // t - n exact; |r| <= ln2 / 2
    // The polynomial in Estrin's form: three short chains, not one of six dependent FMAs
    // (bench_transcendental on Zen 3: exp/avx2 +4.5 %, exp/sse2 +9 %).
    const B r2 = r * r;
    const B p01 = fmadd(r, B(1.6666665459e-1f), B(5.0000001201e-1f));
    const B p23 = fmadd(r, B(8.3334519073e-3f), B(4.1665795894e-2f));
    const B p45 = fmadd(r, B(1.9875691500e-4f), B(1.3981999507e-3f));
    const B p = fmadd(fmadd(fmadd(p45, r2, p23), r2, p01), r2, r) + B(1.0f);
    // tm's low bits hold n (two's complement): shifted into the exponent field, the high bits drop out.
    const I scaled = xsimd::bitwise_cast<I>(p) + (xsimd::bitwise_cast<I>(tm) << 23);
    return xsimd::select(t < B(-125.9f), B(0.0f), xsimd::bitwise_cast<B>(scaled));
  }
}

/// log x for normal x > 0 (x >= FLT_MIN), absolute error ~1e-7. x = 2^e m, m in [1, 2); the top
/// mantissa bits pick c_i from a table (an in-register permute: 16 entries on AVX-512, 8 on
/// AVX2) with 1/c_i exact in 9 bits, so r = m/c_i - 1 is one FMA and |r| <= 1/32 (1/17): log m =
/// log c_i + log1p(r), log1p by its Taylor series to r^4 (AVX-512) or a degree-4 minimax
/// polynomial (AVX2), error < 2e-8. About 12 vector ops on AVX-512 (getexp/getmant split the
/// float), 15 on AVX2; SSE2 has no variable
/// permute and keeps the Cephes polynomial (~20 ops). The JS divergences spend most of their
/// time here (one log per key per pair of heads). Base e on purpose: log2 (e + log2 c an add on
/// the add pipes, not an FMA) measured slower in the JS loop on Zen 4 (9.3 vs 8.9 cycles per 16
/// keys): that loop's add pipes already carry the sum, max, getmant, getexp and shift.
template <class A>
inline auto AK<A>::log_pos(B x) noexcept -> B {
  // ln2's rounding in f32 (2e-9 per unit of e) is far below the table's error.
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    const B ln2(0.693147182f);
    alignas(64) static constexpr float inv_c[16] = {
        0.96875f,   0.9140625f,  0.865234375f, 0.8203125f,   0.78125f,    0.744140625f, 0.7109375f,  0.681640625f,
        0.65234375f, 0.626953125f, 0.603515625f, 0.58203125f, 0.560546875f, 0.54296875f,  0.525390625f, 0.5078125f};
    alignas(64) static constexpr float log_c[16] = {
        0.0317486972f, 0.0898563266f, 0.144754857f, 0.198069915f, 0.246860072f, 0.295525253f, 0.341170758f, 0.38325271f,
        0.427183628f,  0.46688351f,   0.504983366f, 0.541231155f, 0.578842402f, 0.610703528f, 0.643613219f, 0.677643001f};
    const __m512 xv = x;
    const __m512i idx = _mm512_srli_epi32(_mm512_castps_si512(xv), 19);  // mantissa bits 22..19
    const B m(_mm512_getmant_ps(xv, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src));
    const B e(_mm512_getexp_ps(xv));
    const B r = fmadd(m, B(_mm512_permutexvar_ps(idx, _mm512_load_ps(inv_c))), B(-1.0f));
    const B lc(_mm512_permutexvar_ps(idx, _mm512_load_ps(log_c)));
    // log1p(r) = r·(1 + r·(-1/2 + r·(1/3 - r/4))) in Horner's form, its last product fused
    // with e·ln2 + log c_i (computed beside it): 5 FMAs, where r² and a separate add took 6.
    B p = fmadd(r, B(-0.25f), B(0.333333343f));
    p = fmadd(p, r, B(-0.5f));
    p = fmadd(p, r, B(1.0f));
    return fmadd(p, r, fmadd(e, ln2, lc));
  } else if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    const B ln2(0.693147182f);
    alignas(32) static constexpr float inv_c[8] = {0.94140625f, 0.841796875f, 0.76171875f, 0.6953125f,
                                                   0.640625f,   0.591796875f, 0.55078125f, 0.515625f};
    alignas(32) static constexpr float log_c[8] = {0.060380511f, 0.172216535f, 0.272177875f, 0.363393903f,
                                                   0.44531101f,  0.524591804f, 0.596417546f, 0.66237551f};
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i idx = _mm256_srli_epi32(bits, 20);  // mantissa bits 22..20
    const B e(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127))));
    const B m(_mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)), _mm256_set1_epi32(0x3F800000))));
    const B r = fmadd(m, B(_mm256_permutevar8x32_ps(_mm256_load_ps(inv_c), idx)), B(-1.0f));
    const B lc(_mm256_permutevar8x32_ps(_mm256_load_ps(log_c), idx));
    // log1p(r) ≈ r + r²(c2 + c3 r + c4 r²), minimax on r's range [-0.0586, 0.0591] (error 1.9e-8,
    // Taylor to r^5 has 7e-9 with one FMA more: the JS pass is bound by FMA-pipe operations on
    // Zen 3), in Estrin's form, e·ln2 + log c_i beside it.
    const B r2 = r * r;
    const B q = fmadd(r2, B(-0.25063527f), fmadd(r, B(0.33393613f), B(-0.4999994f)));
    return fmadd(e, ln2, lc) + fmadd(q, r2, r);
  } else {
    // Cephes logf: m in [sqrt(1/2), sqrt(2)) split by integer arithmetic, degree-9 polynomial.
    const I bits = xsimd::bitwise_cast<I>(x);
    const I e = (bits - I(0x3f3504f3)) >> 23;  // floor(log2(x / sqrt(1/2)))
    const B f = xsimd::bitwise_cast<B>(bits - (e << 23)) - B(1.0f);
    const B ef = xsimd::to_float(e);
    const B z = f * f;
    B p(7.0376836292e-2f);
    p = fmadd(p, f, B(-1.1514610310e-1f));
    p = fmadd(p, f, B(1.1676998740e-1f));
    p = fmadd(p, f, B(-1.2420140846e-1f));
    p = fmadd(p, f, B(1.4249322787e-1f));
    p = fmadd(p, f, B(-1.6668057665e-1f));
    p = fmadd(p, f, B(2.0000714765e-1f));
    p = fmadd(p, f, B(-2.4999993993e-1f));
    p = fmadd(p, f, B(3.3333331174e-1f));
    B y = p * (f * z);
    y = fmadd(ef, B(-2.12194440e-4f), y);
    y = fmadd(z, B(-0.5f), y);
    return fmadd(ef, B(0.693359375f), f + y);
  }
}

template <class A>
inline float AK<A>::hmax(B v) noexcept {
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    return _mm512_reduce_max_ps(v);
  } else if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
  } else {
    alignas(64) float t[W];
    v.store_aligned(t);
    float m = t[0];
    for (std::size_t i = 1; i < W; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }
}

/// Lane r of the result = the sum of v[r]'s lanes, for W vectors: a transposing horizontal sum.
/// Ours, not xsimd::haddp: xsimd 8.1's AVX-512 float haddp returns the sums of rows 4, 5, 2, 3
/// in lanes 2..5 (and 12, 13, 10, 11 in 10..13), checked on a Xeon; its SSE2/AVX2 ones are right.
template <class A>
inline auto AK<A>::row_sums(const B* v) noexcept -> B {
  // 8 rows of 8 lanes: two rounds of hadd leave each row's two 128-bit halves in the two lanes'
  // halves; the last add folds them.
  const auto sums8 = [](const auto* r) noexcept {  // generic: instantiated on the AVX levels only
    const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(r[0], r[1]), _mm256_hadd_ps(r[2], r[3]));
    const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(r[4], r[5]), _mm256_hadd_ps(r[6], r[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  };
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    __m256 h[16];  // each row's two 256-bit halves added
    for (int i = 0; i < 16; ++i) {
      const __m512 x = v[i];
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
      h[i] = _mm256_add_ps(_mm512_castps512_ps256(x), hi);
    }
    const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(sums8(h)));
    return B(_mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(sums8(h + 8)), 1)));
  } else if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    const __m256 r[8] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    return B(sums8(r));
  } else {
    __m128 r0 = v[0], r1 = v[1], r2 = v[2], r3 = v[3];
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    return B(_mm_add_ps(_mm_add_ps(r0, r1), _mm_add_ps(r2, r3)));
  }
}

/// dst[i·ldd + j] = src[j·lds + i] for a W x W block (i, j < W): W loads, an in-register
/// transpose (AVX-512 16x16, AVX2 8x8, SSE2 4x4), W aligned stores.
template <class A>
inline void AK<A>::transpose_block(const float* src, std::size_t lds, float* dst, std::size_t ldd) noexcept {
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
      for (int j = 0; j < 2; ++j) {
        const __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
        r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      }
    for (int i = 0; i < 16; i += 8)
      for (int j = 0; j < 4; ++j) {
        t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
        t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
      }
    for (int j = 0; j < 8; ++j) {
      r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
      r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
    for (int m = 0; m < 16; ++m) _mm512_store_ps(dst + m * ldd, r[m]);
  } else if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
      t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
    }
    for (int m = 0; m < 8; ++m) _mm256_store_ps(dst + m * ldd, t[m]);
  } else {
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + lds), r2 = _mm_loadu_ps(src + 2 * lds),
           r3 = _mm_loadu_ps(src + 3 * lds);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_store_ps(dst, r0);
    _mm_store_ps(dst + ldd, r1);
    _mm_store_ps(dst + 2 * ldd, r2);
    _mm_store_ps(dst + 3 * ldd, r3);
  }
}

}  // namespace attn_detail
}  // namespace headsep::kernels
