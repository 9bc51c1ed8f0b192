// axis-focus: the weights kernel's interface — one call's inputs (Ctx) and the kernel for the
// CPU, chosen once (weights_kernel.cpp holds the kernel and says why it looks the way it does).
#pragma once
#include <cstdint>

namespace axis_focus {

constexpr std::uint32_t kMaxLane = 16;  // longest report on the lane path
constexpr std::uint32_t kMaxUsed = 8;   // distinct feature columns the axes may read (lane path)
constexpr std::uint32_t kMaxAxes = 8;   // axes (lane path)
constexpr std::uint32_t kMaxRows = 17;  // baseline + heads, of one design or of all at once (lane path)

// What one weights() call needs, gathered once per call (no allocation).
struct Ctx {
  std::uint32_t n_used = 0, n_axes = 0, rows = 0;
  const double* feat[kMaxUsed] = {};   // the columns read, by slot
  const std::uint32_t* term_begin = nullptr;  // [n_axes + 1] into term_slot / term_k
  const std::uint32_t* term_slot = nullptr;
  const double* term_k = nullptr;
  double inv_axes = 1.0;               // 1 / n_axes
  const std::uint32_t* src = nullptr;  // [rows]: the axis row r reads (n_axes = the mean)
  const double* sharp = nullptr;       // [rows]
  double* const* out = nullptr;        // [rows]
  const double* const* columns = nullptr;  // all feature columns (per-report path)
  const std::uint32_t* used = nullptr;     // [n_used] feature index of each slot
};

/// Rows c.out[0..c.rows) for the reports [off[r], off[r+1]), r < R; `lanes`: reports of up to
/// kMaxLane tokens may go several per vector (the features, axes and rows fit the lane limits).
using Kernel = void (*)(const Ctx& c, const std::uint64_t* off, std::uint64_t R, bool lanes);

/// The kernel for this CPU: AVX-512 (8 reports per vector), AVX2 (4) or the generic code.
/// HEADSEP_SIMD (as for the engine's kernels) caps the level, so tests can hold every path to
/// the same bits: scalar/sse2 -> the generic code, avx2 -> 4 reports per vector.
Kernel select_kernel();

}  // namespace axis_focus
