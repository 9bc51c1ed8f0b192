// headsep — the metric kernels: contexts, differences from single, head separation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headsep {

/// Instruction-set levels, lowest first. `scalar` is the plain reference every level is tested against.
enum class SimdLevel : std::uint8_t { scalar, sse2, avx2, avx512 };

std::string_view to_string(SimdLevel level) noexcept;
/// Parses "scalar", "sse2", "avx2", "avx512"; throws UsageError otherwise.
SimdLevel parse_simd_level(std::string_view name);
/// Levels built into this binary, lowest first.
std::vector<SimdLevel> compiled_levels();
/// Levels this CPU can run, lowest first.
std::vector<SimdLevel> supported_levels();
/// The level used when none is forced: HEADSEP_SIMD if set (must be supported), else the best supported.
SimdLevel default_level();

/// One scenario's inputs and outputs over a batch of reports, structure of arrays.
/// Report r owns tokens [token_offset[r], token_offset[r+1]) of every `axis` and `weight` row.
/// Outputs are rows of `stride` elements (stride >= n_reports), laid out as MetricBlock:
/// context[(h*axes + c)*stride + r], difference[((h-1)*axes + c)*stride + r],
/// pairwise[p*stride + r], separation[r].
template <class T>
struct KernelArgs {
  std::size_t n_reports = 0;
  const std::uint64_t* token_offset = nullptr;
  std::uint32_t uniform_length = 0;  ///< > 0 when every report has this many tokens (enables lanes across reports)
  std::uint32_t axes = 0, heads = 0;
  const T* const* axis = nullptr;    ///< [axes] -> token
  const T* const* weight = nullptr;  ///< [heads + 1] -> token, row 0 = single-head baseline
  T* context = nullptr;
  T* difference = nullptr;
  T* pairwise = nullptr;
  T* separation = nullptr;
  std::size_t stride = 0;
  /// The context rows of h = 0 already hold the baseline's contexts (computed for an earlier
  /// slot of the same batch: Weighting::shared_baseline): they are read, not computed again.
  bool baseline_given = false;
};

/// Computes the metrics at the given level. In f64 every level gives bit-identical results
/// (no FMA contraction, tokens summed in order per report); f32 levels agree to ~1e-6 relative.
void compute_metrics(const KernelArgs<double>& args, SimdLevel level);
void compute_metrics(const KernelArgs<float>& args, SimdLevel level);

}  // namespace headsep
