// axis-focus: the weights kernel — each row a softmax over a report's tokens of one axis (or of
// the mean of all axes) at one sharpness, for a batch of reports, per SIMD level.
//
// Every weight is computed by the same IEEE operations, in the same order, as the scalar
// definition: z_c(t) = 0 + k1*f1(t) + k2*f2(t) + ...; the baseline's z = (0 + z_1 + ... + z_C) *
// (1/C); w = s*z; m = running max in token order (w > m ? w : m); x = max(w - m, -708) as
// x < -708 ? -708 : x; e = exp_nonpositive(x); sum = 0 + e_1 + e_2 + ... in token order;
// weight = e * (1/sum). No FMA contraction (-ffp-contract=off), so every SIMD level and every
// path below gives bit-identical weights for the same report, whatever batch it is in.
//
// Reports of up to kMaxLane tokens go four at a time through one AVX2 vector, one report per
// lane: the reports of a batch are queued by length as they come, and four reports of the same
// length make a group, so the four lanes run the same straight-line code (no masks, no per-report
// branches, max and sum are vertical, all heads of the design in one pass over the features). At
// the end of a batch a partial group fills its free lanes with copies of its last report (they
// write the same values twice). Longer reports take a per-report path over contiguous tokens.
#include "weights_kernel.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace axis_focus {
namespace {

// The vector helpers are always inlined into the AVX2 and the generic entry points; GCC's note
// that an out-of-line AVX vector argument would change the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
using v4d = double __attribute__((vector_size(32)));
using v4i = std::int64_t __attribute__((vector_size(32)));

constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 0.6931471803691238, kLn2Lo = 1.9082149292705877e-10;

// exp(x) for -708 <= x <= 0 in plain arithmetic: x = k ln2 + r, |r| <= ln2/2, exp(r) by a
// degree-12 Taylor polynomial (relative error < 1e-15), 2^k through the exponent bits. The
// callers clamp x at -708 (weights below ~1e-308 are zero in effect).
[[gnu::always_inline]] inline double exp_nonpositive(double x) noexcept {
  const double t = x * kLog2e + kShift;
  const double k = t - kShift;
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const std::int64_t ki = std::bit_cast<std::int64_t>(t) - std::bit_cast<std::int64_t>(kShift);
  return p * std::bit_cast<double>((ki + 1023) << 52);
}


// 4x4 transpose: rows a0..a3 -> columns (a_j[i] -> out_i[j]).
[[gnu::always_inline]] inline void transpose4(v4d& a0, v4d& a1, v4d& a2, v4d& a3) noexcept {
  const v4i lo = {0, 4, 2, 6}, hi = {1, 5, 3, 7}, first = {0, 1, 4, 5}, second = {2, 3, 6, 7};
  const v4d t0 = __builtin_shuffle(a0, a1, lo), t1 = __builtin_shuffle(a0, a1, hi);
  const v4d t2 = __builtin_shuffle(a2, a3, lo), t3 = __builtin_shuffle(a2, a3, hi);
  a0 = __builtin_shuffle(t0, t2, first);
  a1 = __builtin_shuffle(t1, t3, first);
  a2 = __builtin_shuffle(t0, t2, second);
  a3 = __builtin_shuffle(t1, t3, second);
}
[[gnu::always_inline]] inline v4d load4(const double* p) noexcept {
  v4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store4(double* p, const v4d& v) noexcept { std::memcpy(p, &v, sizeof v); }

// exp4 on K vectors at once, step by step, so that K independent dependency chains interleave
// (one Horner chain alone is ~80 cycles of latency).
template <std::uint32_t K>
[[gnu::always_inline]] inline void exp4_block(v4d* x) noexcept {
  v4d t[K], r[K], p[K];
  for (std::uint32_t j = 0; j < K; ++j) {
    t[j] = x[j] * kLog2e + kShift;
    const v4d k = t[j] - kShift;
    r[j] = (x[j] - k * kLn2Hi) - k * kLn2Lo;
  }
  constexpr double kC[12] = {1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                             1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,    1.0 / 24.0,
                             1.0 / 6.0,        0.5,             1.0,            1.0};
  constexpr double kC12 = 1.0 / 479001600.0;
  for (std::uint32_t j = 0; j < K; ++j) p[j] = r[j] * kC12 + kC[0];
  for (std::uint32_t s = 1; s < 12; ++s)
    for (std::uint32_t j = 0; j < K; ++j) p[j] = p[j] * r[j] + kC[s];
  for (std::uint32_t j = 0; j < K; ++j) {
    const v4i ki = std::bit_cast<v4i>(t[j]) - std::bit_cast<std::int64_t>(kShift);
    const v4i e = (ki + 1023) << 52;
    x[j] = p[j] * std::bit_cast<v4d>(e);
  }
}

// exp4 in place on x[0..n).
[[gnu::always_inline]] inline void exp4_many(v4d* x, std::uint32_t n) noexcept {
  std::uint32_t k = 0;
  for (; k + 4 <= n; k += 4) exp4_block<4>(x + k);
  switch (n - k) {
    case 3: exp4_block<3>(x + k); break;
    case 2: exp4_block<2>(x + k); break;
    case 1: exp4_block<1>(x + k); break;
    default: break;
  }
}

// Four reports of length L (LT when > 0, else L <= kMaxLane), tokens [lo[j], lo[j] + L).
template <std::uint32_t LT>
[[gnu::always_inline]] inline void lanes4(const Ctx& c, const std::uint64_t* lo, std::uint32_t L_) {
  constexpr std::uint32_t kCap = LT ? LT : kMaxLane;
  const std::uint32_t L = LT ? LT : L_;
  const std::uint64_t o0 = lo[0], o1 = lo[1], o2 = lo[2], o3 = lo[3];
  const std::uint32_t C = c.n_axes;
  // z[a][i] = 0 + k1*f1 + k2*f2 + ... term by term (runtime loops outside, tokens inside).
  v4d z[(kMaxAxes + 1) * kCap];
  v4d* const mean = z + C * kCap;
  for (std::uint32_t i = 0; i < L; ++i) mean[i] = v4d{};
  for (std::uint32_t a = 0; a < C; ++a) {
    v4d* const za = z + a * kCap;
    for (std::uint32_t i = 0; i < L; ++i) za[i] = v4d{};
    for (std::uint32_t t = c.term_begin[a]; t < c.term_begin[a + 1]; ++t) {
      const double* const f = c.feat[c.term_slot[t]];
      const double k = c.term_k[t];
      std::uint32_t i = 0;
      for (; i + 4 <= L; i += 4) {  // four tokens of each report: contiguous loads, transposed
        v4d g0 = load4(f + o0 + i), g1 = load4(f + o1 + i), g2 = load4(f + o2 + i), g3 = load4(f + o3 + i);
        transpose4(g0, g1, g2, g3);
        za[i] = za[i] + k * g0;
        za[i + 1] = za[i + 1] + k * g1;
        za[i + 2] = za[i + 2] + k * g2;
        za[i + 3] = za[i + 3] + k * g3;
      }
      for (; i < L; ++i) za[i] = za[i] + k * v4d{f[o0 + i], f[o1 + i], f[o2 + i], f[o3 + i]};
    }
    for (std::uint32_t i = 0; i < L; ++i) mean[i] = mean[i] + za[i];
  }
  for (std::uint32_t i = 0; i < L; ++i) mean[i] = mean[i] * c.inv_axes;
  // x = max(s*z - max_t s*z, -708) for every row, then one exp pass over all rows x tokens.
  const v4d floor = v4d{} - 708.0;
  v4d x[kMaxRows * kCap];
  for (std::uint32_t row = 0; row < c.rows; ++row) {
    const v4d* zr = z + c.src[row] * kCap;
    v4d* xr = x + row * L;
    const double s = c.sharp[row];
    v4d m = xr[0] = s * zr[0];
    for (std::uint32_t i = 1; i < L; ++i) {
      xr[i] = s * zr[i];
      m = xr[i] > m ? xr[i] : m;
    }
    for (std::uint32_t i = 0; i < L; ++i) {
      const v4d d = xr[i] - m;
      xr[i] = d < floor ? floor : d;
    }
  }
  exp4_many(x, c.rows * L);
  for (std::uint32_t row = 0; row < c.rows; ++row) {
    const v4d* xr = x + row * L;
    v4d sum = {};
    for (std::uint32_t i = 0; i < L; ++i) sum = sum + xr[i];
    const v4d inv = 1.0 / sum;
    double* o = c.out[row];
    std::uint32_t i = 0;
    for (; i + 4 <= L; i += 4) {  // transposed back: four tokens of each report per store
      v4d v0 = xr[i] * inv, v1 = xr[i + 1] * inv, v2 = xr[i + 2] * inv, v3 = xr[i + 3] * inv;
      transpose4(v0, v1, v2, v3);
      store4(o + o0 + i, v0);
      store4(o + o1 + i, v1);
      store4(o + o2 + i, v2);
      store4(o + o3 + i, v3);
    }
    for (; i < L; ++i) {
      const v4d v = xr[i] * inv;
      o[o0 + i] = v[0];
      o[o1 + i] = v[1];
      o[o2 + i] = v[2];
      o[o3 + i] = v[3];
    }
  }
}

[[gnu::always_inline]] inline void lanes4_any(const Ctx& c, const std::uint64_t* lo, std::uint32_t L) {
  switch (L) {
    case 1: return lanes4<1>(c, lo, 1);
    case 2: return lanes4<2>(c, lo, 2);
    case 3: return lanes4<3>(c, lo, 3);
    case 4: return lanes4<4>(c, lo, 4);
    case 5: return lanes4<5>(c, lo, 5);
    case 6: return lanes4<6>(c, lo, 6);
    case 7: return lanes4<7>(c, lo, 7);
    case 8: return lanes4<8>(c, lo, 8);
    default: return lanes4<0>(c, lo, L);
  }
}

// One report of any length, tokens [lo, lo + L), over contiguous tokens (z in scratch).
[[gnu::always_inline]] inline void one_report(const Ctx& c, std::uint64_t lo, std::uint64_t L, std::vector<double>& scratch) {
  const std::uint32_t C = c.n_axes;
  if (scratch.size() < (C + 1) * L) scratch.resize((C + 1) * L);
  double* const z = scratch.data();
  double* const mean = z + C * L;
  for (std::uint64_t t = 0; t < L; ++t) mean[t] = 0.0;
  for (std::uint32_t a = 0; a < C; ++a) {
    double* za = z + a * L;
    for (std::uint64_t t = 0; t < L; ++t) za[t] = 0.0;
    for (std::uint32_t k = c.term_begin[a]; k < c.term_begin[a + 1]; ++k) {
      const double* f = c.columns[c.used[c.term_slot[k]]] + lo;
      const double kk = c.term_k[k];
      for (std::uint64_t t = 0; t < L; ++t) za[t] = za[t] + kk * f[t];
    }
    for (std::uint64_t t = 0; t < L; ++t) mean[t] = mean[t] + za[t];
  }
  for (std::uint64_t t = 0; t < L; ++t) mean[t] = mean[t] * c.inv_axes;
  for (std::uint32_t row = 0; row < c.rows; ++row) {
    const double* zr = z + c.src[row] * L;
    const double s = c.sharp[row];
    double* w = c.out[row] + lo;
    for (std::uint64_t t = 0; t < L; ++t) w[t] = s * zr[t];
    double m = w[0];
    for (std::uint64_t t = 1; t < L; ++t) m = w[t] > m ? w[t] : m;
    for (std::uint64_t t = 0; t < L; ++t) {
      const double x = w[t] - m;
      w[t] = exp_nonpositive(x < -708.0 ? -708.0 : x);
    }
    double sum = 0;
    for (std::uint64_t t = 0; t < L; ++t) sum += w[t];
    const double inv = 1.0 / sum;
    for (std::uint64_t t = 0; t < L; ++t) w[t] *= inv;
  }
}

// Reports of up to kMaxLane tokens queued by length, N of one length at a time through Group
// (lanes4_any: 4 per AVX2 or generic vector; lanes8_any: 8 per AVX-512 vector); longer ones, or
// every report with lanes off, one by one.
template <std::uint32_t N, void (*Group)(const Ctx&, const std::uint64_t*, std::uint32_t)>
[[gnu::always_inline]] inline void run_groups(const Ctx& c, const std::uint64_t* off, std::uint64_t R, bool lanes) {
  thread_local std::vector<double> scratch;  // long reports only; grows, never shrinks
  std::uint64_t pend[kMaxLane + 1][N];
  std::uint32_t np[kMaxLane + 1] = {};
  for (std::uint64_t r = 0; r < R; ++r) {
    const std::uint64_t lo = off[r], L = off[r + 1] - lo;
    if (L - 1 >= kMaxLane || !lanes) {  // L == 0 wraps round: nothing to write
      if (L) one_report(c, lo, L, scratch);
      continue;
    }
    std::uint64_t* p = pend[L];
    p[np[L]] = lo;
    if (++np[L] == N) {
      np[L] = 0;
      Group(c, p, static_cast<std::uint32_t>(L));
    }
  }
  for (std::uint32_t L = 1; L <= kMaxLane; ++L) {
    if (!np[L]) continue;
    for (std::uint32_t j = np[L]; j < N; ++j) pend[L][j] = pend[L][np[L] - 1];
    Group(c, pend[L], L);
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// ---- AVX-512: eight reports per vector --------------------------------------------------------
// The same operations in the same order per lane as lanes4 (so the same bits); tokens come in
// with one masked load per (column, report) and a transpose (load8_tokens), and go out the same
// way back (store8_tokens).
using v8d = double __attribute__((vector_size(64)));
using v8i = std::int64_t __attribute__((vector_size(64)));

template <std::uint32_t K>
[[gnu::always_inline, gnu::target("avx512f")]] inline void exp8_block(v8d* x) noexcept {
  v8d t[K], r[K], p[K];
  for (std::uint32_t j = 0; j < K; ++j) {
    t[j] = x[j] * kLog2e + kShift;
    const v8d k = t[j] - kShift;
    r[j] = (x[j] - k * kLn2Hi) - k * kLn2Lo;
  }
  constexpr double kC[12] = {1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                             1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,    1.0 / 24.0,
                             1.0 / 6.0,        0.5,             1.0,            1.0};
  constexpr double kC12 = 1.0 / 479001600.0;
  for (std::uint32_t j = 0; j < K; ++j) p[j] = r[j] * kC12 + kC[0];
  for (std::uint32_t s = 1; s < 12; ++s)
    for (std::uint32_t j = 0; j < K; ++j) p[j] = p[j] * r[j] + kC[s];
  for (std::uint32_t j = 0; j < K; ++j) {
    const v8i ki = std::bit_cast<v8i>(t[j]) - std::bit_cast<std::int64_t>(kShift);
    const v8i e = (ki + 1023) << 52;
    x[j] = p[j] * std::bit_cast<v8d>(e);
  }
}

[[gnu::always_inline, gnu::target("avx512f")]] inline void exp8_many(v8d* x, std::uint32_t n) noexcept {
  std::uint32_t k = 0;
  for (; k + 4 <= n; k += 4) exp8_block<4>(x + k);
  switch (n - k) {
    case 3: exp8_block<3>(x + k); break;
    case 2: exp8_block<2>(x + k); break;
    case 1: exp8_block<1>(x + k); break;
    default: break;
  }
}

// 8 x 8 transpose in registers: r[i] lane j -> r[j] lane i (three rounds of eight shuffles).
[[gnu::always_inline, gnu::target("avx512f")]] inline void transpose8(__m512d* r) noexcept {
  __m512d t[8];
  // t[i] = [a0 b0 a2 b2 ..], t[i+1] = [a1 b1 a3 b3 ..] (the masked forms with a zero source: GCC 12
  // warns on the plain ones' undefined source)
  const __m512d zero = _mm512_setzero_pd();
  for (std::uint32_t i = 0; i < 8; i += 2) {
    t[i] = _mm512_mask_unpacklo_pd(zero, 0xFF, r[i], r[i + 1]);
    t[i + 1] = _mm512_mask_unpackhi_pd(zero, 0xFF, r[i], r[i + 1]);
  }
  const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  const __m512i low = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11), high = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  __m512d q[8];  // q[4g + j]: lanes report[j] and report[j] + 4 of rows 4g..4g+3
  for (std::uint32_t g = 0; g < 2; ++g) {
    const __m512d* u = t + 4 * g;
    q[4 * g] = _mm512_permutex2var_pd(u[0], even, u[2]);
    q[4 * g + 1] = _mm512_permutex2var_pd(u[0], odd, u[2]);
    q[4 * g + 2] = _mm512_permutex2var_pd(u[1], even, u[3]);
    q[4 * g + 3] = _mm512_permutex2var_pd(u[1], odd, u[3]);
  }
  constexpr std::uint32_t report[4] = {0, 2, 1, 3};
  for (std::uint32_t j = 0; j < 4; ++j) {
    r[report[j]] = _mm512_permutex2var_pd(q[j], low, q[4 + j]);
    r[report[j] + 4] = _mm512_permutex2var_pd(q[j], high, q[4 + j]);
  }
}

// Tokens [i0, i0 + m) of eight reports (lo[j]: report j's first token in the column f) into
// x[i0 + i], one report per lane: one masked load per report, whose tokens are contiguous, then a
// transpose (m gathers did the same with 8 m single loads).
[[gnu::always_inline, gnu::target("avx512f")]] inline void load8_tokens(const double* f, const std::uint64_t* lo, std::uint32_t i0,
                                                                       std::uint32_t m, __m512d* x) noexcept {
  const __mmask8 k = static_cast<__mmask8>((1u << m) - 1);
  __m512d r[8];
  for (std::uint32_t j = 0; j < 8; ++j) r[j] = _mm512_maskz_loadu_pd(k, f + lo[j] + i0);
  transpose8(r);
  for (std::uint32_t i = 0; i < m; ++i) x[i] = r[i];
}

// x[i0 + i] * inv for i < m (token i, one report per lane) into each report's tokens: a
// transpose, then one masked store per report (m scatters did the same with 8 m single stores).
[[gnu::always_inline, gnu::target("avx512f")]] inline void store8_tokens(double* o, const std::uint64_t* lo, std::uint32_t i0,
                                                                        std::uint32_t m, const v8d* x, v8d inv) noexcept {
  __m512d r[8];
  for (std::uint32_t i = 0; i < 8; ++i) r[i] = i < m ? (__m512d)(x[i0 + i] * inv) : _mm512_setzero_pd();
  transpose8(r);
  const __mmask8 k = static_cast<__mmask8>((1u << m) - 1);
  for (std::uint32_t j = 0; j < 8; ++j) _mm512_mask_storeu_pd(o + lo[j] + i0, k, r[j]);
}

template <std::uint32_t LT>
[[gnu::always_inline, gnu::target("avx512f")]] inline void lanes8(const Ctx& c, const std::uint64_t* lo, std::uint32_t L_) {
  constexpr std::uint32_t kCap = LT ? LT : kMaxLane;
  const std::uint32_t L = LT ? LT : L_;
  const std::uint32_t C = c.n_axes;
  v8d z[(kMaxAxes + 1) * kCap];
  v8d* const mean = z + C * kCap;
  for (std::uint32_t i = 0; i < L; ++i) mean[i] = v8d{};
  for (std::uint32_t a = 0; a < C; ++a) {
    v8d* const za = z + a * kCap;
    for (std::uint32_t i = 0; i < L; ++i) za[i] = v8d{};
    for (std::uint32_t t = c.term_begin[a]; t < c.term_begin[a + 1]; ++t) {
      const double* const f = c.feat[c.term_slot[t]];
      const double k = c.term_k[t];
      for (std::uint32_t i0 = 0; i0 < L; i0 += 8) {
        const std::uint32_t m = L - i0 < 8 ? L - i0 : 8;
        __m512d g[8];
        load8_tokens(f, lo, i0, m, g);
        for (std::uint32_t i = 0; i < m; ++i) za[i0 + i] = za[i0 + i] + k * (v8d)g[i];
      }
    }
    for (std::uint32_t i = 0; i < L; ++i) mean[i] = mean[i] + za[i];
  }
  for (std::uint32_t i = 0; i < L; ++i) mean[i] = mean[i] * c.inv_axes;
  const v8d floor = v8d{} - 708.0;
  v8d x[kMaxRows * kCap];
  for (std::uint32_t row = 0; row < c.rows; ++row) {
    const v8d* zr = z + c.src[row] * kCap;
    v8d* xr = x + row * L;
    const double s = c.sharp[row];
    v8d m = xr[0] = s * zr[0];
    for (std::uint32_t i = 1; i < L; ++i) {
      xr[i] = s * zr[i];
      m = xr[i] > m ? xr[i] : m;
    }
    for (std::uint32_t i = 0; i < L; ++i) {
      const v8d d = xr[i] - m;
      xr[i] = d < floor ? floor : d;
    }
  }
  exp8_many(x, c.rows * L);
  for (std::uint32_t row = 0; row < c.rows; ++row) {
    const v8d* xr = x + row * L;
    v8d sum = {};
    for (std::uint32_t i = 0; i < L; ++i) sum = sum + xr[i];
    const v8d inv = 1.0 / sum;
    for (std::uint32_t i0 = 0; i0 < L; i0 += 8) store8_tokens(c.out[row], lo, i0, L - i0 < 8 ? L - i0 : 8, xr, inv);
  }
}

// Not always_inline: run_groups, generic code, calls it (one call per eight reports).
[[gnu::target("avx512f")]] void lanes8_any(const Ctx& c, const std::uint64_t* lo, std::uint32_t L) {
  switch (L) {
    case 1: return lanes8<1>(c, lo, 1);
    case 2: return lanes8<2>(c, lo, 2);
    case 3: return lanes8<3>(c, lo, 3);
    case 4: return lanes8<4>(c, lo, 4);
    case 5: return lanes8<5>(c, lo, 5);
    case 6: return lanes8<6>(c, lo, 6);
    case 7: return lanes8<7>(c, lo, 7);
    case 8: return lanes8<8>(c, lo, 8);
    default: return lanes8<0>(c, lo, L);
  }
}

[[gnu::target("avx512f")]] void run_avx512(const Ctx& c, const std::uint64_t* off, std::uint64_t R, bool lanes) {
  run_groups<8, lanes8_any>(c, off, R, lanes);
}

[[gnu::target("avx2")]] void run_avx2(const Ctx& c, const std::uint64_t* off, std::uint64_t R, bool lanes) {
  run_groups<4, lanes4_any>(c, off, R, lanes);
}
#endif
void run_generic(const Ctx& c, const std::uint64_t* off, std::uint64_t R, bool lanes) {
  run_groups<4, lanes4_any>(c, off, R, lanes);
}

}  // namespace

Kernel select_kernel() {
  Kernel run = &run_generic;
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  // HEADSEP_SIMD (as for the engine's kernels) caps the level, so tests can hold every path to
  // the same bits: scalar/sse2 -> the generic code, avx2 -> 4 reports per vector.
  const char* cap = std::getenv("HEADSEP_SIMD");
  const std::string level = cap ? cap : "";
  const bool low = level == "scalar" || level == "sse2";
  if (!low && __builtin_cpu_supports("avx2")) run = &run_avx2;
  if (!low && level != "avx2" && __builtin_cpu_supports("avx512f")) run = &run_avx512;
#endif
  return run;
}

}  // namespace axis_focus
