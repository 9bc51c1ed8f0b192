// Private: the metric kernels over one batch's scenario slots (compute.cpp).
#pragma once
#include <vector>

#include "engine/pipeline.hpp"

namespace headsep::engine {

// Slot results of `w` (its batch and weights) into `out`, T = double or float (the f32 kernels,
// results widened to double). `baseline`: an earlier slot of this batch whose baseline contexts
// this slot shares (f64 only: the f32 kernels recompute them), else nullptr. Sets `nonfinite`
// when some context or separation is not finite (KernelArgs::nonfinite; check_results then
// names the report).
template <class T>
void compute_slot(Work& w, const std::vector<std::vector<T>>& axis, SimdLevel level, MetricBlock& out,
                  const MetricBlock* baseline, bool& nonfinite);

// Every slot of a batch in one kernel call (f64; Weighting::all_slots): the axes are read once
// for all slots; each slot's metrics are bit-identical to compute_slot's.
void compute_all_slots(Work& w, const std::vector<std::vector<double>>& axis, SimdLevel level,
                       std::vector<MetricBlock>& out, bool shared_baseline, bool& nonfinite);

}  // namespace headsep::engine
