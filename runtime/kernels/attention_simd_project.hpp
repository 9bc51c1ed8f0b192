// AK<A>'s packed-panel GEMM (project_rows: the Q/K/V and FFN projections, GELU epilogue) and the
// FMA-chain probe of the peak (fma_chains).
#pragma once
#include <cstddef>
#include <type_traits>

#include "kernels/attention_simd_ak.hpp"
#include "kernels/gelu.hpp"

namespace headsep::kernels {
namespace attn_detail {

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

/// gelu_ref (kernels/gelu.hpp) on a vector, with this level's FMA: the FFN product's epilogue.
template <class A>
inline auto AK<A>::gelu(B in) noexcept -> B {
  const B x = xsimd::min(xsimd::max(in * B(0.70710678118654752f), B(-4.0f)), B(4.0f)), x2 = x * x;
  B p = fmadd(x2, B(kGeluP[0]), B(kGeluP[1]));
  for (int i = 2; i < 7; ++i) p = fmadd(x2, p, B(kGeluP[i]));
  B q = fmadd(x2, B(kGeluQ[0]), B(kGeluQ[1]));
  for (int i = 2; i < 5; ++i) q = fmadd(x2, q, B(kGeluQ[i]));
  return B(0.5f) * in * (B(1.0f) + x * p / q);
}

template <class A>
template <bool G, std::size_t R, std::size_t V>
inline void AK<A>::gemm_tile(const float* x, std::size_t ldx, std::size_t K, const float* bp, std::size_t c0, const float* bias,
                             float* c, std::size_t ldc, const char* pf, const char* pf_end) noexcept {
  B acc[R][V];
  for (std::size_t j = 0; j < V; ++j) {
    const B b = B::load_aligned(bias + j * W);
    for (std::size_t r = 0; r < R; ++r) acc[r][j] = b;
  }
  // The first iterations also prefetch this tile's share of the next panel, one line each.
  const std::size_t lines = static_cast<std::size_t>(pf_end - pf) / 64, kp = lines < K ? lines : K;
  for (std::size_t i = K; i < lines; ++i) _mm_prefetch(pf + i * 64, _MM_HINT_T1);  // surplus (few rows): now
  // Vector j's k stream: column c0 + j W of the panel, in its slice.
  const float* bj[V];
  for (std::size_t j = 0; j < V; ++j) bj[j] = bp + (c0 + j * W) / kSlice * K * kSlice + (c0 + j * W) % kSlice;
  for (std::size_t k = 0; k < K; ++k) {
    if (k < kp) _mm_prefetch(pf + k * 64, _MM_HINT_T1);
    B b[V];
    for (std::size_t j = 0; j < V; ++j) b[j] = B::load_aligned(bj[j] + k * kSlice);
    for (std::size_t r = 0; r < R; ++r) {
      const B a(x[r * ldx + k]);
      for (std::size_t j = 0; j < V; ++j) acc[r][j] = fmadd(a, b[j], acc[r][j]);
    }
  }
  if constexpr (G) {  // GELU from an L1 stack tile: C's lines are written once
    alignas(64) float t[R * V * W];
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < V; ++j) acc[r][j].store_aligned(t + (r * V + j) * W);
    gelu_tile<V>(t, c, ldc, R);
  } else {
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < V; ++j) acc[r][j].store_unaligned(c + r * ldc + j * W);
  }
}

/// GELU from the stack tile t (rows x V vectors) into C, out of line: inlined into gemm_tile
/// (on the accumulators), its constants took registers from the k loop's accumulators, which GCC
/// then kept in memory (the whole FFN product 35 % slower). Applied in place on C, right after
/// the tile's stores, its loads waited on them (C's lines not yet in L1): 5.7 % of MiniLM's
/// forward, a third of it on one load (perf, Zen 3).
template <class A>
template <std::size_t V>
void AK<A>::gelu_tile(const float* t, float* c, std::size_t ldc, std::size_t rows) noexcept {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < V; ++j) gelu(B::load_aligned(t + (r * V + j) * W)).store_unaligned(c + r * ldc + j * W);
}

template <class A>
template <bool G, std::size_t R, std::size_t V>
inline void AK<A>::gemm_rows(std::size_t rows, const float* x, std::size_t ldx, std::size_t K, const float* bp,
                             std::size_t c0, const float* bias, float* c, std::size_t ldc, const char* pf,
                             const char* pf_end) noexcept {
  if constexpr (R > 1)
    if (rows < R) return gemm_rows<G, R - 1, V>(rows, x, ldx, K, bp, c0, bias, c, ldc, pf, pf_end);
  gemm_tile<G, R, V>(x, ldx, K, bp, c0, bias, c, ldc, pf, pf_end);
}

template <class A>
inline void AK<A>::project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                           const float* pbias, std::size_t N, float* c, std::size_t ldc, const float* next_matrix,
                           std::size_t next_k, bool gelu_out) noexcept {
  if (gelu_out) return project_t<true>(x, ldx, M, K, packed, pbias, N, c, ldc, next_matrix, next_k);
  project_t<false>(x, ldx, M, K, packed, pbias, N, c, ldc, next_matrix, next_k);
}

/// dst[0, n) = src[0, n), n < SW, src 64-byte aligned: whole vectors, then one masked store. (A
/// plain loop of n floats became an inlined `rep movsq`, whose start-up cost per row was 2/3 of
/// the projections at d_model = 2, where every row is such a tail.)
template <class A>
inline void AK<A>::store_cols(float* dst, const float* src, std::size_t n) noexcept {
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

template <class A>
template <bool G>
inline void AK<A>::project_t(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
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
          gemm_rows<G>(R, x + m0 * ldx, ldx, K, bp, c0, pbias + col, c + m0 * ldc + col, ldc, pf, pf_end);
        } else {  // the last columns: through a stack tile, so nothing past column N is written, and
                  // only the vectors they need (N = 1024 at W = 16: 16 of the last panel's 48 columns)
          const float* xr = x + m0 * ldx;
          if (cols <= W) gemm_rows<G, GMR, 1>(R, xr, ldx, K, bp, c0, pbias + col, tmp, SW, pf, pf_end);
          else if (cols <= 2 * W) gemm_rows<G, GMR, 2 < GV ? 2 : GV>(R, xr, ldx, K, bp, c0, pbias + col, tmp, SW, pf, pf_end);
          else gemm_rows<G>(R, xr, ldx, K, bp, c0, pbias + col, tmp, SW, pf, pf_end);
          for (std::size_t r = 0; r < R; ++r) store_cols(c + (m0 + r) * ldc + col, tmp + r * SW, cols);
        }
      }
    }
  }
}

template <class A>
inline float AK<A>::fma_chains(std::size_t rounds, float x) noexcept {
  B acc[kChains];
  for (std::size_t i = 0; i < kChains; ++i) acc[i] = B(x + float(i) * 1e-3f);
  const B m(0.9999999f), c(1e-7f);
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < kChains; ++i) acc[i] = fmadd(acc[i], m, c);
  B s(0.0f);
  for (std::size_t i = 0; i < kChains; ++i) s += acc[i];
  return xsimd::hadd(s);
}

}  // namespace attn_detail
}  // namespace headsep::kernels
