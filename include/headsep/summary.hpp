// headsep — per-scenario aggregates over a whole run, in one streaming pass.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/run.hpp"
#include "headsep/stats.hpp"

namespace headsep {

struct SummaryOptions {
  std::size_t top_k = 10;             ///< reports with the largest head_separation, per scenario
  std::size_t histogram_bins = 20;    ///< equal-width bins of head_separation between min and max
  double relative_accuracy = 0.005;   ///< quantile sketch accuracy once a scenario exceeds 4096 reports
  SimdLevel simd = SimdLevel::scalar;  ///< the sketches' bucket arithmetic (the run's level; same result at each)
};

/// Count, mean, standard deviation, min, max, quantiles (p01, p10, p50, p90, p99) of
/// head_separation, of every difference_from_single component and, for attention schemes, of
/// every head statistic (heads 0..N) and pair statistic (attention.hpp), a histogram of
/// head_separation and the top-k reports, per scenario.
///
/// Determinism: sketches and top-k are filled per batch on worker threads and merged exactly
/// (bucket counts, a total order on (value, report index)); moments are accumulated in report
/// order in the serial stage (headsep::Moments: cheap, and independent of chunking and threads).
/// Past a scenario's first 4096 reports the buckets stay on the thread that filled them (one
/// sketch per thread, scenario and metric) and only each batch's count and extremes go through
/// the serial stage; the readers (json, table, scenarios) first gather the threads' buckets. A
/// fresh sketch per batch, grown and merged serially, was a third of the main job's sink time.
/// Readers and consume() run on one thread at a time, after prepare() of the batches they read.
class Summary final : public ResultSink {
 public:
  Summary(RunInfo info, SummaryOptions options = {});
  ~Summary() override;
  void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const override;
  void consume(const BatchResult& result, SinkPartial* partial) override;

  /// The summary as JSON text (stable key order; no timings, so runs compare byte for byte).
  std::string json() const;
  /// A readable table of head_separation per scenario for the terminal.
  std::string table() const;
  std::uint64_t groups() const noexcept;

  /// Read access for the report module (runtime/report): scenarios in order of first appearance,
  /// metrics in metric_names() order ([0] head_separation, then difference components, then the
  /// attention statistics).
  struct Metric {
    std::string name;
    Moments moments;  // stats.hpp: shifted sums, added row by row in report order
    QuantileSketch sketch;
  };
  struct Scenario {
    std::string name;
    std::uint64_t count = 0;
    std::vector<Metric> metrics;  // [0] head_separation, then diff components
    TopK top;
    std::unordered_map<std::uint64_t, std::string> top_ids;
  };
  const std::vector<Scenario>& scenarios() const { return gathered(); }
  const RunInfo& info() const noexcept { return info_; }
  const SummaryOptions& options() const noexcept { return opt_; }
  std::vector<std::string> metric_names() const;

 private:
  Scenario& scenario(const std::string& name);
  /// scenarios_ with every thread's pending buckets merged in (and those emptied).
  const std::vector<Scenario>& gathered() const;

  struct Pending;  // summary.cpp: the per-thread bucket sketches
  RunInfo info_;
  SummaryOptions opt_;
  std::size_t metric_count_ = 0;  // metric_names().size(), fixed by info_
  mutable std::vector<Scenario> scenarios_;  // mutable: gathered() merges the threads' buckets in
  std::unique_ptr<Pending> pending_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::size_t> consumed_;  // consume()'s scratch: the batch's scenarios (indices),
  std::vector<Moments*> moments_;      // their accumulators
  std::vector<const double*> rows_;    // ... and metric rows
};

}  // namespace headsep
