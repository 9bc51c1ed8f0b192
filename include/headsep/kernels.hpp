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
/// Where one scenario slot's metrics go (the layout of KernelArgs' outputs).
template <class T>
struct SlotOut {
  T* context = nullptr;
  T* difference = nullptr;
  T* pairwise = nullptr;
  T* separation = nullptr;
};

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
  /// Several scenario slots of one batch in one pass, so the axes (and the kernel's token
  /// indices) are read once for all of them: slot s = 1..slots-1 reads the weight rows
  /// weight[s*(heads+1) ..] and writes through more[s-1]; each slot's results are bit-identical to
  /// a separate call for it. With shared_baseline, slots s >= 1 take slot 0's baseline contexts
  /// (their weight row 0 is not read).
  std::uint32_t slots = 1;
  const SlotOut<T>* more = nullptr;  ///< [slots - 1]
  bool shared_baseline = false;
  /// When set, the kernel stores true here if some context or separation it wrote (any slot) is
  /// not finite, and leaves it alone otherwise: the engine's result check then scans only batches
  /// that have one (to name the report).
  bool* nonfinite = nullptr;
};

/// Slot s of a multi-slot call as a call of its own (slots = 1). For s >= 1 with
/// shared_baseline, its baseline context rows must first hold slot 0's (copy_baseline).
/// `Tag`: the SIMD kernels instantiate these with their architecture, so an object file compiled
/// with AVX flags never provides the copy the baseline build links (one definition per flag set).
template <class T, class Tag = void>
KernelArgs<T> slot_args(const KernelArgs<T>& a, std::uint32_t s) noexcept {
  KernelArgs<T> o = a;
  o.slots = 1, o.more = nullptr, o.shared_baseline = false;
  if (s == 0) return o;
  o.weight = a.weight + std::size_t(s) * (std::size_t(a.heads) + 1);
  const SlotOut<T>& m = a.more[s - 1];
  o.context = m.context, o.difference = m.difference, o.pairwise = m.pairwise, o.separation = m.separation;
  o.baseline_given = a.shared_baseline;
  return o;
}

/// Copies slot 0's baseline contexts (rows h = 0) of reports [r0, r1) into `to`'s.
template <class T, class Tag = void>
void copy_baseline(const KernelArgs<T>& from, const KernelArgs<T>& to, std::size_t r0, std::size_t r1) noexcept {
  for (std::size_t c = 0; c < from.axes; ++c)
    for (std::size_t r = r0; r < r1; ++r) to.context[c * to.stride + r] = from.context[c * from.stride + r];
}

/// Computes the metrics at the given level. In f64 every level gives bit-identical results
/// (no FMA contraction, tokens summed in order per report); f32 levels agree to ~1e-6 relative.
void compute_metrics(const KernelArgs<double>& args, SimdLevel level);
void compute_metrics(const KernelArgs<float>& args, SimdLevel level);

}  // namespace headsep
