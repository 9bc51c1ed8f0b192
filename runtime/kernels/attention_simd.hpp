// Private: the fused attention kernel, written once as a function object templated on the xsimd
// architecture (attention_simd_impl.hpp) and instantiated in attention_<arch>.cpp, each compiled
// with that architecture's flags only (as metrics_simd.hpp). attention_dispatch.cpp owns every
// allocation and check, so no std:: container code is ever compiled with AVX flags.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include <xsimd/xsimd.hpp>

#include "headsep/attention.hpp"
#include "kernels/metrics_simd.hpp"

namespace headsep::kernels {

/// Working memory of one attention_report call, carved by the dispatcher out of the scratch.
/// `f` is 64-byte aligned and holds attention_work_floats() floats, `d` attention_work_doubles().
struct AttentionWork {
  float* f = nullptr;
  double* d = nullptr;
  std::uint32_t tq = 0;  ///< query rows per tile (whole micro-kernel blocks, or 1 for a single query)
};

/// Widest vector any level uses, in floats: the dispatcher sizes buffers for it, so every level's
/// padded layout (n rounded up to its own width) fits.
inline constexpr std::size_t kAttnMaxLanes = 16;

/// Keys per panel of the transposed K (AK<A>::KP = 2 vectors at the level's width): K_h^T is
/// stored [key panel][d][KP], so a score micro-kernel streams one contiguous panel. The
/// dispatcher pads every head's keys to the widest level's panel.
inline constexpr std::size_t kAttnMaxKeyPanel = 2 * kAttnMaxLanes;

/// Query rows of one score / A·V micro-kernel at a vector width of `lanes` floats (AK<A>::MR:
/// 2 x MR accumulators fill 32 AVX-512 or 16 AVX2/SSE2 registers).
constexpr std::uint32_t attention_micro_rows(std::size_t lanes) noexcept { return lanes >= 16 ? 8 : 6; }

/// Query rows per tile for a report of n tokens and H+1 heads (all queries): the tile's (H+1)
/// score/probability rows stay within about kAttnTileBytes, a multiple of `block` (the level's
/// attention_micro_rows) from block to kAttnMaxTileRows. Whole blocks: a tile of 8 rows at MR = 6 ran its last 2
/// rows with 4 accumulators, too few to hide the FMA latency (whole blocks: the AVX2 kernel ~10 %
/// faster at 256²).
std::uint32_t attention_tile_rows(std::size_t n, std::uint32_t heads, std::uint32_t block) noexcept;
inline constexpr std::size_t kAttnTileBytes = std::size_t(128) << 10;
/// At most this many query rows per tile: the pair loop's f32 sums over a tile's rows stay short,
/// and its per-row buffers live on the stack.
inline constexpr std::size_t kAttnMaxTileRows = 32;

/// Floats and doubles of working memory attention_report needs for this report shape.
std::size_t attention_work_floats(const AttentionReport& in, std::uint32_t tq) noexcept;
std::size_t attention_work_doubles(const AttentionReport& in) noexcept;

/// The report's query rows: every token, or the one designated query (clamped).
/// Returns the number of query rows (0 for an empty report); *first = the first query's index.
std::size_t attention_query_rows(const AttentionReport& in, std::size_t* first) noexcept;

/// Small reports: n <= kAttnSmallN tokens, at most kAttnSmallHeads heads (baseline included) and
/// at most kAttnSmallFloats values per report in the lane kernel's working set go through
/// attention_kernel::small, a vector lane per report (attention_small decides).
inline constexpr std::size_t kAttnSmallN = 8;
inline constexpr std::size_t kAttnSmallHeads = 32;
inline constexpr std::size_t kAttnSmallFloats = 2048;
/// Floats per lane of the lane kernel's working set (its elements, as small() carves them).
std::size_t attention_small_floats(const AttentionReport& in) noexcept;
bool attention_small(const AttentionReport& in) noexcept;

/// Columns per panel of a packed projection matrix (pack_panels): a multiple of every level's
/// micro-kernel width (3 vectors: 48 floats on AVX-512, 24 on AVX2, 12 on SSE2).
inline constexpr std::size_t kPanel = 48;
/// Columns per slice of a panel: one 64-byte line of each k row. A panel is kPanel / kSlice
/// slices one after the other, each [K][kSlice]: a micro-kernel's columns lie in one slice (AVX2,
/// SSE2) or one vector per slice (AVX-512), so each vector's k stream is sequential.
inline constexpr std::size_t kSlice = 16;

/// Where pack_panels puts B[k][n] (K rows).
constexpr std::size_t panel_index(std::size_t K, std::size_t k, std::size_t n) noexcept {
  return n / kPanel * K * kPanel + n % kPanel / kSlice * K * kSlice + k * kSlice + n % kSlice;
}

/// B [K][N] row-major packed for project_rows: ceil(N / kPanel) panels of kPanel columns, each
/// K x kPanel floats in slices (panel_index), columns past N zero; then the bias (N values,
/// nullptr = 0), padded likewise. 64-byte aligned (the kernels load it aligned).
std::shared_ptr<const float> pack_panels(const float* b, std::size_t K, std::size_t N, const float* bias);

/// C[m][0, N) = bias + X[m]·B for rows m < M at `level` (B as pack_panels left it). Every element is
/// bias + Σ_k in k order, one FMA chain per element whatever M is or where the row sits: a row's
/// result never depends on the other rows of the call (grouping reports cannot change bits).
/// `next`: the matrix the caller multiplies by next (pack_panels' layout, K_next = next_k rows) or
/// nullptr; its first panel is prefetched into L2 while the last panel of this one runs.
/// `gelu`: C = GELU(bias + X·B) (kernels/gelu.hpp on the accumulators before they are stored).
void project_rows(SimdLevel level, const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                  std::size_t N, float* c, std::size_t ldc, const float* next = nullptr, std::size_t next_k = 0,
                  bool gelu = false);

/// AttentionPlan's projection backend: false = project_rows (default), true = OpenBLAS sgemm.
/// Only code switches it (no environment variable): the tests, and bench_attention, which times
/// both backends (run/ and run-blas/).
/// Process-wide; set it before plans run, not while they do.
void set_attention_gemm_blas(bool blas);

template <class Arch>
struct attention_kernel {
  void operator()(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) const;
  /// `count` <= lanes() reports of equal n that attention_small accepts, sharing heads, widths,
  /// columns, config and axes count (one plan's), one per lane. `f`: 64-byte aligned,
  /// attention_small_floats(*in[0]) * lanes() floats.
  void small(const AttentionReport* const* in, const AttentionReportOut* const* out, std::size_t count, float* f) const;
  static std::size_t lanes() noexcept;
  /// project_rows at this level.
  void project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
               const float* packed_bias, std::size_t N, float* c, std::size_t ldc, const float* next,
               std::size_t next_k, bool gelu) const;
  /// `rounds` rounds of independent FMA chains (enough to hide the FMA latency); returns a value
  /// that depends on every chain. Flops done: rounds * fma_chain_flops().
  float fma_chains(std::size_t rounds, float x) const;
  static std::size_t fma_chain_flops() noexcept;
};

extern template struct attention_kernel<xsimd::sse2>;
extern template struct attention_kernel<fma3_avx2>;
extern template struct attention_kernel<xsimd::avx512bw>;

}  // namespace headsep::kernels
