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
//   [d][n rounded up to W] so a key block is one aligned load; V is read in place (rows of the
//   projection matrix) when the vector past d_v stays inside the row, else copied zero-padded.
//   Lanes past d_v carry other columns' values and are zeroed before anything reads them.
// - Softmax: exp(scale·(s - max)) with max subtracted (the max element gets exactly e^0 = 1, so the
//   confidence max_k a is 1/Z), masked and padding lanes at -inf -> y clamped to -88 -> exactly 0.
//   The entropy needs no per-element log: with y_k = scale·(s_k - max) and a_k = e^{y_k}/Z,
//   -Σ a log a = log Z - Σ e^{y} y / Z, accumulated in the exp pass. Only the JS divergences need
//   logs (H(M), one per key per pair), so log is a vectorised Cephes polynomial (exponent split
//   by integer ops, no division), exp the Cephes one with a 2^n exponent add. Both ~2 ulp.
// - f32 throughout one row (FMA, tree-shaped horizontal sums), f64 across queries: results agree
//   with the scalar reference (attention_scalar.hpp) within the tolerance in tests/kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

#include "attention_simd.hpp"

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

  // ---- elementary functions --------------------------------------------------------------

  /// e^y for y <= 0 (Cephes expf polynomial, 2^n by an exponent add); 0 for y < -87.3, where
  /// e^y is below the smallest normal float (the reference gives a subnormal there: |diff| < 1e-38).
  static B exp_neg(B y) noexcept {
    const B magic(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer in the low bits
    const B t = xsimd::fma(y, B(1.44269504088896341f), magic);
    const B n = t - magic;
    B r = xsimd::fma(n, B(-0.693359375f), y);
    r = xsimd::fma(n, B(2.12194440e-4f), r);
    B p(1.9875691500e-4f);
    p = xsimd::fma(p, r, B(1.3981999507e-3f));
    p = xsimd::fma(p, r, B(8.3334519073e-3f));
    p = xsimd::fma(p, r, B(4.1665795894e-2f));
    p = xsimd::fma(p, r, B(1.6666665459e-1f));
    p = xsimd::fma(p, r, B(5.0000001201e-1f));
    p = xsimd::fma(p, r * r, r) + B(1.0f);
    // t's low bits hold n (two's complement): shifted into the exponent field, the high bits drop out.
    const I scaled = xsimd::bitwise_cast<I>(p) + (xsimd::bitwise_cast<I>(t) << 23);
    return xsimd::select(y < B(-87.3f), B(0.0f), xsimd::bitwise_cast<B>(scaled));
  }

  /// log x for normal x > 0 (Cephes logf): x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(1 + f) by
  /// a degree-9 polynomial. The split is integer arithmetic on the bits, no compare or division.
  static B log_pos(B x) noexcept {
    const I bits = xsimd::bitwise_cast<I>(x);
    const I e = (bits - I(0x3f3504f3)) >> 23;  // floor(log2(x / sqrt(1/2)))
    const B m = xsimd::bitwise_cast<B>(bits - (e << 23));
    const B f = m - B(1.0f);
    const B ef = xsimd::to_float(e);
    const B z = f * f;
    B p(7.0376836292e-2f);
    p = xsimd::fma(p, f, B(-1.1514610310e-1f));
    p = xsimd::fma(p, f, B(1.1676998740e-1f));
    p = xsimd::fma(p, f, B(-1.2420140846e-1f));
    p = xsimd::fma(p, f, B(1.4249322787e-1f));
    p = xsimd::fma(p, f, B(-1.6668057665e-1f));
    p = xsimd::fma(p, f, B(2.0000714765e-1f));
    p = xsimd::fma(p, f, B(-2.4999993993e-1f));
    p = xsimd::fma(p, f, B(3.3333331174e-1f));
    B y = p * (f * z);
    y = xsimd::fma(ef, B(-2.12194440e-4f), y);
    y = xsimd::fma(z, B(-0.5f), y);
    return xsimd::fma(ef, B(0.693359375f), f + y);
  }

  static float hmax(B v) noexcept {
    alignas(64) float t[W];
    v.store_aligned(t);
    float m = t[0];
    for (std::size_t i = 1; i < W; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }

  /// Lanes [0, k) true, k <= W.
  static xsimd::batch_bool<float, A> first_lanes(std::size_t k) noexcept {
    alignas(64) float idx[W];
    for (std::size_t i = 0; i < W; ++i) idx[i] = float(i);
    return B::load_aligned(idx) < B(float(k));
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
        for (std::size_t v = 0; v < V; ++v) acc[r][v] = xsimd::fma(a, b[v], acc[r][v]);
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
      for (std::size_t j = 0; j < V; ++j) b[j] = B::load_unaligned(vp + j * W);
      for (std::size_t r = 0; r < R; ++r) {
        const B x(a[r * np + k]);
        for (std::size_t j = 0; j < V; ++j) acc[r][j] = xsimd::fma(x, b[j], acc[r][j]);
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
      s0 = xsimd::fma(B::load_aligned(x + k), B::load_aligned(y + k), s0);
      s1 = xsimd::fma(B::load_aligned(x + k + W), B::load_aligned(y + k + W), s1);
    }
    for (; k < len; k += W) s0 = xsimd::fma(B::load_aligned(x + k), B::load_aligned(y + k), s0);
    return xsimd::hadd(s0 + s1);
  }

  /// Σ_d x[d] y[d] over d < n of unpadded rows (lanes past n masked out).
  static float dot_masked(const float* x, const float* y, std::size_t n) noexcept {
    B s(0.0f);
    std::size_t d = 0;
    for (; d + W <= n; d += W) s = xsimd::fma(B::load_unaligned(x + d), B::load_unaligned(y + d), s);
    if (d < n) {
      const auto m = first_lanes(n - d);  // lanes past n: other columns, whatever they hold
      s = xsimd::fma(xsimd::select(m, B::load_unaligned(x + d), B(0.0f)),
                     xsimd::select(m, B::load_unaligned(y + d), B(0.0f)), s);
    }
    return xsimd::hadd(s);
  }

  // ---- the report -------------------------------------------------------------------------

  static void run(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) noexcept {
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
    float* ent = f;  // [h][tq]: the tile rows' entropies
    f += seg(H1 * tq);
    float* ot = f;  // [h][tq][dvp_h]: O_h rows of the tile, lanes past dv zeroed
    std::size_t ot_floats = 0;
    for (std::size_t h = 0; h < H1; ++h) ot_floats += tq * up(in.dv[h]);
    f += seg(ot_floats);
    float* vpack = f;  // V_h copied zero-padded, for heads whose padded row would leave the row
    double* onorm = w.d;        // [h]: Σ_q ‖O_h[q]‖²
    double* vnorm = w.d + H1;   // [h]: Σ_t ‖V_h[t]‖²
    for (std::size_t h = 0; h < H1; ++h) onorm[h] = vnorm[h] = 0.0;

    // ---- per report: K transposed, V (padded where needed), axes ----
    {
      float* dst = kt;
      for (std::size_t h = 0; h < H1; ++h) {
        const std::size_t dk = in.dk[h];
        const float* src = in.qkv + in.k_col[h];
        for (std::size_t k = 0; k < n; ++k, src += ld)
          for (std::size_t d = 0; d < dk; ++d) dst[d * np + k] = src[d];
        for (std::size_t d = 0; d < dk; ++d)
          for (std::size_t k = n; k < np; ++k) dst[d * np + k] = 0.0f;
        dst += dk * np;
      }
      for (std::size_t c = 0; c < C; ++c) {
        for (std::size_t k = 0; k < n; ++k) ax[c * np + k] = in.axis[c][k];
        for (std::size_t k = n; k < np; ++k) ax[c * np + k] = 0.0f;
      }
    }
    // V_h rows: in place when the last vector of a row stays inside the row, else packed.
    auto packed = [&](std::size_t h) -> float* {  // nullptr: read in place
      if (in.v_col[h] + up(in.dv[h]) <= ld) return nullptr;
      float* p = vpack;
      for (std::size_t g = 0; g < h; ++g)
        if (in.v_col[g] + up(in.dv[g]) > ld) p += seg(n * up(in.dv[g]));
      return p;
    };
    auto v_rows = [&](std::size_t h, std::size_t& ldv) -> const float* {
      if (const float* p = packed(h)) {
        ldv = up(in.dv[h]);
        return p;
      }
      ldv = ld;
      return in.qkv + in.v_col[h];
    };
    for (std::size_t h = 0; h < H1; ++h) {
      float* p = packed(h);
      if (!p) continue;
      const std::size_t dv = in.dv[h], ldv = up(dv);
      for (std::size_t k = 0; k < n; ++k) {
        const float* src = in.qkv + k * ld + in.v_col[h];
        for (std::size_t d = 0; d < dv; ++d) p[k * ldv + d] = src[d];
        for (std::size_t d = dv; d < ldv; ++d) p[k * ldv + d] = 0.0f;
      }
    }

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
        std::size_t ldv = 0;
        const float* v = v_rows(h, ldv);
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
            B mx(neg_inf);
            for (std::size_t k = 0; k < lv; k += W) mx = xsimd::max(mx, B::load_aligned(s + k));
            const B mb(hmax(mx)), sc(scale), ymin(-88.0f);
            B z(0.0f), ty(0.0f);
            for (std::size_t k = 0; k < lv; k += W) {
              const B y = xsimd::max((B::load_aligned(s + k) - mb) * sc, ymin);
              const B e = exp_neg(y);
              e.store_aligned(s + k);
              z += e;
              ty = xsimd::fma(e, y, ty);
            }
            const float zs = xsimd::hadd(z), inv = 1.0f / zs;
            const float entropy = __builtin_logf(zs) - xsimd::hadd(ty) * inv;
            const B ib(inv);
            for (std::size_t k = 0; k < lv; k += W) (B::load_aligned(s + k) * ib).store_aligned(s + k);
            for (std::size_t k = lv; k < kend; ++k) s[k] = 0.0f;  // A·V of the block reads up to klen
            ent[h * tq + r] = entropy;
            double* hs = out.head_stats + h * kHeadStats * S;
            hs[kEntropy * S] += entropy;
            hs[kConfidence * S] += inv;  // the max element is e^0 = 1
            hs[kSelfWeight * S] += s[q];
            hs[kPrevWeight * S] += q ? s[q - 1] : 0.0f;
            hs[kFirstWeight * S] += s[0];
            for (std::size_t c = 0; c < C; ++c) out.context[(h * C + c) * S] += dot(s, ax + c * np, lv);
            if (out.maps) {
              float* m = out.maps + (h * nq + t0 + r) * n;
              for (std::size_t k = 0; k < len; ++k) m[k] = s[k];
              for (std::size_t k = len; k < n; ++k) m[k] = 0.0f;
            }
          }
          float* o = op + rb * dvp;
          av(R, a + rb * np, np, v, ldv, klen, o, dvp);
          for (std::size_t r = 0; r < R; ++r) {
            float* orow = o + r * dvp;
            for (std::size_t d = dv; d < dvp; ++d) orow[d] = 0.0f;
            onorm[h] += dot(orow, orow, dvp);
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
      // ---- pairs of heads 1..H, per query row ----
      if (P) {
        const std::size_t dvp = up(in.dv[1]);
        const float* o1 = ot + tq * up(in.dv[0]);  // O_1; heads 1..H have equal d_v
        const B half(0.5f), tiny(std::numeric_limits<float>::min());
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t q = qb + r;
          const std::size_t lv = up(causal ? q + 1 : n);
          std::size_t p = 0;
          for (std::size_t i = 1; i < H1; ++i)
            for (std::size_t j = i + 1; j < H1; ++j, ++p) {
              const float* ai = at + (i * tq + r) * np;
              const float* aj = at + (j * tq + r) * np;
              B js(0.0f), ov(0.0f);
              for (std::size_t k = 0; k < lv; k += W) {
                const B x = B::load_aligned(ai + k), y = B::load_aligned(aj + k);
                const B m = (x + y) * half;
                js = xsimd::fma(m, log_pos(xsimd::max(m, tiny)), js);
                ov = xsimd::fma(x, y, ov);
              }
              const float* oi = o1 + ((i - 1) * tq + r) * dvp;
              const float* oj = o1 + ((j - 1) * tq + r) * dvp;
              B od(0.0f), dd(0.0f);
              for (std::size_t d = 0; d < dvp; d += W) {
                const B x = B::load_aligned(oi + d), y = B::load_aligned(oj + d);
                od = xsimd::fma(x, y, od);
                dd = xsimd::fma(x - y, x - y, dd);
              }
              double* ps = out.pair_stats + p * kPairStats * S;
              ps[kJensenShannon * S] += -xsimd::hadd(js) - 0.5f * (ent[i * tq + r] + ent[j * tq + r]);
              ps[kPositionOverlap * S] += xsimd::hadd(ov);
              ps[kOutputCosine * S] += xsimd::hadd(od);
              ps[kOutputDistance * S] += __builtin_sqrtf(xsimd::hadd(dd));
            }
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
    const std::size_t dv = in.dv[1];
    for (std::size_t h = 1; h < H1; ++h) {
      std::size_t ldv = 0;
      const float* v = v_rows(h, ldv);
      for (std::size_t t = 0; t < n; ++t) vnorm[h] += dot_masked(v + t * ldv, v + t * ldv, dv);
    }
    std::size_t p = 0;
    for (std::size_t i = 1; i < H1; ++i)
      for (std::size_t j = i + 1; j < H1; ++j, ++p) {
        std::size_t li = 0, lj = 0;
        const float* vi = v_rows(i, li);
        const float* vj = v_rows(j, lj);
        double vdot = 0.0;
        for (std::size_t t = 0; t < n; ++t) vdot += dot_masked(vi + t * li, vj + t * lj, dv);
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

  static constexpr std::size_t kChains = W >= 16 ? 16 : 12;

  static float fma_chains(std::size_t rounds, float x) noexcept {
    B acc[kChains];
    for (std::size_t i = 0; i < kChains; ++i) acc[i] = B(x + float(i) * 1e-3f);
    const B m(0.9999999f), c(1e-7f);
    for (std::size_t r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < kChains; ++i) acc[i] = xsimd::fma(acc[i], m, c);
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
float attention_kernel<Arch>::fma_chains(std::size_t rounds, float x) const {
  return attn_detail::AK<Arch>::fma_chains(rounds, x);
}
template <class Arch>
std::size_t attention_kernel<Arch>::fma_chain_flops() noexcept {
  return attn_detail::AK<Arch>::kChains * attn_detail::AK<Arch>::W * 2;
}

}  // namespace headsep::kernels
