// Private: the engine pipeline's parts (run.cpp draws the pipeline and composes them): a batch in
// flight (Work), what run() fixes before the first batch (RunPlan), and Pipeline, whose member
// functions are the stages in the order a batch meets them (stages.cpp).
#pragma once
#include <atomic>
#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>
#include <oneapi/tbb/parallel_pipeline.h>

#include "attention/stage.hpp"
#include "support/progress.hpp"
#include "headsep/run.hpp"
#include "profile/stage_timer.hpp"
#include "support/token_pool.hpp"

namespace headsep::engine {

// Everything one batch needs, recycled through a pool so the steady state allocates little.
struct Work {
  std::uint64_t index = 0;
  ReportBatch batch;
  std::vector<std::vector<double>> axis64;
  std::vector<std::vector<float>> axis32, w32;
  std::vector<float> out32;
  WeightBlock weights;
  AttentionStageScratch attention;
  std::vector<std::string> names;  // scenario names per slot, copied while the source is not running
  BatchResult result;
  std::vector<std::unique_ptr<SinkPartial>> partials;
  // A stage's failure on this batch, raised by the output stage in batch order, so the error a run
  // reports is the first bad batch's whatever the thread count and timing.
  std::exception_ptr error;
  bool remote = false;  // computed by another process (RunOptions::exchange): only sinks' prepare is left
};

// Batches in flight, owned here (token_pool.hpp says why raw pointers).
using WorkPool = detail::TokenPool<Work>;

// What run() fixes before the first batch (plan_run, run.cpp).
struct RunPlan {
  unsigned threads = 1;
  std::size_t in_flight = 2;       // batches alive at once
  std::vector<std::string> own;    // the scheme's own scenario names; empty: the data's
  std::string label;               // the weighting's label, for error messages
  bool random_access = false;      // the source generates chunk i on any thread (fill)
  bool attention_scheme = false;
  bool shared_baseline = false;    // baseline row and contexts from slot 0
  bool all_slots = false;          // every slot in one weights() call and one kernel call
  std::size_t chunk = 1;           // reports per batch (random access: chunk i is [i*chunk, ...))
  std::uint64_t total_hint = 0;    // reports the source declares (0: unknown)
  std::uint64_t max_chunks = UINT64_MAX;
};

RunPlan plan_run(unsigned threads, ReportSource& source, const Weighting& weighting, const AxisMap& axes,
                 const RunOptions& opt);

// One run's pipeline. input(), compute() and output() are the bodies of the three filters
// (serial in order, parallel, serial in order); the private members below them are their steps,
// in the order a batch meets them. Scale-out (ChunkExchange) is called in read() and
// end_of_stream(); the profiler in begin_profile(), each stage's StageTimer and end_profile().
class Pipeline {
 public:
  Pipeline(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
           const std::vector<ResultSink*>& sinks, const RunPlan& plan);

  void begin_profile();  // --profile: the run's setup (runtime/profile/)
  Work* input(oneapi::tbb::flow_control& fc);
  Work* compute(Work* w);
  void output(Work* w);
  void joined();          // parallel_pipeline returned or threw: every stage's work is visible
  void end_of_stream();   // the progress line ends; the exchange's end marks; the declared count
  const RunStats& stats() const { return stats_; }
  void end_profile(const RunStats& stats);

 private:
  // serial input stage
  Work* take_next(oneapi::tbb::flow_control& fc);
  bool read(Work& w);
  void resolve_names(Work& w);
  // parallel stage
  void compute_batch(Work& w);
  bool generate(Work& w, prof::StageTimer& timer);
  bool project_axes(Work& w);
  void weigh_and_compute_all(Work& w, prof::StageTimer& timer);
  void weigh_and_compute(Work& w, std::size_t slot, prof::StageTimer& timer);
  void attention(Work& w, std::size_t slot, bool& projected32, prof::StageTimer& timer);
  void prepare_sinks(Work& w, prof::StageTimer& timer);
  // serial output stage
  void consume(Work& w);
  void deliver(Work& w);

  ReportSource& source_;
  const Weighting& weighting_;
  const AxisMap& axes_;
  const RunOptions& opt_;
  const std::vector<ResultSink*>& sinks_;
  const RunPlan& plan_;
  Profiler* const profiler_;        // --profile: stage clocks per thread; null: each hook is a branch
  ChunkExchange* const exchange_;   // scale-out (runtime/dist/): null when alone
  const bool merger_;

  WorkPool pool_;
  RunStats stats_;
  detail::Progress progress_;
  std::uint64_t next_index_ = 0;
  std::atomic<bool> exhausted_{false};  // set by the output stage for random-access sources
  bool input_failed_ = false;
  bool past_end_ = false;
  // ThreadSanitizer order tokens (addresses only): the input stage's and the output stage's
  // invocations, and everything any stage did (for run() after the pipeline).
  const char input_order_ = 0, output_order_ = 0, all_stages_ = 0;
};

}  // namespace headsep::engine
