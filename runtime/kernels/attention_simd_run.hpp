// AK<A>::run: one report through the fused kernel, query tile outer, heads inner (attention_simd_impl.hpp
// draws the layout). One function on purpose: even its cold phases cut into always_inline helpers made
// GCC 12 allocate registers and spill slots differently through the tile loop (checked with objdump).
#pragma once
#include <cstddef>
#include <limits>

#include "kernels/attention_simd_ak.hpp"

namespace headsep::kernels {
namespace attn_detail {

template <class A>
inline void AK<A>::run(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) noexcept {
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
  // The baseline's scores as the sum of the heads' when its Q and K columns are heads 1..H's,
  // concatenated (the models': BERT's, the decoders'): Q_0·K_0^T = Σ_h Q_h·K_h^T, so its d_k = Σ d_h FMAs
  // per score become H adds, and K_0 is not transposed. The heads then run first, each adding its
  // raw scores into the baseline's rows before its softmax; the baseline last. Only the sum's
  // association changes (the scalar reference takes one dot product).
  const bool sum_base = [&] {
    std::size_t q = in.q_col[0], k = in.k_col[0];
    for (std::size_t h = 1; h < H1; ++h) {
      if (in.q_col[h] != q || in.k_col[h] != k) return false;
      q += in.dk[h], k += in.dk[h];
    }
    return H1 > 1 && q - in.q_col[0] == in.dk[0];
  }();
  const std::size_t np = up(n), tq = w.tq;
  const std::size_t ld = in.ld;
  // ---- carve the working memory (the same segments, sized for W = kAttnMaxLanes, as
  //      attention_work_floats in attention_dispatch.cpp) ----
  float* f = w.f;
  float* kt = f;  // [h][key panel][d][KP]: K_h transposed, keys zero-padded to np
  const std::size_t nkp = up_kp(n);
  std::size_t kt_floats = 0;
  for (std::size_t h = 0; h < H1; ++h) kt_floats += std::size_t(in.dk[h]) * nkp;
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
  // Key blocks of W rows outer, heads inner, each step prefetching the same columns of the next
  // block's rows: the rows are ld floats (kilobytes) apart, which neither the stride nor the
  // next-line prefetchers follow, so head by head every line came from L3 one miss at a time
  // (the transposes and V's copy were ~7 % of the kernel at 256², perf on Zen 4).
  for (std::size_t k0 = 0; k0 < np; k0 += W) {
    const std::size_t kn = lo(W, n - k0), next = k0 + W < n ? lo(W, n - k0 - W) : 0;
    // K_h^T in W x W blocks transposed in registers; the edges (keys past the last whole
    // block of W, dims past the last whole W) through a line buffer, one float at a time.
    float* dst = kt;
    for (std::size_t h = 0; h < H1; ++h) {
      const std::size_t dk = in.dk[h];
      if (!(sum_base && h == 0)) {
        const float* src = in.qkv + in.k_col[h];
        float* panel = dst + k0 / KP * (dk * KP) + k0 % KP;  // row d at panel + d·KP
        std::size_t d = 0;
        if (kn == W)
          for (; d + W <= dk; d += W) {
            for (std::size_t i = 0; i < next; ++i) _mm_prefetch(reinterpret_cast<const char*>(src + (k0 + W + i) * ld + d), _MM_HINT_T0);
            transpose_block(src + k0 * ld + d, ld, panel + d * KP, KP);
          }
        for (; d < dk; ++d) {
          alignas(64) float line[W];
          for (std::size_t i = 0; i < W; ++i) line[i] = i < kn ? src[(k0 + i) * ld + d] : 0.0f;
          B::load_aligned(line).store_aligned(panel + d * KP);
        }
      }
      dst += dk * nkp;
    }
    // V_h rows contiguous: A·V then streams them in order instead of one page per key.
    for (std::size_t k = k0; k < k0 + kn; ++k) {
      float* v = vp;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dv = in.dv[h], dvp = up(dv);
        const float* row = in.qkv + k * ld + in.v_col[h];
        if (k + W < n)
          for (std::size_t d = 0; d < dv; d += 64 / sizeof(float))
            _mm_prefetch(reinterpret_cast<const char*>(row + W * ld + d), _MM_HINT_T0);
        float* o = v + k * dvp;
        std::size_t d = 0;
        for (; d + W <= dv; d += W) B::load_unaligned(row + d).store_aligned(o + d);
        for (; d < dv; ++d) o[d] = row[d];
        for (; d < dvp; ++d) o[d] = 0.0f;
        v += seg(n * dvp);
      }
    }
  }
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t k = 0; k < n; ++k) ax[c * np + k] = in.axis[c][k];
    for (std::size_t k = n; k < np; ++k) ax[c * np + k] = 0.0f;
  }
  auto v_rows = [&](std::size_t h) -> const float* {
    const float* v = vp;
    for (std::size_t g = 0; g < h; ++g) v += seg(n * up(in.dv[g]));
    return v;
  };
  auto kt_of = [&](std::size_t h) -> const float* {  // K_h^T's panels
    const float* k = kt;
    for (std::size_t g = 0; g < h; ++g) k += in.dk[g] * nkp;
    return k;
  };
  auto ot_of = [&](std::size_t h) -> float* {  // the tile's O_h rows
    float* o = ot;
    for (std::size_t g = 0; g < h; ++g) o += tq * up(in.dv[g]);
    return o;
  };

  // ---- query tiles ----
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::size_t t0 = 0; t0 < nq; t0 += tq) {
    const std::size_t rows = lo(tq, nq - t0);
    const std::size_t qb = q_first + t0;  // query token of tile row 0
    for (std::size_t hi = 0; hi < H1; ++hi) {
      const std::size_t h = sum_base ? (hi + 1) % H1 : hi;  // the summed baseline last
      const float* ktp = kt_of(h);
      float* op = ot_of(h);
      const std::size_t dk = in.dk[h], dv = in.dv[h], dvp = up(dv);
      float* a = at + h * tq * np;
      const float scale = 1.0f / __builtin_sqrtf(float(dk));
      const float* v = v_rows(h);
      for (std::size_t rb = 0; rb < rows; rb += MR) {
        const std::size_t R = lo(MR, rows - rb);
        // Keys this block needs: all, or up to its last query (causal), from kb on: a sliding
        // window's keys before the block's first visible one (rounded down to a K^T panel) are
        // skipped by the scores, the softmax and A·V. Their probabilities are exactly 0, so the
        // sums are those of masking them (each skipped term adds +0): a report past the window
        // costs n·w, not n²/2, and every bit stays.
        const std::size_t klen = causal ? qb + rb + R : n;
        const std::size_t kend = up(klen), kb = first_visible_key(in.config, qb + rb) / KP * KP;
        if (!sum_base || h) scores(R, in.qkv + (qb + rb) * ld + in.q_col[h], ld, ktp, np, dk, a + rb * np, kb, kend);
        if (sum_base && h)
          for (std::size_t r = rb; r < rb + R; ++r) {  // into the baseline's rows, heads in order
            float* s0 = at + r * np;
            const float* sh = a + r * np;
            for (std::size_t k = kb; k < kend; k += W)
              (h == 1 ? B::load_aligned(sh + k) : B::load_aligned(s0 + k) + B::load_aligned(sh + k)).store_aligned(s0 + k);
          }
        // The block's row maxima first: each row's exp pass then starts without waiting on its
        // own max's chain and reduction, and overlaps the previous row's sums and division.
        float rmax[MR];
        for (std::size_t r = rb; r < rb + R; ++r) {
          const std::size_t q = qb + r;
          const std::size_t len = causal ? q + 1 : n, lv = up(len);
          float* s = a + r * np;  // [0, kb) not computed: never read below
          if (in.config.softcap != 0.0f) softcap_row(s + kb, lv - kb, scale, in.config.softcap);
          for (std::size_t k = len; k < lv; ++k) s[k] = neg_inf;
          for (std::size_t k = kb, from = first_visible_key(in.config, q); k < from; ++k) s[k] = neg_inf;
          rmax[r - rb] = row_max(s + kb, lv - kb);
        }
        for (std::size_t r = rb; r < rb + R; ++r) {
          const std::size_t q = qb + r;
          const std::size_t len = causal ? q + 1 : n, lv = up(len);
          float* s = a + r * np;
          const float m = rmax[r - rb];
          float* cx = rctx + r;
          float* sk = s + kb;
          const float* axk = ax + kb;
          switch (C) {
            case 0: softmax_row<0>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
            case 1: softmax_row<1>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
            case 2: softmax_row<2>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
            case 3: softmax_row<3>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
            case 4: softmax_row<4>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
            default: softmax_row<kAnyC>(sk, lv - kb, scale, m, axk, np, C, cx, tqp, rz[r], rt[r]); break;
          }
          for (std::size_t k = lv; k < kend; ++k) s[k] = 0.0f;  // A·V of the block reads up to klen
          rinv[r] = 1.0f / rz[r];  // the max element is e^0 = 1: the confidence
          rself[r] = s[q];
          rprev[r] = q && q - 1 >= kb ? s[q - 1] : 0.0f;
          rfirst[r] = kb ? 0.0f : s[0];
          if (out.maps) {
            float* m = out.maps + (h * nq + t0 + r) * n;
            for (std::size_t k = 0; k < kb; ++k) m[k] = 0.0f;
            for (std::size_t k = kb; k < len; ++k) m[k] = s[k];
            for (std::size_t k = len; k < n; ++k) m[k] = 0.0f;
          }
        }
        if (!dvp) continue;  // a head without values (AttentionPlan's baseline): its map only
        float* o = op + rb * dvp;
        av(R, a + rb * np + kb, np, v + kb * dvp, dvp, klen - kb, o, dvp);
        for (std::size_t r = 0; r < R; ++r) onorm[h] += dot(o + r * dvp, o + r * dvp, dvp);
      }
      // The tile's entropies (one vector log for W rows), then its rows' stats summed in f64.
      for (std::size_t r0 = 0; r0 < rows; r0 += W)
        fmadd(B::load_aligned(rt + r0), B(-kLn2), log_pos(B::load_aligned(rz + r0))).store_aligned(ent + h * tqp + r0);
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
          B dd[kAttnMaxTileRows + W];  // each row's squared output distance, lanes not yet summed
          double dist = 0, ents = 0;
          for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t lv = up(causal ? qb + r + 1 : n);
            // From the row's first visible key down to a vector: its block's softmax wrote 0 there.
            const std::size_t kr = first_visible_key(in.config, qb + r) / W * W;
            const float* ai = at + (i * tq + r) * np;
            const float* aj = at + (j * tq + r) * np;
            // H(M) = -Σ m log m, m = s/2, s = p + q: = (ln2 Σ s - Σ s log s) / 2 = ln2 - Σ s log s / 2
            // (Σ s = 2 up to the rounding of the probabilities, ~n·u: within the tolerance).
            for (std::size_t k = kr; k < lv; k += W) {
              const B x = B::load_aligned(ai + k), y = B::load_aligned(aj + k);
              const B sk = x + y;
              js = fmadd(sk, log_pos(xsimd::max(sk, tiny)), js);
              ov = fmadd(x, y, ov);
            }
            const float* oi = o1 + ((i - 1) * tq + r) * dvp;
            const float* oj = o1 + ((j - 1) * tq + r) * dvp;
            B d2(0.0f);
            for (std::size_t d = 0; d < dvp; d += W) {
              const B x = B::load_aligned(oi + d), y = B::load_aligned(oj + d);
              od = fmadd(x, y, od);
              d2 = fmadd(x - y, x - y, d2);
            }
            dd[r] = d2;
            ents += double(ent[i * tqp + r]) + double(ent[j * tqp + r]);
          }
          // The rows' distances W at a time: one transposing sum (row_sums) and one vector square
          // root per W rows, not a horizontal sum and a scalar root per row (~10 % of MiniLM's
          // attention kernel); summed in f64 in row order as before.
          for (std::size_t r = rows; r < up(rows); ++r) dd[r] = B(0.0f);
          for (std::size_t r0 = 0; r0 < rows; r0 += W) {
            alignas(64) float root[W];
            xsimd::sqrt(row_sums(dd + r0)).store_aligned(root);
            for (std::size_t r = 0; r < W && r0 + r < rows; ++r) dist += double(root[r]);
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

}  // namespace attn_detail
}  // namespace headsep::kernels
