// Private: the engine's attention stage — one scenario of a batch through a QKV scheme
// (AttentionPlan: projections, softmax, A·V, metrics in the dispatched kernels) or through
// explicit attention maps a per-query scheme gives (metrics from the maps), into a MetricBlock.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"

namespace headsep {

/// Per-Work scratch, reused across batches.
struct AttentionStageScratch {
  std::vector<float> x;                 // X from feature columns, [token][F]
  std::vector<const float*> axis;       // axis row pointers
  AttentionScratch kernel;
  std::vector<std::uint64_t> offsets;   // dumps: maps / output offsets
  std::vector<AttentionScratch> parts;  // one per part of a batch split across threads
  std::vector<std::size_t> cuts;        // the parts' first reports, then n_reports
};

/// Computes scenario `slot` of `batch` with an attention scheme into `out` (contexts, head and
/// pair statistics, then differences, pairwise distances and separation). Selected reports'
/// maps go to `dump` when it is not null. Throws Error naming `label`, the report and scenario
/// on bad input (X width, invalid maps).
void attention_slot(const ReportBatch& batch, const Weighting& weighting, std::uint32_t slot,
                    const std::vector<std::vector<float>>& axis32, SimdLevel level, const std::string& scenario,
                    const std::string& label, WeightBlock& weights, AttentionStageScratch& scratch, MetricBlock& out,
                    const RunOptions& options, AttentionDump* dump);

/// Differences from single, pairwise distances and separation from the contexts already in `m`,
/// with the scalar reference's arithmetic (metrics_scalar.hpp).
void derive_separation(MetricBlock& m);

}  // namespace headsep
