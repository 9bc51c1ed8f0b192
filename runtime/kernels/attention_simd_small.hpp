// AK<A>::small: reports of at most kAttnSmallN tokens, one report per vector lane, and the f64 lanes
// its means are taken in. One function on purpose, as run() (attention_simd_run.hpp): its f64 means
// cut into an always_inline helper changed the AVX-512 object's code (+1.2 kB, other spills).
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/attention_simd_ak.hpp"

namespace headsep::kernels {
namespace attn_detail {

// ---- small reports, one per lane ------------------------------------------------------
// A report of a handful of tokens fills a fraction of one vector, and run()'s per-report setup
// (transposes, padded rows, horizontal sums) costs more than its arithmetic: 73% of a 3-token
// run was that overhead. Here W reports of equal n go through at once, lane l = report l, every
// quantity a vector over the reports: no padding, no horizontal sum, no transpose. A lane's
// arithmetic never depends on the other lanes (lanes past `count` repeat report 0 and are
// dropped), so a report gets the same bits alone (attention_report) or in any group.
template <class A>
inline void AK<A>::small(const AttentionReport* const* in, const AttentionReportOut* const* out, std::size_t count,
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

  const B tmin(kExp2Min), one(1.0f), tiny(std::numeric_limits<float>::min());
  B s[kAttnSmallN];
  for (std::size_t iq = 0; iq < nq; ++iq) {
    const std::size_t q = q_first + iq, len = causal ? q + 1 : n;
    for (std::size_t h = 0; h < H1; ++h) {
      const std::size_t dk = r0.dk[h], dv = r0.dv[h];
      // Scores in d order from 0 (run()'s order), the max over keys, exp(scale (s - max)) as
      // 2^t with t = scale·log2 e·(s - max) (softmax_row's form).
      B mx(-std::numeric_limits<float>::infinity());
      for (std::size_t k = 0; k < len; ++k) {
        B acc(0.0f);
        for (std::size_t d = 0; d < dk; ++d) acc = fmadd(ld(qo[h] + q * dk + d), ld(ko[h] + k * dk + d), acc);
        s[k] = acc;
        mx = xsimd::max(mx, acc);
      }
      const B sa((1.0f / __builtin_sqrtf(float(dk))) * kLog2e), msa = -(mx * sa);
      B z(0.0f), ty(0.0f);
      for (std::size_t k = 0; k < len; ++k) {
        const B t = xsimd::max(fmadd(s[k], sa, msa), tmin);
        const B ek = exp2_neg(t);
        s[k] = ek;
        z += ek;
        ty = fmadd(ek, t, ty);
      }
      const B inv = one / z;
      const B ent = fmadd(ty * inv, B(-kLn2), log_pos(z));  // -Σ p ln p = ln Z - ln2·Σ e t / Z
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

template <class A>
inline auto AK<A>::widen(B v) noexcept -> Wide {
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

}  // namespace attn_detail
}  // namespace headsep::kernels
