// Private: the plain scalar reference of the fused attention kernel, the oracle every SIMD level
// is tested against. It follows the definitions in include/headsep/attention.hpp literally, one
// query and one head at a time: f32 per row (scores, softmax, entropy, A·V, each sum in order),
// f64 for the sums over queries. Nothing here is fused or reordered. Compiled with baseline
// flags only (attention_dispatch.cpp, tests).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"

namespace headsep::kernels {

/// -Σ a log a over a row, with 0 log 0 = 0.
inline float attention_entropy_ref(const float* a, std::size_t n) {
  float e = 0.0f;
  for (std::size_t k = 0; k < n; ++k)
    if (a[k] > 0.0f) e -= a[k] * std::log(a[k]);
  return e;
}

// attention_scalar's steps, in the order it takes them.
namespace attn_ref {

/// Token t's row of Q, K or V (col = in.q_col, k_col or v_col) for head h.
inline const float* row(const AttentionReport& in, std::size_t t, const std::uint32_t* col, std::size_t h) {
  return in.qkv + t * in.ld + col[h];
}

/// Query rows: all tokens, or the one designated (clamped) query. Returns their number.
inline std::size_t query_rows(const AttentionReport& in, std::size_t* q_first) {
  const std::size_t n = in.n;
  *q_first = 0;
  if (in.config.query != QueryMode::all && n) {
    std::int64_t q = in.config.query == QueryMode::first  ? 0
                     : in.config.query == QueryMode::last ? std::int64_t(n) - 1
                                                          : in.config.query_index;
    if (q < 0) q += std::int64_t(n);
    q = q < 0 ? 0 : (q >= std::int64_t(n) ? std::int64_t(n) - 1 : q);
    *q_first = std::size_t(q);
    return 1;
  }
  return n;
}

/// Every output of the report 0: the sums over queries start there.
inline void clear_outputs(const AttentionReportOut& out, std::size_t H1, std::size_t C, std::size_t P) {
  const std::size_t S = out.stride;
  for (std::size_t h = 0; h < H1; ++h) {
    for (std::size_t c = 0; c < C; ++c) out.context[(h * C + c) * S] = 0.0;
    for (std::size_t s = 0; s < kHeadStats; ++s) out.head_stats[(h * kHeadStats + s) * S] = 0.0;
  }
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t s = 0; s < kPairStats; ++s) out.pair_stats[(p * kPairStats + s) * S] = 0.0;
}

/// Head h at query q (query row iq of nq): its row of A_h into a[0, n), O_h[q] into o, the
/// query's stats and contexts added to out, ‖O_h[q]‖² to *onorm. Returns the row's entropy.
/// Inlined into attention_scalar's loop as it was written there (a 3-token report's call is a
/// few dozen flops).
[[gnu::always_inline]] inline float head_at_query(const AttentionReport& in, const AttentionReportOut& out,
                                                  std::size_t q, std::size_t iq, std::size_t nq, std::size_t h,
                                                  float* a, float* o, double* onorm) {
  const std::size_t n = in.n, C = in.axes, S = out.stride;
  const std::size_t len = in.config.mask == MaskKind::causal ? q + 1 : n;
  const std::size_t from = first_visible_key(in.config, q);  // a sliding window's first key
  const float scale = 1.0f / std::sqrt(float(in.dk[h]));
  const float* qr = row(in, q, in.q_col, h);
  float m = -std::numeric_limits<float>::infinity();
  for (std::size_t k = from; k < len; ++k) {
    const float* kr = row(in, k, in.k_col, h);
    float s = 0.0f;
    for (std::size_t d = 0; d < in.dk[h]; ++d) s += qr[d] * kr[d];
    a[k] = s * scale;
    if (in.config.softcap != 0.0f) a[k] = in.config.softcap * std::tanh(a[k] / in.config.softcap);
    m = a[k] > m ? a[k] : m;
  }
  float z = 0.0f;
  for (std::size_t k = from; k < len; ++k) {
    a[k] = std::exp(a[k] - m);
    z += a[k];
  }
  float conf = 0.0f;
  for (std::size_t k = 0; k < n; ++k) {
    a[k] = k >= from && k < len ? a[k] / z : 0.0f;
    conf = a[k] > conf ? a[k] : conf;
  }
  const float ent = attention_entropy_ref(a, n);
  double* hs = out.head_stats + h * kHeadStats * S;
  hs[kEntropy * S] += ent;
  hs[kConfidence * S] += conf;
  hs[kSelfWeight * S] += a[q];
  hs[kPrevWeight * S] += q ? a[q - 1] : 0.0f;
  hs[kFirstWeight * S] += a[0];
  for (std::size_t c = 0; c < C; ++c) {
    float v = 0.0f;
    for (std::size_t k = 0; k < n; ++k) v += a[k] * in.axis[c][k];
    out.context[(h * C + c) * S] += v;
  }
  for (std::size_t d = 0; d < in.dv[h]; ++d) o[d] = 0.0f;
  for (std::size_t k = 0; k < n; ++k) {
    const float* vr = row(in, k, in.v_col, h);
    for (std::size_t d = 0; d < in.dv[h]; ++d) o[d] += a[k] * vr[d];
  }
  float on = 0.0f;
  for (std::size_t d = 0; d < in.dv[h]; ++d) on += o[d] * o[d];
  *onorm += on;
  if (out.maps)
    for (std::size_t k = 0; k < n; ++k) out.maps[(h * nq + iq) * n + k] = a[k];
  if (out.head_out) {  // block h after the blocks of heads 0..h-1, nq x dv[g] each
    std::size_t off = 0;
    for (std::size_t g = 0; g < h; ++g) off += nq * in.dv[g];
    for (std::size_t d = 0; d < in.dv[h]; ++d) out.head_out[off + iq * in.dv[h] + d] = o[d];
  }
  return ent;
}

/// Pairs of heads 1..H at one query, from its rows a_all ([h][n]), outputs o_all ([h][dv_max])
/// and entropies ent ([h]): JS, overlap, Σ_q O_i·O_j and the output distance added to out.
inline void pairs_at_query(const AttentionReport& in, const AttentionReportOut& out, const float* a_all,
                           const float* o_all, std::size_t dv_max, const float* ent) {
  const std::size_t n = in.n, H1 = std::size_t(in.heads) + 1, S = out.stride;
  std::size_t p = 0;
  for (std::size_t i = 1; i < H1; ++i)
    for (std::size_t j = i + 1; j < H1; ++j, ++p) {
      const float* ai = a_all + i * n;
      const float* aj = a_all + j * n;
      float hm = 0.0f, overlap = 0.0f;
      for (std::size_t k = 0; k < n; ++k) {
        const float mk = 0.5f * (ai[k] + aj[k]);
        if (mk > 0.0f) hm -= mk * std::log(mk);
        overlap += ai[k] * aj[k];
      }
      const float* oi = o_all + i * dv_max;
      const float* oj = o_all + j * dv_max;
      float dot = 0.0f, d2 = 0.0f;
      for (std::size_t d = 0; d < in.dv[i]; ++d) {
        dot += oi[d] * oj[d];
        d2 += (oi[d] - oj[d]) * (oi[d] - oj[d]);
      }
      double* ps = out.pair_stats + p * kPairStats * S;
      ps[kJensenShannon * S] += hm - 0.5f * (ent[i] + ent[j]);
      ps[kPositionOverlap * S] += overlap;
      ps[kOutputCosine * S] += dot;  // Σ_q O_i·O_j; divided by the norms below
      ps[kOutputDistance * S] += std::sqrt(d2);
    }
}

/// Value subspaces over the report's tokens (f32 per token, f64 over tokens), then every sum
/// over queries turned into its mean, the cosines divided by their norms (onorm: Σ_q ‖O_h[q]‖²;
/// vnorm: [h], zero, receives Σ_t ‖V_h[t]‖²).
inline void finish(const AttentionReport& in, const AttentionReportOut& out, std::size_t nq, const double* onorm,
                   double* vnorm) {
  const std::size_t n = in.n, H1 = std::size_t(in.heads) + 1, C = in.axes, S = out.stride;
  for (std::size_t h = 1; h < H1; ++h)
    for (std::size_t t = 0; t < n; ++t) {
      const float* v = row(in, t, in.v_col, h);
      float s = 0.0f;
      for (std::size_t d = 0; d < in.dv[h]; ++d) s += v[d] * v[d];
      vnorm[h] += s;
    }
  const double inv = nq ? 1.0 / double(nq) : 0.0;
  for (std::size_t h = 0; h < H1; ++h) {
    for (std::size_t c = 0; c < C; ++c) out.context[(h * C + c) * S] *= inv;
    for (std::size_t s = 0; s < kHeadStats; ++s) out.head_stats[(h * kHeadStats + s) * S] *= inv;
  }
  std::size_t p = 0;
  for (std::size_t i = 1; i < H1; ++i)
    for (std::size_t j = i + 1; j < H1; ++j, ++p) {
      double* ps = out.pair_stats + p * kPairStats * S;
      double vdot = 0.0;
      for (std::size_t t = 0; t < n; ++t) {
        const float* vi = row(in, t, in.v_col, i);
        const float* vj = row(in, t, in.v_col, j);
        float s = 0.0f;
        for (std::size_t d = 0; d < in.dv[i]; ++d) s += vi[d] * vj[d];
        vdot += s;
      }
      const double vden = std::sqrt(vnorm[i] * vnorm[j]);
      const double oden = std::sqrt(onorm[i] * onorm[j]);
      ps[kJensenShannon * S] = std::fmax(0.0, ps[kJensenShannon * S] * inv);
      ps[kPositionOverlap * S] *= inv;
      ps[kSubspaceCosine * S] = vden > 0.0 ? vdot / vden : 0.0;
      ps[kOutputCosine * S] = oden > 0.0 ? ps[kOutputCosine * S] / oden : 0.0;
      ps[kOutputDistance * S] *= inv;
    }
}

}  // namespace attn_ref

inline void attention_scalar(const AttentionReport& in, const AttentionReportOut& out, std::vector<float>& buf,
                             std::vector<double>& sums) {
  const std::size_t n = in.n, H = in.heads, H1 = H + 1, C = in.axes;
  const std::size_t P = H ? H * (H - 1) / 2 : 0;
  std::size_t q_first = 0;
  const std::size_t nq = attn_ref::query_rows(in, &q_first);
  attn_ref::clear_outputs(out, H1, C, P);

  std::size_t dv_max = 0;
  for (std::size_t h = 0; h < H1; ++h) dv_max = in.dv[h] > dv_max ? in.dv[h] : dv_max;
  buf.assign(H1 * n + H1 * dv_max + H1 + 1, 0.0f);
  float* a_all = buf.data();             // [h][k]: this query's row of A_h
  float* o_all = a_all + H1 * n;         // [h][d]: O_h[q]
  float* ent = o_all + H1 * dv_max;      // [h]: this query's entropy
  sums.assign(2 * H1, 0.0);
  double* onorm = sums.data();           // [h]: Σ_q ‖O_h[q]‖²
  double* vnorm = onorm + H1;            // [h]: Σ_t ‖V_h[t]‖²

  for (std::size_t iq = 0; iq < nq; ++iq) {
    const std::size_t q = q_first + iq;
    for (std::size_t h = 0; h < H1; ++h)
      ent[h] = attn_ref::head_at_query(in, out, q, iq, nq, h, a_all + h * n, o_all + h * dv_max, onorm + h);
    attn_ref::pairs_at_query(in, out, a_all, o_all, dv_max, ent);
  }
  attn_ref::finish(in, out, nq, onorm, vnorm);
}

}  // namespace headsep::kernels
