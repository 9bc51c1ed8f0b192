// Private: one batch of reports through the model — run_model's parallel stage (model_run.cpp).
// Token ids and axes, the BERT forward with every head measured into one MetricBlock per layer
// (the sinks' rows), the kept reports' maps, and the batch's sums, top reports and their maps,
// which the pipeline's serial stage merges in batch order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headsep/model_run.hpp"
#include "profile/stage_timer.hpp"

namespace headsep {

/// What one batch adds to its scenario (ModelSummary::Scenario's fields, for this batch only).
struct BatchSums {
  std::uint64_t reports = 0, tokens = 0;
  std::uint64_t empty = 0, truncated = 0;  // reports by text_status (ModelSummary::Scenario)
  std::uint64_t without_value = 0;         // tokens 0 on every axis (tokens_without_axis_value)
  std::vector<double> head, ctx, pair, dist;
  double flops = 0;
  std::vector<QuantileSketch> entropy, separation;  // the batch's distributions (ModelSummary::Scenario)
  TopK top{0};
  std::vector<std::pair<std::uint64_t, std::string>> top_ids;
  std::vector<ModelMap> maps;  // of the batch's top (keep_maps)
};

/// Per-thread buffers, reused across batches.
struct BatchScratch {
  ModelScratch bert;
  std::vector<std::uint32_t> ids;
  std::vector<std::vector<float>> axis32;
  std::vector<const float*> axis_ptr;
  std::vector<AttentionOut> outs;
  double no_pairs = 0;  // pair_stats of a one-head model (never written)
  std::vector<double> sep, report_sep;  // per head and report; per report
  std::vector<std::vector<float>> maps;  // one report's maps per layer (keep_maps)
};

/// The model, axes and options of one run_model call, applied to a batch at a time. measure()
/// may run on several threads at once: it reads only these and writes only its arguments.
class ModelBatch {
 public:
  /// `id_col`: the batch's feature column of token ids; `status_col` its text_status column
  /// (0, 1 truncated, 2 empty; the text generators'), or kNone.
  static constexpr std::size_t kNone = ~std::size_t(0);
  ModelBatch(const Architecture& model, const AxisMap& axes, const ModelRunOptions& opt, std::size_t id_col,
             std::size_t status_col = kNone);

  /// `res` (per layer a MetricBlock, the token ids, the dumps of ModelRunOptions::dump_reports)
  /// and `sums` from batch `b`, in this order: token ids, axes, forward, the rows' differences and
  /// separations, head sums, top reports (their maps), dumps. Throws Error naming the report on bad
  /// input. The timer moves from the axes to the forward to the head metrics.
  void measure(const ReportBatch& b, BatchScratch& s, BatchResult& res, BatchSums& sums, prof::StageTimer& timer) const;
  /// `sums` from a batch another process measured (its `res.metrics`): the same bytes measure()
  /// gives. Refused with keep_maps (the top maps need the batch's own forward).
  void sums_of(const ReportBatch& b, const BatchResult& res, BatchScratch& s, BatchSums& sums,
               prof::StageTimer& timer) const;

 private:
  void token_ids(const ReportBatch& b, BatchScratch& s) const;
  void check_lengths(const ReportBatch& b) const;
  void report_status(const ReportBatch& b, BatchResult& res) const;
  void text_status(const ReportBatch& b, const BatchResult& res, BatchSums& sums) const;
  void project_axes(const ReportBatch& b, BatchScratch& s) const;
  std::uint64_t without_value(const ReportBatch& b, const BatchScratch& s) const;
  void prepare_outputs(const ReportBatch& b, BatchScratch& s, BatchResult& res) const;
  void separations(std::vector<MetricBlock>& metrics) const;
  void head_sums(const ReportBatch& b, const std::vector<MetricBlock>& metrics, BatchScratch& s, BatchSums& m) const;
  void top_reports(const ReportBatch& b, BatchScratch& s, BatchSums& m, prof::StageTimer& timer) const;
  void report_forward(const ReportBatch& b, std::size_t r, BatchScratch& s, prof::StageTimer& timer) const;
  ModelMap report_maps(const ReportBatch& b, std::size_t r, std::uint64_t index, double separation, BatchScratch& s,
                       prof::StageTimer& timer) const;
  void dumps(const ReportBatch& b, BatchScratch& s, BatchResult& res, prof::StageTimer& timer) const;

  const Architecture& model_;
  const AxisMap& axes_;
  const ModelRunOptions& opt_;
  const ModelShape& cfg_;
  const std::size_t id_col_, status_col_;
  const std::size_t L, H, H1, P, C;  // layers, heads, heads + baseline, head pairs, axes
  const std::size_t CF, CS, CD;      // axes from features (AxisMap), semantic, direction (C = CF + CS + CD)
  const DirectionAxes directions_;
  std::vector<bool> dump_layer_;     // [l]: layer l's maps go to the dumps
};

}  // namespace headsep
