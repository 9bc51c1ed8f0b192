// The metric kernels over one batch (the pipeline's "kernels" step for per-token schemes): one
// scenario slot at a time in f64 or f32 (compute_slot), or every slot in one call (f64,
// compute_all_slots); the kernels themselves are in runtime/kernels/.
#include "engine/compute.hpp"

#include <algorithm>
#include <type_traits>

#include "headsep/error.hpp"

namespace headsep::engine {
namespace {

// Every report's length when they are all the same (KernelArgs::uniform_length), else 0.
std::uint32_t uniform_length(const ReportBatch& batch) {
  const std::size_t n = batch.n_reports();
  if (n == 0) return 0;
  const std::size_t len = batch.report_length(0);
  bool uniform = len > 0 && len < (1u << 31);
  for (std::size_t r = 1; uniform && r < n; ++r) uniform = batch.report_length(r) == len;
  return uniform ? static_cast<std::uint32_t>(len) : 0;
}

// The fields every metric kernel call over `batch` shares; axis_ptr (64 entries, the caller's) gets
// the axis rows.
template <class T>
KernelArgs<T> batch_args(const ReportBatch& batch, const std::vector<std::vector<T>>& axis, const T** axis_ptr,
                         std::uint32_t heads, const T* const* weight, bool& nonfinite) {
  if (axis.size() > 64) throw Error("at most 64 context axes are supported");
  for (std::size_t c = 0; c < axis.size(); ++c) axis_ptr[c] = axis[c].data();
  KernelArgs<T> a;
  a.n_reports = batch.n_reports();
  a.token_offset = batch.token_offset.data();
  a.axes = static_cast<std::uint32_t>(axis.size());
  a.heads = heads;
  a.axis = axis_ptr;
  a.weight = weight;
  a.stride = a.n_reports;
  a.uniform_length = uniform_length(batch);
  a.nonfinite = &nonfinite;
  return a;
}

}  // namespace

template <class T>
void compute_slot(Work& w, const std::vector<std::vector<T>>& axis, SimdLevel level, MetricBlock& out,
                  const MetricBlock* baseline, bool& nonfinite) {
  const ReportBatch& batch = w.batch;
  const std::size_t n = batch.n_reports();
  const WeightBlock& wb = w.weights;
  out.resize(wb.heads, static_cast<std::uint32_t>(axis.size()), n);
  const T* axis_ptr[64];
  std::vector<const T*> weight_ptr;
  if constexpr (std::is_same_v<T, double>) {
    for (const auto& r : wb.rows) weight_ptr.push_back(r.data());
  } else {
    w.w32.resize(wb.rows.size());
    for (std::size_t h = 0; h < wb.rows.size(); ++h) {
      w.w32[h].assign(wb.rows[h].begin(), wb.rows[h].end());
      weight_ptr.push_back(w.w32[h].data());
    }
  }
  KernelArgs<T> a = batch_args(batch, axis, axis_ptr, wb.heads, weight_ptr.data(), nonfinite);
  if constexpr (std::is_same_v<T, double>) {
    if (baseline) {  // context rows h = 0 come first: axes x n values
      std::copy(baseline->context.begin(), baseline->context.begin() + std::ptrdiff_t(axis.size() * n), out.context.begin());
      a.baseline_given = true;
    }
    a.context = out.context.data();
    a.difference = out.difference.data();
    a.pairwise = out.pairwise.data();
    a.separation = out.separation.data();
    compute_metrics(a, level);
  } else {
    const std::size_t nc = out.context.size(), nd = out.difference.size(), np = out.pairwise.size();
    w.out32.resize(nc + nd + np + n);
    float* base = w.out32.data();
    a.context = base, a.difference = base + nc, a.pairwise = base + nc + nd, a.separation = base + nc + nd + np;
    compute_metrics(a, level);
    std::copy(base, base + nc, out.context.begin());
    std::copy(base + nc, base + nc + nd, out.difference.begin());
    std::copy(base + nc + nd, base + nc + nd + np, out.pairwise.begin());
    std::copy(base + nc + nd + np, base + nc + nd + np + n, out.separation.begin());
  }
}

template void compute_slot<double>(Work&, const std::vector<std::vector<double>>&, SimdLevel, MetricBlock&,
                                   const MetricBlock*, bool&);
template void compute_slot<float>(Work&, const std::vector<std::vector<float>>&, SimdLevel, MetricBlock&,
                                  const MetricBlock*, bool&);

void compute_all_slots(Work& w, const std::vector<std::vector<double>>& axis, SimdLevel level,
                       std::vector<MetricBlock>& out, bool shared_baseline, bool& nonfinite) {
  const ReportBatch& batch = w.batch;
  const std::size_t n = batch.n_reports();
  const WeightBlock& wb = w.weights;
  const double* axis_ptr[64];
  std::vector<const double*> weight_ptr;
  weight_ptr.reserve(wb.rows.size());
  for (const auto& r : wb.rows) weight_ptr.push_back(r.empty() ? wb.rows[0].data() : r.data());  // (a shared baseline row: not read)
  std::vector<SlotOut<double>> more;
  for (std::size_t s = 0; s < wb.slots; ++s) {
    out[s].resize(wb.heads, static_cast<std::uint32_t>(axis.size()), n);
    if (s) more.push_back({out[s].context.data(), out[s].difference.data(), out[s].pairwise.data(), out[s].separation.data()});
  }
  KernelArgs<double> a = batch_args(batch, axis, axis_ptr, wb.heads, weight_ptr.data(), nonfinite);
  a.context = out[0].context.data();
  a.difference = out[0].difference.data();
  a.pairwise = out[0].pairwise.data();
  a.separation = out[0].separation.data();
  a.slots = wb.slots;
  a.more = more.data();
  a.shared_baseline = shared_baseline;
  compute_metrics(a, level);
}

}  // namespace headsep::engine
