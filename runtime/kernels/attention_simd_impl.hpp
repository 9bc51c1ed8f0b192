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
//   panels of KP = NV·W keys, [panel][d][KP]: a score micro-kernel streams its keys as one
//   contiguous block, as a GEMM's packed panel. V is copied once per report into
//   contiguous rows of d_v rounded up to W, zero-padded: read in place, each key's row was on
//   another page (rows of the projection matrix are kilobytes apart) and A·V waited on the loads.
//   Zero padding (keys past n, lanes past d_v) makes every loop whole vectors, results unchanged.
// - A baseline whose Q and K columns are the heads' concatenated (the models') is scored as the
//   sum of the heads' raw scores (H adds per score instead of a Σd_h-term dot product, and its K is
//   not transposed): the heads run first, the baseline last.
// - Softmax: exp(scale·(s - max)) = 2^t, t = scale·log2 e·(s - max) in one FMA, max subtracted
//   (the max element gets e^0 = 1 up to that FMA's rounding, so the confidence max_k a is 1/Z),
//   masked and padding lanes at -inf -> t clamped to -88·log2 e -> exactly 0. The entropy needs
//   no per-element log: with a_k = 2^{t_k}/Z, -Σ a ln a = ln Z - ln2·Σ 2^{t} t / Z, accumulated
//   in the exp pass (with the context sums). Only the JS divergences need logs (H(M), one per key
//   per pair of heads: 28 pairs x n² for 8 heads, the largest cost after the two matrix
//   products), so log is a table + short series (see log_pos), 2^t the Cephes polynomial times
//   2^n (AVX-512: a 2^(j/16) table, a cubic and vscalefps), ~2 ulp. 2^t, not e^y: t - round(t)
//   is exact where y - k·ln2 took two FMAs, and the scaling FMA makes t directly. Measured against xsimd::exp/log (bench_attention kernel/, AVX-512):
//   256x256x256x8 18.1 vs 29.5 ms per 8 reports, 2048x64x64x4 1.76 vs 2.49 ms per 32.
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

#include "kernels/attention_simd_math.hpp"
#include "kernels/attention_simd_tiles.hpp"
#include "kernels/attention_simd_run.hpp"
#include "kernels/attention_simd_small.hpp"
#include "kernels/attention_simd_project.hpp"

namespace headsep::kernels {

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
