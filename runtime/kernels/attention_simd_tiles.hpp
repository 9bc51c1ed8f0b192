// AK<A>'s register-blocked micro-kernels (scores Q·K^T, A·V), the padded dot product and the
// softmax of one score row: what run() calls per query tile.
#pragma once
#include <cstddef>
#include <limits>

#include "kernels/attention_simd_ak.hpp"

namespace headsep::kernels {
namespace attn_detail {

/// s[r][k0 + v·W ..] = Σ_d q[r][d] K^T[d][k0 + v·W ..] for R query rows and V key vectors
/// (kt: one head's K^T in KP-key panels, k0 a multiple of KP; s: rows np floats apart).
template <class A>
template <std::size_t R, std::size_t V>
inline void AK<A>::score_tile(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk,
                              float* s, std::size_t k0) noexcept {
  B acc[R][V];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = B(0.0f);
  const float* kp = kt + k0 * dk;  // K^T's panel starting at key k0 (a multiple of KP), d = 0
  // No trip-count test before the loop (dk >= 1: the dispatcher refuses d_k = 0): with one,
  // GCC 12 kept the accumulators on the stack around it, 2·R·V extra loads and stores per tile.
  std::size_t d = 0;
  do {
    B b[V];
    for (std::size_t v = 0; v < V; ++v) b[v] = B::load_aligned(kp + v * W);
    for (std::size_t r = 0; r < R; ++r) {
      const B a(q[r * ldq + d]);
      for (std::size_t v = 0; v < V; ++v) acc[r][v] = fmadd(a, b[v], acc[r][v]);
    }
    kp += KP;
  } while (++d < dk);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v].store_aligned(s + r * np + k0 + v * W);
}

template <class A>
template <std::size_t R>
inline void AK<A>::scores_rows(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk,
                               float* s, std::size_t kbeg, std::size_t kend) noexcept {
  std::size_t k0 = kbeg;
  for (; k0 + NV * W <= kend; k0 += NV * W) score_tile<R, NV>(q, ldq, kt, np, dk, s, k0);
  if (k0 < kend) score_tile<R, 1>(q, ldq, kt, np, dk, s, k0);  // kend - k0 < KP: one vector
}

/// Scores of `rows` (<= MR) query rows over keys [kbeg, kend), kbeg a multiple of KP, kend of W.
template <class A>
template <std::size_t R>
inline void AK<A>::scores(std::size_t rows, const float* q, std::size_t ldq, const float* kt, std::size_t np,
                          std::size_t dk, float* s, std::size_t kbeg, std::size_t kend) noexcept {
  if constexpr (R > 1)
    if (rows < R) return scores<R - 1>(rows, q, ldq, kt, np, dk, s, kbeg, kend);
  scores_rows<R>(q, ldq, kt, np, dk, s, kbeg, kend);
}

/// o[r][d0 + j·W ..] = Σ_{k < klen} a[r][k] v[k][d0 + j·W ..] for R rows and V value vectors, klen >= 1.
template <class A>
template <std::size_t R, std::size_t V>
inline void AK<A>::av_tile(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                           std::size_t ldo, std::size_t d0) noexcept {
  B acc[R][V];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < V; ++j) acc[r][j] = B(0.0f);
  const float* vp = v + d0;
  std::size_t k = 0;
  do {  // klen >= 1 (run() has returned on an empty report): no test before the loop, as score_tile
    B b[V];
    for (std::size_t j = 0; j < V; ++j) b[j] = B::load_aligned(vp + j * W);
    for (std::size_t r = 0; r < R; ++r) {
      const B x(a[r * np + k]);
      for (std::size_t j = 0; j < V; ++j) acc[r][j] = fmadd(x, b[j], acc[r][j]);
    }
    vp += ldv;
  } while (++k < klen);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < V; ++j) acc[r][j].store_aligned(o + r * ldo + d0 + j * W);
}

template <class A>
template <std::size_t R>
inline void AK<A>::av_rows(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                           std::size_t dvp) noexcept {
  std::size_t d0 = 0;
  for (; d0 + DV * W <= dvp; d0 += DV * W) av_tile<R, DV>(a, np, v, ldv, klen, o, dvp, d0);
  for (; d0 < dvp; d0 += W) av_tile<R, 1>(a, np, v, ldv, klen, o, dvp, d0);
}

template <class A>
template <std::size_t R>
inline void AK<A>::av(std::size_t rows, const float* a, std::size_t np, const float* v, std::size_t ldv,
                      std::size_t klen, float* o, std::size_t dvp) noexcept {
  if constexpr (R > 1)
    if (rows < R) return av<R - 1>(rows, a, np, v, ldv, klen, o, dvp);
  av_rows<R>(a, np, v, ldv, klen, o, dvp);
}

/// f32 dot product of two zero-padded arrays of `len` floats (len a multiple of W, aligned).
template <class A>
inline float AK<A>::dot(const float* x, const float* y, std::size_t len) noexcept {
  B s0(0.0f), s1(0.0f);
  std::size_t k = 0;
  for (; k + 2 * W <= len; k += 2 * W) {
    s0 = fmadd(B::load_aligned(x + k), B::load_aligned(y + k), s0);
    s1 = fmadd(B::load_aligned(x + k + W), B::load_aligned(y + k + W), s1);
  }
  for (; k < len; k += W) s0 = fmadd(B::load_aligned(x + k), B::load_aligned(y + k), s0);
  return xsimd::hadd(s0 + s1);
}

/// Soft-capping of one row of raw scores, s[0, lv) in whole vectors: s becomes
/// (cap / scale) · tanh(scale · s / cap), so that softmax_row's scale · s is cap · tanh(scale · s / cap).
/// tanh |t| = (1 - e) / (1 + e) with e = e^(-2|t|) = 2^(-2 log2e |t|) from exp2_neg for |t| >= 1/4;
/// below, where 1 - e would cancel, its Taylor series to t^9 (relative error < 1e-8 there). Within
/// a few ulp of std::tanh either way. Not inlined: rows without a cap never see it.
template <class A>
[[gnu::noinline]] void AK<A>::softcap_row(float* s, std::size_t lv, float scale, float cap) noexcept {
  const B in(scale / cap), out(cap / scale), one(1.0f), tmin(kExp2Min);
  for (std::size_t k = 0; k < lv; k += W) {
    const B t = B::load_aligned(s + k) * in, a = xsimd::abs(t), t2 = t * t;
    const B e = exp2_neg(xsimd::max(B(-2.0f * kLog2e) * a, tmin));
    const B th = (one - e) / (one + e);
    B p = fmadd(t2, B(62.0f / 2835.0f), B(-17.0f / 315.0f));
    p = fmadd(p, t2, B(2.0f / 15.0f));
    p = fmadd(p, t2, B(-1.0f / 3.0f));
    p = fmadd(p, t2, one) * t;
    (xsimd::select(a < B(0.25f), p, xsimd::select(t < B(0.0f), -th, th)) * out).store_aligned(s + k);
  }
}

/// The largest of s[0, lv) (whole vectors): a softmax row's max, taken for a block's rows before
/// any of their exp passes, so that no row's exps wait on its own max's reduction.
template <class A>
inline float AK<A>::row_max(const float* s, std::size_t lv) noexcept {
  B mx(-std::numeric_limits<float>::infinity());
  for (std::size_t k = 0; k < lv; k += W) mx = xsimd::max(mx, B::load_aligned(s + k));
  return hmax(mx);
}

/// Softmax of one score row in place, m its max (row_max): s[0, lv) (entries [len, lv) hold -inf)
/// becomes the probabilities. Returns Z and Σ e^y t / Z with t = y·log2 e (the entropy is
/// log Z - ln2 times it: logs are taken for a whole tile at once); ctx[c·ldc] = Σ_k a_k x_c[k]
/// for the axes (CC = C when C <= 4: the axis sums ride along the exp pass in registers, scaled
/// by 1/Z at the end; kAnyC: one dot product per axis after normalising).
template <class A>
template <std::size_t CC>
inline void AK<A>::softmax_row(float* s, std::size_t lv, float scale, float m, const float* ax, std::size_t np,
                               std::size_t C, float* ctx, std::size_t ldc, float& z_out, float& tz_out) noexcept {
  // t = scale·(s - max)·log2 e in one FMA: exp2_neg needs no conversion multiply of its own.
  const float a = scale * kLog2e;
  const B sa(a), msa(-m * a), tmin(kExp2Min);
  B z(0.0f), ty(0.0f);
  B cx[CC < kAnyC && CC > 0 ? CC : 1];
  for (std::size_t c = 0; c < (CC < kAnyC ? CC : 0); ++c) cx[c] = B(0.0f);
  for (std::size_t k = 0; k < lv; k += W) {
    const B t = xsimd::max(fmadd(B::load_aligned(s + k), sa, msa), tmin);  // >= -88·log2 e
    const B e = exp2_neg(t);
    e.store_aligned(s + k);
    z += e;
    ty = fmadd(e, t, ty);
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

}  // namespace attn_detail
}  // namespace headsep::kernels
