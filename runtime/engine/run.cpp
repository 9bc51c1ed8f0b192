// The engine pipeline (oneTBB parallel_pipeline; [Pipeline's member functions, stages.cpp]):
//   serial in order : take the next batch (sequential sources generate it here; random-access
//                     sources only get an index, and generate in the parallel stage) [take_next, read]
//   parallel        : generate (random access) [generate], project axes [project_axes], per
//                     scenario either weight, validate and run the metric kernels
//                     [weigh_and_compute, or weigh_and_compute_all for every slot at once], or run
//                     the attention stage (QKV projections, fused softmax/A·V/metrics kernels; or
//                     explicit maps) [attention], let sinks prepare (format rows, fill per-chunk
//                     sketches) [prepare_sinks]
//   serial in order : sinks consume (merge, write) — batch order, never thread order [consume, deliver]
// At most `in_flight` batches exist at once, so memory is bounded by chunk size x in_flight; the
// chunk shrinks when heads make a report's metrics large (pairs grow as heads^2, docs/LIMITS.md),
// and a stage that runs out of memory names its batch instead of a bare std::bad_alloc.
// ThreadSanitizer builds annotate the order oneTBB guarantees (tsan_order.hpp).
// Here: what is fixed before the first batch (plan_run) and run(), which composes the stages.
// Weight and result checks are in validate.cpp, the metric kernel calls in compute.cpp, the
// attention stage in runtime/attention/. Scale-out (ChunkExchange, runtime/dist/) is called in
// read() and end_of_stream(), --profile in begin_profile(), each stage's StageTimer, end_profile().
#include "headsep/run.hpp"

#include <algorithm>
#include <chrono>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>

#include "engine/pipeline.hpp"
#include "headsep/attention.hpp"
#include "support/tsan_order.hpp"

namespace headsep {
namespace engine {
namespace {

// ThreadSanitizer: released by run() once the filters exist; acquired first thing by every stage
// invocation, before it reads its lambda's capture (a namespace-scope token needs none). Address only.
const char pipeline_built = 0;

// Metric memory of one batch, bounded: a (report, scenario) group holds (2N+1)·C contexts and
// differences, N(N-1)/2 pairwise separations and, for attention schemes, 5 statistics per head
// and per pair; sinks add formatted rows and sketches on top. ~48 bytes per value covers the
// double, its text in two writers and a sketch entry. With few heads the requested chunk fits
// (3 heads, 2 axes, 3 scenarios: 25 000 reports); with 1024 heads a batch holds a few reports.
constexpr std::size_t kBatchMetricBudget = std::size_t(64) << 20;
constexpr std::size_t kBytesPerValue = 48;
// Token data of one batch (features, axes, weights, embeddings), bounded the same way for
// random-access sources, whose chunk is fixed before the run: ops-reports at 65 536 tokens per
// report gets ~28 reports per batch instead of 8192 (37 GB). Sequential sources bound their
// batches themselves (the CSV source: 2^20 tokens).
constexpr double kBatchTokenBudget = double(std::size_t(128) << 20);
// Without --chunk, a random-access batch's token data is kept near this (RunOptions::
// chunk_fits_cache): the stages hand a batch on while it is still in L2. The main job (4.5 tokens,
// 3 features, 2 axes, 3 designs x 3 weight rows: ~500 B a report) went from 8192 reports (4 MB)
// to ~2100: 2 threads 9-19 % faster (best / median of 6), 1 thread within the noise (Zen 4,
// docs/PERFORMANCE.md).
constexpr double kBatchCacheBytes = double(std::size_t(1) << 20);
// An attention scheme's batches are kept near this instead: a report costs milliseconds there, so
// per-batch costs never show, while one batch of all 256 reports at 256 tokens x 256 wide (64 MB of
// embeddings) spent 25 ms of a 0.76 s run faulting in fresh pages that batches of a few MB reuse
// (`run --weighting qkv`, 1 and 2 threads ~6 % faster; 2048 x 64 x 64 x 4 at 1 thread ~10 %;
// 3, 4.5 and 6 MB alike within the noise; Zen 4, docs/PERFORMANCE.md).
constexpr double kAttentionBatchBytes = double(std::size_t(6) << 20);
constexpr std::size_t kMinCacheChunk = 1024;  // below it, per-batch costs (dispatch, sink merges) show

std::size_t bounded_chunk(std::size_t chunk, std::uint32_t heads, std::size_t axes, std::size_t slots, bool attention) {
  const std::size_t h = heads, pairs = pair_count(h);
  std::size_t values = (2 * h + 1) * axes + pairs + 1;
  if (attention) values += (h + 1) * kHeadStats + pairs * kPairStats;
  const std::size_t per_report = values * kBytesPerValue * std::max<std::size_t>(slots, 1);
  return std::max<std::size_t>(1, std::min(chunk, kBatchMetricBudget / per_report));
}

// Reports per batch: the requested chunk, bounded by metric memory and, for random-access
// sources, by token memory (sampled from the first reports).
std::size_t batch_chunk(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
                        const RunPlan& plan) {
  // Scenario slots are the scheme's own, else those the source knows up front (at least 1).
  const std::size_t slots = std::max<std::size_t>(
      1, plan.own.empty() ? source.schema().scenario_names.size() : plan.own.size());
  std::size_t chunk = bounded_chunk(opt.chunk_reports ? opt.chunk_reports : 1, weighting.heads(), axes.names().size(),
                                    slots, plan.attention_scheme);
  if (plan.random_access && chunk > 1) {
    // fill() is pure, so the first reports can be sampled for their length before the run.
    ReportBatch probe;
    if (source.fill(0, std::min<std::size_t>(chunk, 64), probe) && probe.n_reports() > 0) {
      const double tokens = double(probe.n_tokens()) / double(probe.n_reports());
      const double bytes = 8.0 * double(probe.features.size() + axes.names().size() + weighting.heads() + 1) +
                           4.0 * double(source.schema().d_model);
      chunk = std::max<std::size_t>(1, static_cast<std::size_t>(std::min(double(chunk), kBatchTokenBudget / std::max(1.0, tokens * bytes))));
      if (opt.chunk_fits_cache && plan.attention_scheme) {
        chunk = std::min(chunk, std::max<std::size_t>(1, static_cast<std::size_t>(kAttentionBatchBytes / std::max(1.0, tokens * bytes))));
      } else if (opt.chunk_fits_cache) {
        const double cached = 8.0 * double(probe.features.size() + axes.names().size() + slots * (weighting.heads() + 1));
        const auto fit = static_cast<std::size_t>(kBatchCacheBytes / std::max(1.0, tokens * cached));
        chunk = std::min(chunk, std::max(kMinCacheChunk, fit));
      }
    }
  }
  return chunk;
}

// The three filters over `p`, run with at most `in_flight` batches alive.
void run_filters(Pipeline& p, std::size_t in_flight) {
  auto input = [&p](oneapi::tbb::flow_control& fc) {
    tsan::acquire(&pipeline_built);
    return p.input(fc);
  };
  auto compute = [&p](Work* w) {
    tsan::acquire(&pipeline_built);
    return p.compute(w);
  };
  auto output = [&p](Work* w) {
    tsan::acquire(&pipeline_built);
    p.output(w);
  };
  const auto filters =
      oneapi::tbb::make_filter<void, Work*>(oneapi::tbb::filter_mode::serial_in_order, input) &
      oneapi::tbb::make_filter<Work*, Work*>(oneapi::tbb::filter_mode::parallel, compute) &
      oneapi::tbb::make_filter<Work*, void>(oneapi::tbb::filter_mode::serial_in_order, output);
  tsan::release(&pipeline_built);
  try {
    oneapi::tbb::parallel_pipeline(in_flight, filters);
  } catch (...) {
    p.joined();
    throw;
  }
  p.joined();
}

}  // namespace

RunPlan plan_run(unsigned threads, ReportSource& source, const Weighting& weighting, const AxisMap& axes,
                 const RunOptions& opt) {
  RunPlan plan;
  plan.threads = threads;
  plan.in_flight = opt.in_flight ? opt.in_flight : 2 * std::size_t(threads);
  plan.own = weighting.own_scenarios();
  plan.label = weighting.label();
  plan.random_access = source.random_access();
  plan.attention_scheme = weighting.per_query() || weighting.attention(0) != nullptr;
  plan.shared_baseline = !plan.attention_scheme && weighting.shared_baseline();
  // Every slot in one weights() call and one kernel call (f64): features and axes read once per
  // batch, not once per slot. RunOptions::all_slots_at_once = false (--slot-by-slot) asks slot by
  // slot (A/B, tests: same output).
  plan.all_slots = !plan.attention_scheme && weighting.all_slots() && opt.precision == Precision::f64 &&
                   opt.all_slots_at_once;
  plan.chunk = batch_chunk(source, weighting, axes, opt, plan);  // fixed for the whole run
  plan.total_hint = source.total_reports();
  plan.max_chunks = plan.random_access && plan.total_hint ? (plan.total_hint + plan.chunk - 1) / plan.chunk : UINT64_MAX;
  return plan;
}

}  // namespace engine

std::vector<std::string> scenario_names_for(const Weighting& weighting, const Schema& schema) {
  auto own = weighting.own_scenarios();
  return own.empty() ? schema.scenario_names : own;
}

RunStats run(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
             const std::vector<ResultSink*>& sinks) {
  const unsigned threads = opt.threads ? opt.threads : static_cast<unsigned>(oneapi::tbb::info::default_concurrency());
  oneapi::tbb::global_control cap(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  const engine::RunPlan plan = engine::plan_run(threads, source, weighting, axes, opt);
  engine::Pipeline pipeline(source, weighting, axes, opt, sinks, plan);
  pipeline.begin_profile();
  const auto t0 = std::chrono::steady_clock::now();
  engine::run_filters(pipeline, plan.in_flight);
  pipeline.end_of_stream();
  RunStats stats = pipeline.stats();
  stats.batch = plan.chunk;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pipeline.end_profile(stats);
  return stats;
}

}  // namespace headsep
