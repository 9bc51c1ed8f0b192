// Private: the fused attention kernel, written once as a function object templated on the xsimd
// architecture (attention_simd_impl.hpp) and instantiated in attention_<arch>.cpp, each compiled
// with that architecture's flags only (as metrics_simd.hpp). attention_dispatch.cpp owns every
// allocation and check, so no std:: container code is ever compiled with AVX flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "headsep/attention.hpp"
#include "metrics_simd.hpp"

namespace headsep::kernels {

/// Working memory of one attention_report call, carved by the dispatcher out of the scratch.
/// `f` is 64-byte aligned and holds attention_work_floats() floats, `d` attention_work_doubles().
struct AttentionWork {
  float* f = nullptr;
  double* d = nullptr;
  std::uint32_t tq = 0;  ///< query rows per tile (a multiple of 8, or 1 for a single query)
};

/// Widest vector any level uses, in floats: the dispatcher sizes buffers for it, so every level's
/// padded layout (n rounded up to its own width) fits.
inline constexpr std::size_t kAttnMaxLanes = 16;

/// Query rows per tile for a report of n tokens and H+1 heads (all queries): the tile's (H+1)
/// score/probability rows stay within about kAttnTileBytes, between 8 and 32 rows.
std::uint32_t attention_tile_rows(std::size_t n, std::uint32_t heads) noexcept;
inline constexpr std::size_t kAttnTileBytes = std::size_t(128) << 10;

/// Floats and doubles of working memory attention_report needs for this report shape.
std::size_t attention_work_floats(const AttentionReport& in, std::uint32_t tq) noexcept;
std::size_t attention_work_doubles(const AttentionReport& in) noexcept;

/// The report's query rows: every token, or the one designated query (clamped).
/// Returns the number of query rows (0 for an empty report); *first = the first query's index.
std::size_t attention_query_rows(const AttentionReport& in, std::size_t* first) noexcept;

template <class Arch>
struct attention_kernel {
  void operator()(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) const;
  /// `rounds` rounds of independent FMA chains (enough to hide the FMA latency); returns a value
  /// that depends on every chain. Flops done: rounds * fma_chain_flops().
  float fma_chains(std::size_t rounds, float x) const;
  static std::size_t fma_chain_flops() noexcept;
};

extern template struct attention_kernel<xsimd::sse2>;
extern template struct attention_kernel<fma3_avx2>;
extern template struct attention_kernel<xsimd::avx512bw>;

}  // namespace headsep::kernels
