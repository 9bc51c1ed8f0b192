// Private: the body of attention_kernel<Arch>. Include it ONLY from attention_<arch>.cpp.
//
// Why the code looks the way it does:
// - Every helper is a template on the architecture A (as in metrics_simd_impl.hpp): a helper
//   that did not depend on A would be an identical COMDAT in objects compiled with different
//   flags, and the linker could keep the AVX-512 copy for an AVX2 machine. The dispatcher
//   (baseline flags) owns every allocation and check; this file never touches a std:: container.
// - Query tile outer, heads inner: a tile of tq queries keeps the (H+1) x tq rows of scores /
//   probabilities in L1/L2 (scratch, never A in memory), so the pairwise metrics (JS divergence,
//   overlap, output distance) read every head's row of the same query while it is hot. K and V of
//   the report (n x Σd floats) are re-read per tile from L2.
// - Scores and A·V are register-blocked micro-kernels (MR queries x NV vectors of keys, resp.
//   MR queries x DV vectors of value dims), the shape of a GEMM micro-kernel: one broadcast of a
//   query element (resp. a probability) feeds NV (DV) FMAs. K is transposed once per report into
//   [d][n rounded up to W] so a key block is one aligned load; V is copied once per report into
//   contiguous rows of d_v rounded up to W, zero-padded: read in place, each key's row was on
//   another page (rows of the projection matrix are kilobytes apart) and A·V waited on the loads.
//   Zero padding (keys past n, lanes past d_v) makes every loop whole vectors, results unchanged.
// - Softmax: exp(scale·(s - max)) with max subtracted (the max element gets exactly e^0 = 1, so the
//   confidence max_k a is 1/Z), masked and padding lanes at -inf -> y clamped to -88 -> exactly 0.
//   The entropy needs no per-element log: with y_k = scale·(s_k - max) and a_k = e^{y_k}/Z,
//   -Σ a log a = log Z - Σ e^{y} y / Z, accumulated in the exp pass (with the context sums).
//   Only the JS divergences need logs (H(M), one per key per pair of heads: 28 pairs x n² for 8
//   heads, the largest cost after the two matrix products), so log is a table + short series
//   (see log_pos), exp the Cephes polynomial times 2^n (vscalefps on AVX-512), ~2 ulp. Measured
//   against xsimd::exp/log (bench_attention kernel/, AVX-512): 256x256x256x8 18.1 vs 29.5 ms per
//   8 reports, 2048x64x64x4 1.76 vs 2.49 ms per 32.
// - The Q/K/V projections (project(), AttentionPlan's default) are a packed-panel GEMM: 8 rows x
//   48 columns of accumulators on AVX-512, bias first, then Σ_k in order, so a row's result does
//   not depend on which rows share the call (runtime/attention/plan.cpp says why not BLAS).
// - xsimd 8.1 has no AVX-512 fma (it falls back to an unfused mul + add), hence fmadd().
// - f32 throughout one row (FMA, tree-shaped horizontal sums), f64 across queries (the pair sums
//   JS, overlap and output dot product: f32 vectors across a tile's <= 32 rows, then f64 across
//   tiles): results agree with the scalar reference (attention_scalar.hpp) within the tolerance
//   in tests/kernels.
// - Subnormals are flushed to zero while a kernel runs (FlushDenormals): masked lanes would
//   otherwise make every exp a microcode assist.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <immintrin.h>  // AVX-512/AVX2 intrinsics in if-constexpr branches (declared for every target)

#include "kernels/attention_simd.hpp"
#include "kernels/gelu.hpp"

namespace headsep::kernels {
namespace attn_detail {

template <class A>
struct AK {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  static constexpr std::size_t W = B::size;
  // Micro-kernel shapes: MR query rows x 2 vectors of keys (scores) or value dims (A·V) keeps
  // 2·MR accumulators + 2 loaded vectors in registers (32 on AVX-512, 16 on AVX2/SSE2).
  static constexpr std::size_t MR = W >= 16 ? 8 : 6;
  static constexpr std::size_t NV = 2;
  static constexpr std::size_t DV = 2;

  static std::size_t up(std::size_t x) noexcept { return (x + W - 1) / W * W; }
  static std::size_t seg(std::size_t x) noexcept { return (x + kAttnMaxLanes - 1) / kAttnMaxLanes * kAttnMaxLanes; }
  static std::size_t lo(std::size_t x, std::size_t y) noexcept { return x < y ? x : y; }

  /// x·y + z, fused where the level has FMA. xsimd 8.1 has no AVX-512 fma (its generic x*y + z
  /// stays two instructions under -ffp-contract=off), so AVX-512 calls the intrinsic.
  static B fmadd(B x, B y, B z) noexcept {
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) return B(_mm512_fmadd_ps(x, y, z));
    else return xsimd::fma(x, y, z);
  }

  /// Flush-to-zero and denormals-are-zero for the duration of a call, then the caller's MXCSR
  /// back. Masked lanes (e^-88) and far tails of a softmax are subnormal: each subnormal result
  /// or input costs a microcode assist of ~100 cycles on Intel (measured: 20% of a 3-token report
  /// in one store after vscalefps). Values below 1.2e-38 become 0, far inside the tolerance.
  struct FlushDenormals {
    unsigned saved = _mm_getcsr();
    FlushDenormals() noexcept { _mm_setcsr(saved | 0x8040u); }  // FTZ (bit 15) | DAZ (bit 6)
    ~FlushDenormals() { _mm_setcsr(saved); }
    FlushDenormals(const FlushDenormals&) = delete;
    FlushDenormals& operator=(const FlushDenormals&) = delete;
  };

  // ---- elementary functions --------------------------------------------------------------

  /// e^y for -88 <= y <= 0 (Cephes expf polynomial times 2^n). Below -87.3, where e^y is under
  /// the smallest normal float, 0 (or a subnormal on AVX-512): |diff| < 1e-38 from the reference.
  static B exp_neg(B y) noexcept {
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      // n = round(y log2 e) and 2^n p by vscalefps, which also underflows to 0 by itself.
      const B n(_mm512_roundscale_ps(y * B(1.44269504088896341f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      B r = fmadd(n, B(-0.693359375f), y);
      r = fmadd(n, B(2.12194440e-4f), r);
      B p(1.9875691500e-4f);
      p = fmadd(p, r, B(1.3981999507e-3f));
      p = fmadd(p, r, B(8.3334519073e-3f));
      p = fmadd(p, r, B(4.1665795894e-2f));
      p = fmadd(p, r, B(1.6666665459e-1f));
      p = fmadd(p, r, B(5.0000001201e-1f));
      p = fmadd(p, r * r, r) + B(1.0f);
      return B(_mm512_scalef_ps(p, n));
    } else {
      const B magic(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer in the low bits
      const B t = fmadd(y, B(1.44269504088896341f), magic);
      const B n = t - magic;
      B r = fmadd(n, B(-0.693359375f), y);
      r = fmadd(n, B(2.12194440e-4f), r);
      B p(1.9875691500e-4f);
      p = fmadd(p, r, B(1.3981999507e-3f));
      p = fmadd(p, r, B(8.3334519073e-3f));
      p = fmadd(p, r, B(4.1665795894e-2f));
      p = fmadd(p, r, B(1.6666665459e-1f));
      p = fmadd(p, r, B(5.0000001201e-1f));
      p = fmadd(p, r * r, r) + B(1.0f);
      // t's low bits hold n (two's complement): shifted into the exponent field, the high bits drop out.
      const I scaled = xsimd::bitwise_cast<I>(p) + (xsimd::bitwise_cast<I>(t) << 23);
      return xsimd::select(y < B(-87.3f), B(0.0f), xsimd::bitwise_cast<B>(scaled));
    }
  }

  /// log x for normal x > 0 (x >= FLT_MIN), absolute error ~1e-7. x = 2^e m, m in [1, 2); the top
  /// mantissa bits pick c_i from a table (an in-register permute: 16 entries on AVX-512, 8 on
  /// AVX2) with 1/c_i exact in 9 bits, so r = m/c_i - 1 is one FMA and |r| <= 1/32 (1/17): log m =
  /// log c_i + log1p(r), log1p by its Taylor series to r^4 (r^5), truncation < 1e-8. About 13
  /// vector ops on AVX-512 (getexp/getmant split the float), 16 on AVX2; SSE2 has no variable
  /// permute and keeps the Cephes polynomial (~20 ops). The JS divergences spend most of their
  /// time here (one log per key per pair of heads).
  static B log_pos(B x) noexcept {
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
      B p = fmadd(r, B(-0.25f), B(0.333333343f));
      p = fmadd(p, r, B(-0.5f));
      p = fmadd(p, r * r, r);
      return fmadd(e, ln2, lc + p);
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
      B p = fmadd(r, B(0.2f), B(-0.25f));
      p = fmadd(p, r, B(0.333333343f));
      p = fmadd(p, r, B(-0.5f));
      p = fmadd(p, r * r, r);
      return fmadd(e, ln2, lc + p);
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

  static float hmax(B v) noexcept {
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

  /// dst[i·ldd + j] = src[j·lds + i] for a W x W block (i, j < W): W loads, an in-register
  /// transpose (AVX-512 16x16, AVX2 8x8, SSE2 4x4), W aligned stores.
  static void transpose_block(const float* src, std::size_t lds, float* dst, std::size_t ldd) noexcept {
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

  // ---- micro-kernels ---------------------------------------------------------------------

  /// s[r][k0 + v·W ..] = Σ_d q[r][d] kt[d][k0 + v·W ..] for R query rows and V key vectors.
  template <std::size_t R, std::size_t V>
  static void score_tile(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk, float* s,
                         std::size_t k0) noexcept {
    B acc[R][V];
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t v = 0; v < V; ++v) acc[r][v] = B(0.0f);
    const float* kp = kt + k0;
    for (std::size_t d = 0; d < dk; ++d, kp += np) {
      B b[V];
      for (std::size_t v = 0; v < V; ++v) b[v] = B::load_aligned(kp + v * W);
      for (std::size_t r = 0; r < R; ++r) {
        const B a(q[r * ldq + d]);
        for (std::size_t v = 0; v < V; ++v) acc[r][v] = fmadd(a, b[v], acc[r][v]);
      }
    }
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t v = 0; v < V; ++v) acc[r][v].store_aligned(s + r * np + k0 + v * W);
  }

  template <std::size_t R>
  static void scores_rows(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk, float* s,
                          std::size_t kend) noexcept {
    std::size_t k0 = 0;
    for (; k0 + NV * W <= kend; k0 += NV * W) score_tile<R, NV>(q, ldq, kt, np, dk, s, k0);
    for (; k0 < kend; k0 += W) score_tile<R, 1>(q, ldq, kt, np, dk, s, k0);
  }

  /// Scores of `rows` (<= MR) query rows over keys [0, kend), kend a multiple of W.
  template <std::size_t R = MR>
  static void scores(std::size_t rows, const float* q, std::size_t ldq, const float* kt, std::size_t np,
                     std::size_t dk, float* s, std::size_t kend) noexcept {
    if constexpr (R > 1)
      if (rows < R) return scores<R - 1>(rows, q, ldq, kt, np, dk, s, kend);
    scores_rows<R>(q, ldq, kt, np, dk, s, kend);
  }

  /// o[r][d0 + j·W ..] = Σ_{k < klen} a[r][k] v[k][d0 + j·W ..] for R rows and V value vectors.
  template <std::size_t R, std::size_t V>
  static void av_tile(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                      std::size_t ldo, std::size_t d0) noexcept {
    B acc[R][V];
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < V; ++j) acc[r][j] = B(0.0f);
    const float* vp = v + d0;
    for (std::size_t k = 0; k < klen; ++k, vp += ldv) {
      B b[V];
      for (std::size_t j = 0; j < V; ++j) b[j] = B::load_aligned(vp + j * W);
      for (std::size_t r = 0; r < R; ++r) {
        const B x(a[r * np + k]);
        for (std::size_t j = 0; j < V; ++j) acc[r][j] = fmadd(x, b[j], acc[r][j]);
      }
    }
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < V; ++j) acc[r][j].store_aligned(o + r * ldo + d0 + j * W);
  }

  template <std::size_t R>
  static void av_rows(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                      std::size_t dvp) noexcept {
    std::size_t d0 = 0;
    for (; d0 + DV * W <= dvp; d0 += DV * W) av_tile<R, DV>(a, np, v, ldv, klen, o, dvp, d0);
    for (; d0 < dvp; d0 += W) av_tile<R, 1>(a, np, v, ldv, klen, o, dvp, d0);
  }

  template <std::size_t R = MR>
  static void av(std::size_t rows, const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen,
                 float* o, std::size_t dvp) noexcept {
    if constexpr (R > 1)
      if (rows < R) return av<R - 1>(rows, a, np, v, ldv, klen, o, dvp);
    av_rows<R>(a, np, v, ldv, klen, o, dvp);
  }

  /// f32 dot product of two zero-padded arrays of `len` floats (len a multiple of W, aligned).
  static float dot(const float* x, const float* y, std::size_t len) noexcept {
    B s0(0.0f), s1(0.0f);
    std::size_t k = 0;
    for (; k + 2 * W <= len; k += 2 * W) {
      s0 = fmadd(B::load_aligned(x + k), B::load_aligned(y + k), s0);
      s1 = fmadd(B::load_aligned(x + k + W), B::load_aligned(y + k + W), s1);
    }
    for (; k < len; k += W) s0 = fmadd(B::load_aligned(x + k), B::load_aligned(y + k), s0);
    return xsimd::hadd(s0 + s1);
  }

  /// Softmax of one score row in place: s[0, lv) (entries [len, lv) hold -inf) becomes the
  /// probabilities. Returns Z and Σ e^y y / Z (the entropy is log Z minus it: logs are taken for a
  /// whole tile at once); ctx[c·ldc] = Σ_k a_k x_c[k] for the axes (CC = C when C <= 4:
  /// the axis sums ride along the exp pass in registers, scaled by 1/Z at the end; kAnyC: one dot
  /// product per axis after normalising).
  static constexpr std::size_t kAnyC = 5;
  template <std::size_t CC>
  static void softmax_row(float* s, std::size_t lv, float scale, const float* ax, std::size_t np, std::size_t C,
                          float* ctx, std::size_t ldc, float& z_out, float& tz_out) noexcept {
    B mx(-std::numeric_limits<float>::infinity());
    for (std::size_t k = 0; k < lv; k += W) mx = xsimd::max(mx, B::load_aligned(s + k));
    const float m = hmax(mx);
    const B sc(scale), msc(-m * scale), ymin(-88.0f);
    B z(0.0f), ty(0.0f);
    B cx[CC < kAnyC && CC > 0 ? CC : 1];
    for (std::size_t c = 0; c < (CC < kAnyC ? CC : 0); ++c) cx[c] = B(0.0f);
    for (std::size_t k = 0; k < lv; k += W) {
      const B y = xsimd::max(fmadd(B::load_aligned(s + k), sc, msc), ymin);  // scale·(s - max), >= -88
      const B e = exp_neg(y);
      e.store_aligned(s + k);
      z += e;
      ty = fmadd(e, y, ty);
      if constexpr (CC < kAnyC)
        for (std::size_t c = 0; c < CC; ++c) cx[c] = fmadd(e, B::load_aligned(ax + c * np + k), cx[c]);
    }
    const float zs = xsimd::hadd(z), inv = 1.0f / zs;
    z_out = zs;
    tz_out = xsimd::hadd(ty) * inv;
    const B ib(inv);
    for (std::size_t k = 0; k < lv; k += W) (B::load_aligned(s + k) * ib).store_aligned(s + k);
    if constexpr (CC < kAnyC) {
      for (std::size_t c = 0; c < CC; ++c) ctx[c * ldc] = xsimd::hadd(cx[c]) * inv;
    } else {
      for (std::size_t c = 0; c < C; ++c) ctx[c * ldc] = dot(s, ax + c * np, lv);
    }
  }

  // ---- the report -------------------------------------------------------------------------

  static void run(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) noexcept {
    const FlushDenormals ftz;
    const std::size_t n = in.n, H1 = std::size_t(in.heads) + 1, C = in.axes, S = out.stride;
    const std::size_t P = in.heads ? std::size_t(in.heads) * (in.heads - 1) / 2 : 0;
    std::size_t q_first = 0;
    const std::size_t nq = attention_query_rows(in, &q_first);
    for (std::size_t h = 0; h < H1; ++h) {
      for (std::size_t c = 0; c < C; ++c) out.context[(h * C + c) * S] = 0.0;
      for (std::size_t s = 0; s < kHeadStats; ++s) out.head_stats[(h * kHeadStats + s) * S] = 0.0;
    }
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t s = 0; s < kPairStats; ++s) out.pair_stats[(p * kPairStats + s) * S] = 0.0;
    if (nq == 0) return;  // empty report: every value 0

    const bool causal = in.config.mask == MaskKind::causal;
    const std::size_t np = up(n), tq = w.tq;
    const std::size_t ld = in.ld;
    // ---- carve the working memory (the same segments, sized for W = kAttnMaxLanes, as
    //      attention_work_floats in attention_dispatch.cpp) ----
    float* f = w.f;
    float* kt = f;  // [h][d][np]: K_h transposed, keys zero-padded to np
    std::size_t kt_floats = 0;
    for (std::size_t h = 0; h < H1; ++h) kt_floats += std::size_t(in.dk[h]) * np;
    f += seg(kt_floats);
    float* ax = f;  // [c][np]: the axes, zero-padded
    f += seg(C * np);
    float* at = f;  // [h][tq][np]: scores, then probabilities, of the tile's queries
    f += seg(H1 * tq * np);
    const std::size_t tqp = up(tq);  // row stride of the per-row arrays
    float* ent = f;  // [h][tqp]: the tile rows' entropies
    f += seg(H1 * tqp);
    float* rz = f;  // per row of the current head: Z, Σ e y / Z, 1/Z, self, prev, first, then [c][tqp] contexts
    float* rt = rz + tqp;
    float* rinv = rt + tqp;
    float* rself = rinv + tqp;
    float* rprev = rself + tqp;
    float* rfirst = rprev + tqp;
    float* rctx = rfirst + tqp;
    f += seg((6 + C) * tqp);
    for (std::size_t i = 0; i < tqp; ++i) rz[i] = 1.0f;  // lanes past the tile's rows: log 1
    float* ot = f;  // [h][tq][dvp_h]: O_h rows of the tile, lanes past dv zeroed
    std::size_t ot_floats = 0;
    for (std::size_t h = 0; h < H1; ++h) ot_floats += tq * up(in.dv[h]);
    f += seg(ot_floats);
    float* vp = f;  // [h][n][dvp_h]: V_h copied contiguous, lanes past dv zeroed
    double* onorm = w.d;        // [h]: Σ_q ‖O_h[q]‖²
    double* vnorm = w.d + H1;   // [h]: Σ_t ‖V_h[t]‖²
    for (std::size_t h = 0; h < H1; ++h) onorm[h] = vnorm[h] = 0.0;

    // ---- per report: K transposed, V packed, axes padded ----
    {
      // K_h^T in W x W blocks transposed in registers; the edges (keys past the last whole
      // block of W, dims past the last whole W) through a line buffer, one float at a time.
      float* dst = kt;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dk = in.dk[h];
        const float* src = in.qkv + in.k_col[h];
        for (std::size_t k0 = 0; k0 < np; k0 += W) {
          const std::size_t kn = lo(W, n - lo(n, k0));
          std::size_t d = 0;
          if (kn == W)
            for (; d + W <= dk; d += W) transpose_block(src + k0 * ld + d, ld, dst + d * np + k0, np);
          for (; d < dk; ++d) {
            alignas(64) float line[W];
            for (std::size_t i = 0; i < W; ++i) line[i] = i < kn ? src[(k0 + i) * ld + d] : 0.0f;
            B::load_aligned(line).store_aligned(dst + d * np + k0);
          }
        }
        dst += dk * np;
      }
      for (std::size_t c = 0; c < C; ++c) {
        for (std::size_t k = 0; k < n; ++k) ax[c * np + k] = in.axis[c][k];
        for (std::size_t k = n; k < np; ++k) ax[c * np + k] = 0.0f;
      }
      // V_h rows contiguous: A·V then streams them in order instead of one page per key.
      float* v = vp;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dv = in.dv[h], dvp = up(dv);
        for (std::size_t k = 0; k < n; ++k) {
          const float* row = in.qkv + k * ld + in.v_col[h];
          float* o = v + k * dvp;
          std::size_t d = 0;
          for (; d + W <= dv; d += W) B::load_unaligned(row + d).store_aligned(o + d);
          for (; d < dv; ++d) o[d] = row[d];
          for (; d < dvp; ++d) o[d] = 0.0f;
        }
        v += seg(n * dvp);
      }
    }
    auto v_rows = [&](std::size_t h) -> const float* {
      const float* v = vp;
      for (std::size_t g = 0; g < h; ++g) v += seg(n * up(in.dv[g]));
      return v;
    };

    // ---- query tiles ----
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (std::size_t t0 = 0; t0 < nq; t0 += tq) {
      const std::size_t rows = lo(tq, nq - t0);
      const std::size_t qb = q_first + t0;  // query token of tile row 0
      const float* ktp = kt;
      float* op = ot;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dk = in.dk[h], dv = in.dv[h], dvp = up(dv);
        float* a = at + h * tq * np;
        const float scale = 1.0f / __builtin_sqrtf(float(dk));
        const float* v = v_rows(h);
        for (std::size_t rb = 0; rb < rows; rb += MR) {
          const std::size_t R = lo(MR, rows - rb);
          // Keys this block needs: all, or up to its last query (causal).
          const std::size_t klen = causal ? qb + rb + R : n;
          const std::size_t kend = up(klen);
          scores(R, in.qkv + (qb + rb) * ld + in.q_col[h], ld, ktp, np, dk, a + rb * np, kend);
          for (std::size_t r = rb; r < rb + R; ++r) {
            const std::size_t q = qb + r;
            const std::size_t len = causal ? q + 1 : n, lv = up(len);
            float* s = a + r * np;
            for (std::size_t k = len; k < lv; ++k) s[k] = neg_inf;
            float* cx = rctx + r;
            switch (C) {
              case 0: softmax_row<0>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
              case 1: softmax_row<1>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
              case 2: softmax_row<2>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
              case 3: softmax_row<3>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
              case 4: softmax_row<4>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
              default: softmax_row<kAnyC>(s, lv, scale, ax, np, C, cx, tqp, rz[r], rt[r]); break;
            }
            for (std::size_t k = lv; k < kend; ++k) s[k] = 0.0f;  // A·V of the block reads up to klen
            rinv[r] = 1.0f / rz[r];  // the max element is e^0 = 1: the confidence
            rself[r] = s[q];
            rprev[r] = q ? s[q - 1] : 0.0f;
            rfirst[r] = s[0];
            if (out.maps) {
              float* m = out.maps + (h * nq + t0 + r) * n;
              for (std::size_t k = 0; k < len; ++k) m[k] = s[k];
              for (std::size_t k = len; k < n; ++k) m[k] = 0.0f;
            }
          }
          if (!dvp) continue;  // a head without values (AttentionPlan's baseline): its map only
          float* o = op + rb * dvp;
          av(R, a + rb * np, np, v, dvp, klen, o, dvp);
          for (std::size_t r = 0; r < R; ++r) onorm[h] += dot(o + r * dvp, o + r * dvp, dvp);
        }
        // The tile's entropies (one vector log for W rows), then its rows' stats summed in f64.
        for (std::size_t r0 = 0; r0 < rows; r0 += W)
          (log_pos(B::load_aligned(rz + r0)) - B::load_aligned(rt + r0)).store_aligned(ent + h * tqp + r0);
        {
          double e = 0, cf = 0, sf = 0, pv = 0, fs = 0;
          for (std::size_t r = 0; r < rows; ++r) {
            e += ent[h * tqp + r];
            cf += rinv[r], sf += rself[r], pv += rprev[r], fs += rfirst[r];
          }
          double* hs = out.head_stats + h * kHeadStats * S;
          hs[kEntropy * S] += e;
          hs[kConfidence * S] += cf;
          hs[kSelfWeight * S] += sf;
          hs[kPrevWeight * S] += pv;
          hs[kFirstWeight * S] += fs;
          for (std::size_t c = 0; c < C; ++c) {
            double x = 0;
            for (std::size_t r = 0; r < rows; ++r) x += rctx[c * tqp + r];
            out.context[(h * C + c) * S] += x;
          }
        }
        if (out.head_out) {
          float* dst = out.head_out;
          for (std::size_t g = 0; g < h; ++g) dst += nq * in.dv[g];
          for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t d = 0; d < dv; ++d) dst[(t0 + r) * dv + d] = op[r * dvp + d];
        }
        ktp += dk * np;
        op += tq * dvp;
      }
      // ---- pairs of heads 1..H over the tile's rows ----
      // Pair outer, rows inner: JS, overlap and output dot products are sums over the rows, so
      // they stay vectors across the tile (f32, at most 32 rows) and take one horizontal sum per
      // pair per tile, not per row (4 per pair and row were ~9 % of a 64-token report); only
      // the output distance (a square root per row) sums each row across its lanes.
      if (P) {
        const std::size_t dvp = up(in.dv[1]);
        const float* o1 = ot + tq * up(in.dv[0]);  // O_1; heads 1..H have equal d_v
        const B tiny(std::numeric_limits<float>::min());
        std::size_t p = 0;
        for (std::size_t i = 1; i < H1; ++i)
          for (std::size_t j = i + 1; j < H1; ++j, ++p) {
            B js(0.0f), ov(0.0f), od(0.0f);
            double dist = 0, ents = 0;
            for (std::size_t r = 0; r < rows; ++r) {
              const std::size_t lv = up(causal ? qb + r + 1 : n);
              const float* ai = at + (i * tq + r) * np;
              const float* aj = at + (j * tq + r) * np;
              // H(M) = -Σ m log m, m = s/2, s = p + q: = (ln2 Σ s - Σ s log s) / 2 = ln2 - Σ s log s / 2
              // (Σ s = 2 up to the rounding of the probabilities, ~n·u: within the tolerance).
              for (std::size_t k = 0; k < lv; k += W) {
                const B x = B::load_aligned(ai + k), y = B::load_aligned(aj + k);
                const B sk = x + y;
                js = fmadd(sk, log_pos(xsimd::max(sk, tiny)), js);
                ov = fmadd(x, y, ov);
              }
              const float* oi = o1 + ((i - 1) * tq + r) * dvp;
              const float* oj = o1 + ((j - 1) * tq + r) * dvp;
              B dd(0.0f);
              for (std::size_t d = 0; d < dvp; d += W) {
                const B x = B::load_aligned(oi + d), y = B::load_aligned(oj + d);
                od = fmadd(x, y, od);
                dd = fmadd(x - y, x - y, dd);
              }
              dist += __builtin_sqrtf(xsimd::hadd(dd));
              ents += double(ent[i * tqp + r]) + double(ent[j * tqp + r]);
            }
            double* ps = out.pair_stats + p * kPairStats * S;
            ps[kJensenShannon * S] += double(rows) * 0.693147182 - 0.5 * double(xsimd::hadd(js)) - 0.5 * ents;
            ps[kPositionOverlap * S] += xsimd::hadd(ov);
            ps[kOutputCosine * S] += xsimd::hadd(od);
            ps[kOutputDistance * S] += dist;
          }
      }
    }

    // ---- value subspaces (over the report's tokens) and the means over queries ----
    const double inv = 1.0 / double(nq);
    for (std::size_t h = 0; h < H1; ++h) {
      for (std::size_t c = 0; c < C; ++c) out.context[(h * C + c) * S] *= inv;
      for (std::size_t s = 0; s < kHeadStats; ++s) out.head_stats[(h * kHeadStats + s) * S] *= inv;
    }
    if (!P) return;
    // Σ over all tokens and dims in f32 vectors, one horizontal sum: n·d_v terms, ~n·d_v·u relative.
    const std::size_t dvp = up(in.dv[1]), len = n * dvp;
    for (std::size_t h = 1; h < H1; ++h) vnorm[h] = dot(v_rows(h), v_rows(h), len);
    std::size_t p = 0;
    for (std::size_t i = 1; i < H1; ++i)
      for (std::size_t j = i + 1; j < H1; ++j, ++p) {
        const double vdot = dot(v_rows(i), v_rows(j), len);
        double* ps = out.pair_stats + p * kPairStats * S;
        const double vden = __builtin_sqrt(vnorm[i] * vnorm[j]);
        const double oden = __builtin_sqrt(onorm[i] * onorm[j]);
        const double js = ps[kJensenShannon * S] * inv;
        ps[kJensenShannon * S] = js > 0.0 ? js : 0.0;
        ps[kPositionOverlap * S] *= inv;
        ps[kSubspaceCosine * S] = vden > 0.0 ? vdot / vden : 0.0;
        ps[kOutputCosine * S] = oden > 0.0 ? ps[kOutputCosine * S] / oden : 0.0;
        ps[kOutputDistance * S] *= inv;
      }
  }

  // ---- small reports, one per lane ------------------------------------------------------
  // A report of a handful of tokens fills a fraction of one vector, and run()'s per-report setup
  // (transposes, padded rows, horizontal sums) costs more than its arithmetic: 73% of a 3-token
  // run was that overhead. Here W reports of equal n go through at once, lane l = report l, every
  // quantity a vector over the reports: no padding, no horizontal sum, no transpose. A lane's
  // arithmetic never depends on the other lanes (lanes past `count` repeat report 0 and are
  // dropped), so a report gets the same bits alone (attention_report) or in any group.
  static void small(const AttentionReport* const* in, const AttentionReportOut* const* out, std::size_t count,
                    float* f) noexcept {
    const FlushDenormals ftz;
    const AttentionReport& r0 = *in[0];
    const std::size_t n = r0.n, H1 = std::size_t(r0.heads) + 1, C = r0.axes;
    const std::size_t P = r0.heads ? std::size_t(r0.heads) * (r0.heads - 1) / 2 : 0;
    constexpr std::size_t HS = kHeadStats;
    std::size_t q_first = 0;
    const std::size_t nq = attention_query_rows(r0, &q_first);  // >= 1: attention_small wants n >= 1
    const bool causal = r0.config.mask == MaskKind::causal;

    // Element offsets (each element is W floats: one per lane), as attention_small_floats sums them.
    std::size_t qo[kAttnSmallHeads], ko[kAttnSmallHeads], vo[kAttnSmallHeads], oo[kAttnSmallHeads];
    std::size_t e = 0;
    for (std::size_t h = 0; h < H1; ++h) {
      qo[h] = e, e += n * r0.dk[h];
      ko[h] = e, e += n * r0.dk[h];
      vo[h] = e, e += n * r0.dv[h];
    }
    const std::size_t axo = e;  // [c][k]
    e += C * n;
    const std::size_t po = e;  // [h][k]: the current query's probabilities
    e += H1 * n;
    for (std::size_t h = 0; h < H1; ++h) oo[h] = e, e += r0.dv[h];  // [h][d]: the current query's O_h
    const std::size_t ento = e;  // [h]: the current query's entropies
    e += H1;
    const std::size_t hso = e;  // [h][HS + C + 1]: sums over queries of the stats, contexts, |O|^2
    const std::size_t hsw = HS + C + 1;
    e += H1 * hsw;
    const std::size_t pso = e;  // [p][kPairStats]: sums over queries (subspace slot: V_i·V_j)
    e += P * kPairStats;
    const std::size_t vno = e;  // [h]: Σ |V_h|^2
    e += H1;
    auto at = [f](std::size_t i) { return f + i * W; };
    auto ld = [&](std::size_t i) { return B::load_aligned(at(i)); };
    auto st = [&](std::size_t i, B v) { v.store_aligned(at(i)); };

    // Gather Q, K, V and the axes lane by lane (scalar: a few dozen values per report), through
    // a list of each element's offset in a report's qkv rows, made once for all lanes.
    std::uint32_t src[kAttnSmallFloats];
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dk = r0.dk[h], dv = r0.dv[h], row = t * r0.ld;
        for (std::size_t d = 0; d < dk; ++d) src[qo[h] + t * dk + d] = std::uint32_t(row + r0.q_col[h] + d);
        for (std::size_t d = 0; d < dk; ++d) src[ko[h] + t * dk + d] = std::uint32_t(row + r0.k_col[h] + d);
        for (std::size_t d = 0; d < dv; ++d) src[vo[h] + t * dv + d] = std::uint32_t(row + r0.v_col[h] + d);
      }
    for (std::size_t l = 0; l < W; ++l) {
      const AttentionReport& r = *in[l < count ? l : 0];
      const float* qkv = r.qkv;
      for (std::size_t i = 0; i < axo; ++i) f[i * W + l] = qkv[src[i]];
      for (std::size_t c = 0; c < C; ++c)
        for (std::size_t t = 0; t < n; ++t) f[(axo + c * n + t) * W + l] = r.axis[c][t];
    }
    for (std::size_t i = hso; i < vno + H1; ++i) st(i, B(0.0f));

    const B ymin(-88.0f), one(1.0f), tiny(std::numeric_limits<float>::min());
    B s[kAttnSmallN];
    for (std::size_t iq = 0; iq < nq; ++iq) {
      const std::size_t q = q_first + iq, len = causal ? q + 1 : n;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dk = r0.dk[h], dv = r0.dv[h];
        // Scores in d order from 0 (run()'s order), the max over keys, exp(scale (s - max)).
        B mx(-std::numeric_limits<float>::infinity());
        for (std::size_t k = 0; k < len; ++k) {
          B acc(0.0f);
          for (std::size_t d = 0; d < dk; ++d) acc = fmadd(ld(qo[h] + q * dk + d), ld(ko[h] + k * dk + d), acc);
          s[k] = acc;
          mx = xsimd::max(mx, acc);
        }
        const B sc(1.0f / __builtin_sqrtf(float(dk))), msc = -(mx * sc);
        B z(0.0f), ty(0.0f);
        for (std::size_t k = 0; k < len; ++k) {
          const B y = xsimd::max(fmadd(s[k], sc, msc), ymin);
          const B ek = exp_neg(y);
          s[k] = ek;
          z += ek;
          ty = fmadd(ek, y, ty);
        }
        const B inv = one / z;
        const B ent = log_pos(z) - ty * inv;  // -Σ p log p = log Z - Σ e y / Z
        st(ento + h, ent);
        for (std::size_t k = 0; k < len; ++k) st(po + h * n + k, s[k] * inv);
        for (std::size_t k = len; k < n; ++k) st(po + h * n + k, B(0.0f));
        const std::size_t hs = hso + h * hsw;
        st(hs + kEntropy, ld(hs + kEntropy) + ent);
        st(hs + kConfidence, ld(hs + kConfidence) + inv);  // the max element is e^0 = 1
        st(hs + kSelfWeight, ld(hs + kSelfWeight) + ld(po + h * n + q));
        if (q) st(hs + kPrevWeight, ld(hs + kPrevWeight) + ld(po + h * n + q - 1));
        st(hs + kFirstWeight, ld(hs + kFirstWeight) + ld(po + h * n));
        for (std::size_t c = 0; c < C; ++c) {
          B x(0.0f);
          for (std::size_t k = 0; k < len; ++k) x = fmadd(ld(po + h * n + k), ld(axo + c * n + k), x);
          st(hs + HS + c, ld(hs + HS + c) + x);
        }
        B on(0.0f);
        for (std::size_t d = 0; d < dv; ++d) {
          B o(0.0f);
          for (std::size_t k = 0; k < len; ++k) o = fmadd(ld(po + h * n + k), ld(vo[h] + k * dv + d), o);
          st(oo[h] + d, o);
          on = fmadd(o, o, on);
        }
        st(hs + HS + C, ld(hs + HS + C) + on);
        // Optional outputs, lane by lane: the probabilities (maps) and O_h (head_out).
        for (std::size_t l = 0; l < count; ++l) {
          const AttentionReportOut& o = *out[l];
          if (o.maps)
            for (std::size_t k = 0; k < n; ++k) o.maps[(h * nq + iq) * n + k] = f[(po + h * n + k) * W + l];
          if (o.head_out) {
            std::size_t off = 0;
            for (std::size_t g = 0; g < h; ++g) off += nq * r0.dv[g];
            for (std::size_t d = 0; d < dv; ++d) o.head_out[off + iq * dv + d] = f[(oo[h] + d) * W + l];
          }
        }
      }
      // Pairs of heads 1..H at this query (as run(): H(M) = ln2 - Σ s log s / 2, s = p_i + p_j).
      std::size_t p = 0;
      for (std::size_t i = 1; i < H1; ++i)
        for (std::size_t j = i + 1; j < H1; ++j, ++p) {
          B js(0.0f), ov(0.0f);
          for (std::size_t k = 0; k < len; ++k) {
            const B x = ld(po + i * n + k), y = ld(po + j * n + k), sk = x + y;
            js = fmadd(sk, log_pos(xsimd::max(sk, tiny)), js);
            ov = fmadd(x, y, ov);
          }
          const B hm = B(0.693147182f) - B(0.5f) * js;
          B od(0.0f), dd(0.0f);
          for (std::size_t d = 0; d < r0.dv[i]; ++d) {
            const B x = ld(oo[i] + d), y = ld(oo[j] + d);
            od = fmadd(x, y, od);
            dd = fmadd(x - y, x - y, dd);
          }
          const std::size_t ps = pso + p * kPairStats;
          st(ps + kJensenShannon, ld(ps + kJensenShannon) + (hm - B(0.5f) * (ld(ento + i) + ld(ento + j))));
          st(ps + kPositionOverlap, ld(ps + kPositionOverlap) + ov);
          st(ps + kOutputCosine, ld(ps + kOutputCosine) + od);
          st(ps + kOutputDistance, ld(ps + kOutputDistance) + xsimd::sqrt(dd));
        }
    }

    // Value subspaces over the report's tokens.
    if (P) {
      const std::size_t len = n * r0.dv[1];
      for (std::size_t h = 1; h < H1; ++h) {
        B v(0.0f);
        for (std::size_t i = 0; i < len; ++i) v = fmadd(ld(vo[h] + i), ld(vo[h] + i), v);
        st(vno + h, v);
      }
      std::size_t p = 0;
      for (std::size_t i = 1; i < H1; ++i)
        for (std::size_t j = i + 1; j < H1; ++j, ++p) {
          B v(0.0f);
          for (std::size_t t = 0; t < len; ++t) v = fmadd(ld(vo[i] + t), ld(vo[j] + t), v);
          st(pso + p * kPairStats + kSubspaceCosine, v);
        }
    }

    // Means over queries, in f64: each sum's W lanes widened at once, the same operations as one
    // lane at a time (IEEE f64 mul, div, sqrt), so the bits do not change. Reports of one n that sit
    // side by side in the batch (every full group of a fixed-n batch) take whole vector stores:
    // lane by lane, the ~30 strided f64 stores per report were a third of this kernel.
    bool side_by_side = count == W;
    const AttentionReportOut& o0 = *out[0];
    for (std::size_t l = 1; l < count && side_by_side; ++l) {
      const AttentionReportOut& o = *out[l];
      side_by_side = o.stride == o0.stride && o.context == o0.context + l && o.head_stats == o0.head_stats + l &&
                     (!P || o.pair_stats == o0.pair_stats + l);
    }
    const BD vinvq(1.0 / double(nq));
    // Row `row` (in units of the lanes' stride) of the output array `field` points into.
    auto put = [&](double* AttentionReportOut::*field, std::size_t row, Wide v) {
      if (side_by_side) {
        double* d = o0.*field + row * o0.stride;
        v.lo.store_unaligned(d);
        v.hi.store_unaligned(d + W / 2);
        return;
      }
      alignas(64) double t[W];
      v.lo.store_aligned(t);
      v.hi.store_aligned(t + W / 2);
      for (std::size_t l = 0; l < count; ++l) (out[l]->*field)[row * out[l]->stride] = t[l];
    };
    for (std::size_t h = 0; h < H1; ++h) {
      const std::size_t hs = hso + h * hsw;
      for (std::size_t c = 0; c < C; ++c) put(&AttentionReportOut::context, h * C + c, widen(ld(hs + HS + c)) * vinvq);
      for (std::size_t s2 = 0; s2 < HS; ++s2) put(&AttentionReportOut::head_stats, h * HS + s2, widen(ld(hs + s2)) * vinvq);
    }
    std::size_t p = 0;
    for (std::size_t i = 1; i < H1; ++i)
      for (std::size_t j = i + 1; j < H1; ++j, ++p) {
        const std::size_t ps = pso + p * kPairStats, row = p * kPairStats;
        const Wide js = widen(ld(ps + kJensenShannon)) * vinvq;
        const Wide vden = sqrt(widen(ld(vno + i)) * widen(ld(vno + j)));
        const Wide oden = sqrt(widen(ld(hso + i * hsw + HS + C)) * widen(ld(hso + j * hsw + HS + C)));
        auto pair = &AttentionReportOut::pair_stats;
        put(pair, row + kJensenShannon, positive_or_zero(js, js));
        put(pair, row + kPositionOverlap, widen(ld(ps + kPositionOverlap)) * vinvq);
        put(pair, row + kSubspaceCosine, positive_or_zero(vden, widen(ld(ps + kSubspaceCosine)) / vden));
        put(pair, row + kOutputCosine, positive_or_zero(oden, widen(ld(ps + kOutputCosine)) / oden));
        put(pair, row + kOutputDistance, widen(ld(ps + kOutputDistance)) * vinvq);
      }
  }

  // ---- f64 lanes for small()'s results -----------------------------------------------------
  using BD = xsimd::batch<double, A>;
  static_assert(BD::size * 2 == W);
  /// W lanes as doubles: lanes [0, W/2) and [W/2, W).
  struct Wide {
    BD lo, hi;
    Wide operator*(const Wide& o) const noexcept { return {lo * o.lo, hi * o.hi}; }
    Wide operator*(const BD& o) const noexcept { return {lo * o, hi * o}; }
    Wide operator/(const Wide& o) const noexcept { return {lo / o.lo, hi / o.hi}; }
  };
  static Wide sqrt(const Wide& x) noexcept { return {xsimd::sqrt(x.lo), xsimd::sqrt(x.hi)}; }
  /// Lane by lane `test > 0 ? v : 0.0` (0 for a NaN test, as the scalar form).
  static Wide positive_or_zero(const Wide& test, const Wide& v) noexcept {
    const BD z(0.0);
    return {xsimd::select(test.lo > z, v.lo, z), xsimd::select(test.hi > z, v.hi, z)};
  }
  static Wide widen(B v) noexcept {
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      const __m512 x = v;
      return {BD(_mm512_cvtps_pd(_mm512_castps512_ps256(x))),
              BD(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))))};
    } else if constexpr (std::is_base_of_v<xsimd::avx, A>) {
      const __m256 x = v;
      return {BD(_mm256_cvtps_pd(_mm256_castps256_ps128(x))), BD(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)))};
    } else {
      const __m128 x = v;
      return {BD(_mm_cvtps_pd(x)), BD(_mm_cvtps_pd(_mm_movehl_ps(x, x)))};
    }
  }

  // ---- projections: C = bias + X·B, B packed in kPanel-column panels ----------------------
  // Micro-kernel: GMR rows x GV vectors of one panel; per k one broadcast of X[m][k] feeds GV
  // FMAs (24 accumulators on AVX-512, 12 on AVX2/SSE2). Panel outer, rows inner: the panel
  // (K x 48 floats) stays in L1/L2 while the group's rows stream past it.
  // Software prefetch of the next panel into L2 (prefetcht1), spread over the current panel's row
  // tiles (each tile's first iterations, one line each): a model's weights (7 MB a MiniLM layer)
  // come from L3/DRAM once per group of rows, and for one 64-token report the first row tile of
  // each panel waited on them (16 B/cycle wanted, more than one core gets from L3). Spread over
  // 8 tiles the demand is an eighth and overlaps the FMAs: one 64-token report through MiniLM
  // went from 3.7 k to 4.9 k tokens/s on one thread (AVX-512 Xeon; 56 % -> ~70 % of peak). The
  // last panel prefetches the caller's next matrix's first panel (project_rows' `next`), and
  // pack_panels puts large matrices on 2 MiB pages: 5.2 k -> 5.6 k more.
  static constexpr std::size_t GV = 3;
  static constexpr std::size_t GMR = W >= 16 ? 8 : 4;
  static_assert(kPanel % (GV * W) == 0);

  /// gelu_ref (kernels/gelu.hpp) on a vector, with this level's FMA: the FFN product's epilogue.
  static B gelu(B in) noexcept {
    const B x = xsimd::min(xsimd::max(in * B(0.70710678118654752f), B(-4.0f)), B(4.0f)), x2 = x * x;
    B p = fmadd(x2, B(kGeluP[0]), B(kGeluP[1]));
    for (int i = 2; i < 7; ++i) p = fmadd(x2, p, B(kGeluP[i]));
    B q = fmadd(x2, B(kGeluQ[0]), B(kGeluQ[1]));
    for (int i = 2; i < 5; ++i) q = fmadd(x2, q, B(kGeluQ[i]));
    return B(0.5f) * in * (B(1.0f) + x * p / q);
  }

  template <bool G, std::size_t R>
  static void gemm_tile(const float* x, std::size_t ldx, std::size_t K, const float* bp, const float* bias, float* c,
                        std::size_t ldc, const char* pf, const char* pf_end) noexcept {
    B acc[R][GV];
    for (std::size_t j = 0; j < GV; ++j) {
      const B b = B::load_aligned(bias + j * W);
      for (std::size_t r = 0; r < R; ++r) acc[r][j] = b;
    }
    // The first iterations also prefetch this tile's share of the next panel, one line each.
    const std::size_t lines = static_cast<std::size_t>(pf_end - pf) / 64, kp = lines < K ? lines : K;
    for (std::size_t i = K; i < lines; ++i) _mm_prefetch(pf + i * 64, _MM_HINT_T1);  // surplus (few rows): now
    for (std::size_t k = 0; k < K; ++k, bp += kPanel) {
      if (k < kp) _mm_prefetch(pf + k * 64, _MM_HINT_T1);
      B b[GV];
      for (std::size_t j = 0; j < GV; ++j) b[j] = B::load_aligned(bp + j * W);
      for (std::size_t r = 0; r < R; ++r) {
        const B a(x[r * ldx + k]);
        for (std::size_t j = 0; j < GV; ++j) acc[r][j] = fmadd(a, b[j], acc[r][j]);
      }
    }
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < GV; ++j) acc[r][j].store_unaligned(c + r * ldc + j * W);
    if constexpr (G) gelu_tile(c, ldc, R);
  }

  /// GELU on a tile just stored (in L1), out of line: inlined into gemm_tile (on the accumulators
  /// or on the stored tile), its constants took registers from the k loop's accumulators, which
  /// GCC then kept in memory (the whole FFN product 35 % slower).
  [[gnu::noinline]] static void gelu_tile(float* c, std::size_t ldc, std::size_t rows) noexcept {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < GV; ++j) gelu(B::load_unaligned(c + r * ldc + j * W)).store_unaligned(c + r * ldc + j * W);
  }

  template <bool G, std::size_t R = GMR>
  static void gemm_rows(std::size_t rows, const float* x, std::size_t ldx, std::size_t K, const float* bp,
                        const float* bias, float* c, std::size_t ldc, const char* pf, const char* pf_end) noexcept {
    if constexpr (R > 1)
      if (rows < R) return gemm_rows<G, R - 1>(rows, x, ldx, K, bp, bias, c, ldc, pf, pf_end);
    gemm_tile<G, R>(x, ldx, K, bp, bias, c, ldc, pf, pf_end);
  }

  static void project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                      const float* pbias, std::size_t N, float* c, std::size_t ldc, const float* next_matrix,
                      std::size_t next_k, bool gelu_out) noexcept {
    if (gelu_out) return project_t<true>(x, ldx, M, K, packed, pbias, N, c, ldc, next_matrix, next_k);
    project_t<false>(x, ldx, M, K, packed, pbias, N, c, ldc, next_matrix, next_k);
  }

  /// dst[0, n) = src[0, n), n < SW, src 64-byte aligned: whole vectors, then one masked store. (A
  /// plain loop of n floats became an inlined `rep movsq`, whose start-up cost per row was 2/3 of
  /// the projections at d_model = 2, where every row is such a tail.)
  static void store_cols(float* dst, const float* src, std::size_t n) noexcept {
    std::size_t j = 0;
    for (; j + W <= n; j += W) B::load_aligned(src + j).store_unaligned(dst + j);
    const std::size_t rest = n - j;
    if (rest == 0) return;
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      _mm512_mask_storeu_ps(dst + j, static_cast<__mmask16>((1u << rest) - 1), B::load_aligned(src + j));
    } else if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)), lane);
      _mm256_maskstore_ps(dst + j, mask, B::load_aligned(src + j));
    } else {
      for (std::size_t k = 0; k < rest; ++k) dst[j + k] = src[j + k];
    }
  }

  template <bool G>
  static void project_t(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                        const float* pbias, std::size_t N, float* c, std::size_t ldc, const float* next_matrix,
                        std::size_t next_k) noexcept {
    if (M == 0 || N == 0) return;
    const FlushDenormals ftz;
    constexpr std::size_t SW = GV * W;  // columns of one micro-kernel
    alignas(64) float tmp[GMR * SW];
    const std::size_t panels = (N + kPanel - 1) / kPanel;
    const std::size_t tiles = (M + GMR - 1) / GMR * (kPanel / SW);
    for (std::size_t p = 0; p < panels; ++p) {
      const float* bp = packed + p * K * kPanel;
      // The panel after this one, or after the last one the next matrix's first panel (if any).
      const char* next = reinterpret_cast<const char*>(p + 1 < panels ? bp + K * kPanel : next_matrix);
      const std::size_t lines = (p + 1 < panels ? K : next_k) * kPanel * sizeof(float) / 64;
      const std::size_t per_tile = (lines + tiles - 1) / tiles;
      std::size_t tile = 0;
      for (std::size_t c0 = 0; c0 < kPanel && p * kPanel + c0 < N; c0 += SW) {
        const std::size_t col = p * kPanel + c0, cols = lo(SW, N - col);
        for (std::size_t m0 = 0; m0 < M; m0 += GMR, ++tile) {
          const std::size_t R = lo(GMR, M - m0);
          const char* pf = next ? next + lo(lines, tile * per_tile) * 64 : nullptr;
          const char* pf_end = next ? next + lo(lines, (tile + 1) * per_tile) * 64 : nullptr;
          if (cols == SW) {
            gemm_rows<G>(R, x + m0 * ldx, ldx, K, bp + c0, pbias + col, c + m0 * ldc + col, ldc, pf, pf_end);
          } else {  // the last columns: through a stack tile, so nothing past column N is written
            gemm_rows<G>(R, x + m0 * ldx, ldx, K, bp + c0, pbias + col, tmp, SW, pf, pf_end);
            for (std::size_t r = 0; r < R; ++r) store_cols(c + (m0 + r) * ldc + col, tmp + r * SW, cols);
          }
        }
      }
    }
  }

  static constexpr std::size_t kChains = W >= 16 ? 16 : 12;

  static float fma_chains(std::size_t rounds, float x) noexcept {
    B acc[kChains];
    for (std::size_t i = 0; i < kChains; ++i) acc[i] = B(x + float(i) * 1e-3f);
    const B m(0.9999999f), c(1e-7f);
    for (std::size_t r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < kChains; ++i) acc[i] = fmadd(acc[i], m, c);
    B s(0.0f);
    for (std::size_t i = 0; i < kChains; ++i) s += acc[i];
    return xsimd::hadd(s);
  }
};

}  // namespace attn_detail

template <class Arch>
void attention_kernel<Arch>::operator()(const AttentionReport& in, const AttentionReportOut& out,
                                         const AttentionWork& w) const {
  attn_detail::AK<Arch>::run(in, out, w);
}
template <class Arch>
void attention_kernel<Arch>::small(const AttentionReport* const* in, const AttentionReportOut* const* out,
                                   std::size_t count, float* f) const {
  attn_detail::AK<Arch>::small(in, out, count, f);
}
template <class Arch>
std::size_t attention_kernel<Arch>::lanes() noexcept {
  return attn_detail::AK<Arch>::W;
}
template <class Arch>
void attention_kernel<Arch>::project(const float* x, std::size_t ldx, std::size_t M, std::size_t K,
                                     const float* packed, const float* packed_bias, std::size_t N, float* c,
                                     std::size_t ldc, const float* next, std::size_t next_k, bool gelu) const {
  attn_detail::AK<Arch>::project(x, ldx, M, K, packed, packed_bias, N, c, ldc, next, next_k, gelu);
}
template <class Arch>
float attention_kernel<Arch>::fma_chains(std::size_t rounds, float x) const {
  return attn_detail::AK<Arch>::fma_chains(rounds, x);
}
template <class Arch>
std::size_t attention_kernel<Arch>::fma_chain_flops() noexcept {
  return attn_detail::AK<Arch>::kChains * attn_detail::AK<Arch>::W * 2;
}

}  // namespace headsep::kernels
