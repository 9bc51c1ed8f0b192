// The engine pipeline's stages (run.cpp draws the pipeline): Pipeline's member functions, in the
// order a batch meets them — serial input (take, read, names), parallel compute (generate,
// project axes, weights and kernels or the attention stage per scenario, validation, the sinks'
// prepare), serial output (sinks consume in batch order, counts, progress). Each stage states the
// order oneTBB gives it to ThreadSanitizer (tsan_order.hpp).
#include <chrono>
#include <new>

#include "engine/compute.hpp"
#include "engine/pipeline.hpp"
#include "engine/validate.hpp"
#include "headsep/error.hpp"
#include "support/tsan_order.hpp"

namespace headsep::engine {
namespace {

// A stage that ran out of memory: name the batch and its longest report (a bare std::bad_alloc
// says nothing). Building the message may fail too; then main's handler prints what it can.
[[noreturn]] void out_of_memory(const char* stage, std::uint64_t index, const ReportBatch& b) {
  std::string what = std::string("out of memory while ") + stage + " batch " + std::to_string(index);
  if (b.n_reports() > 0) {
    std::size_t longest = 0;
    for (std::size_t r = 1; r < b.n_reports(); ++r)
      if (b.report_length(r) > b.report_length(longest)) longest = r;
    what += " (reports " + std::to_string(b.first_report) + ".." + std::to_string(b.first_report + b.n_reports() - 1) +
            "; the longest, '" + b.report_id(longest) + "', has " + std::to_string(b.report_length(longest)) + " tokens)";
  }
  throw Error(what + "; try a smaller --chunk, fewer heads or shorter reports (docs/LIMITS.md)");
}

// The result's batch and scenario names, before its slots are computed (or arrive computed).
void name_result(Work& w) {
  BatchResult& res = w.result;
  res.index = w.index;
  res.batch = &w.batch;
  res.scenario_names.clear();
  for (const auto& name : w.names) res.scenario_names.push_back(&name);
}

}  // namespace

Pipeline::Pipeline(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
                   const std::vector<ResultSink*>& sinks, const RunPlan& plan)
    : source_(source),
      weighting_(weighting),
      axes_(axes),
      opt_(opt),
      sinks_(sinks),
      plan_(plan),
      profiler_(opt.profiler),
      exchange_(opt.exchange),
      merger_(exchange_ && exchange_->merges()),
      progress_(opt.progress) {}

void Pipeline::begin_profile() {
  if (!profiler_) return;
  prof::RunSetup ps{plan_.threads, plan_.random_access, plan_.attention_scheme, source_.label(), plan_.label, {}};
  for (const auto* sink : sinks_) ps.sink_names.push_back(prof::sink_name(*sink));
  profiler_->impl().begin_run(ps);
}

// ---- serial input stage ---------------------------------------------------------------------

Work* Pipeline::input(oneapi::tbb::flow_control& fc) {
  tsan::ReleaseOnExit done{&all_stages_};
  if (opt_.stop && opt_.stop->load(std::memory_order_relaxed)) throw Interrupted("the run was interrupted");
  tsan::acquire(&input_order_);
  prof::StageTimer timer(profiler_, next_index_);
  timer.to(prof::kInput);
  Work* w = take_next(fc);
  if (w) timer.reports(w->batch.n_reports());
  else timer.drop();
  if (w) tsan::release(w);  // the batch as read, for the parallel stage
  tsan::release(&input_order_);
  return w;
}

// The next batch, or null (and fc stopped) when there is none. A read that fails is handed on in
// the batch rather than thrown here: batches before this one may still be computing, and one of
// them failing must be the error reported.
Work* Pipeline::take_next(oneapi::tbb::flow_control& fc) {
  // A share of a distributed run takes chunks rank, rank + ranks, ... (random access).
  const std::uint64_t index = exchange_ && plan_.random_access ? exchange_->chunk_index(next_index_) : next_index_;
  if (input_failed_ || exhausted_.load(std::memory_order_relaxed) || index >= plan_.max_chunks) {
    fc.stop();
    return nullptr;
  }
  Work* w = pool_.take();
  w->error = nullptr;
  w->index = index;
  w->remote = false;
  bool more = false;
  try {
    more = read(*w);
  } catch (...) {
    w->error = std::current_exception();
    input_failed_ = true;
    ++next_index_;
    return w;
  }
  if (!more) {
    exhausted_ = true;
    pool_.give(w);
    fc.stop();
    return nullptr;
  }
  ++next_index_;
  return w;
}

// What the serial stage reads of batch w->index: on the merger of a distributed run, whatever
// the exchange hands over (a chunk to compute here, or another process's results); else a
// sequential source's next batch. Random-access sources read nothing here (generate(), parallel).
// False: no more batches.
bool Pipeline::read(Work& w) {
  if (merger_) {
    const ChunkExchange::Take t = exchange_->take(w.index, source_, plan_.chunk, w.batch, w.result, w.names);
    if (t == ChunkExchange::Take::local && !plan_.random_access) resolve_names(w);
    w.remote = t == ChunkExchange::Take::remote;
    return t != ChunkExchange::Take::end;
  }
  if (plan_.random_access) return true;
  bool more = false;
  try {
    more = source_.next(w.batch, plan_.chunk);
  } catch (const std::bad_alloc&) {
    out_of_memory("reading", next_index_, w.batch);  // w stays owned by the pool
  }
  // A sequential source may grow its scenario list while later batches are read, so the names
  // are copied here, on the thread that calls next(), not in the parallel stage.
  if (more) resolve_names(w);
  return more;
}

void Pipeline::resolve_names(Work& w) {
  w.names.clear();
  if (!plan_.own.empty()) {
    w.names = plan_.own;
    return;
  }
  const auto& all = source_.schema().scenario_names;
  for (std::uint32_t s : w.batch.scenarios) {
    if (s >= all.size()) throw Error("scenario generator returned scenario index " + std::to_string(s) + " beyond its schema");
    w.names.push_back(all[s]);
  }
}

// ---- parallel stage -------------------------------------------------------------------------

Work* Pipeline::compute(Work* w) {
  tsan::ReleaseOnExit done{&all_stages_};
  tsan::acquire(w);
  if (!w->error) {
    try {
      try {
        compute_batch(*w);
      } catch (const std::bad_alloc&) {
        out_of_memory("computing", w->index, w->batch);
      }
    } catch (...) {
      w->error = std::current_exception();
    }
  }
  tsan::release(w);  // the results, for the output stage
  return w;
}

// One batch: generate (random access), project the axes, each scenario slot through the weights,
// their validation and the kernels (or the attention stage), then the sinks' prepare. A batch
// computed by another process has only the last step left.
void Pipeline::compute_batch(Work& w) {
  prof::StageTimer timer(profiler_, w.index);
  BatchResult& res = w.result;
  if (w.remote) {
    name_result(w);
    timer.reports(w.batch.n_reports());
    return prepare_sinks(w, timer);
  }
  if (plan_.random_access && !generate(w, timer)) return;
  const std::size_t slots = w.names.size();
  timer.reports(w.batch.n_reports());
  timer.to(prof::kAxes);
  name_result(w);
  res.metrics.resize(slots);
  res.dumps.resize(opt_.keep_maps || opt_.keep_top_maps ? slots : 0);
  bool projected32 = project_axes(w);
  if (plan_.all_slots && slots > 1) {
    weigh_and_compute_all(w, timer);
  } else {
    for (std::size_t j = 0; j < slots; ++j)
      if (plan_.attention_scheme) attention(w, j, projected32, timer);
      else weigh_and_compute(w, j, timer);
  }
  prepare_sinks(w, timer);
}

// Random-access sources generate their batch here, on any thread (fill() is pure). False: past
// the end of the data, nothing to consume.
bool Pipeline::generate(Work& w, prof::StageTimer& timer) {
  timer.to(prof::kGenerate);
  if (!source_.fill(w.index, plan_.chunk, w.batch)) {
    w.batch.clear();
    w.batch.token_offset.assign(1, 0);
    w.result.batch = nullptr;
    return false;
  }
  resolve_names(w);  // random-access sources have a fixed schema
  return true;
}

// The context axes of every token in the run's precision; true when that made the f32 rows.
bool Pipeline::project_axes(Work& w) {
  if (opt_.precision == Precision::f64) {
    axes_.project(w.batch, w.axis64);
    return false;
  }
  axes_.project(w.batch, w.axis32);
  return true;
}

// Every slot in one weights() call and one kernel call (RunPlan::all_slots, f64).
void Pipeline::weigh_and_compute_all(Work& w, prof::StageTimer& timer) {
  const ReportBatch& b = w.batch;
  BatchResult& res = w.result;
  const std::size_t slots = w.names.size();
  w.weights.layout = WeightBlock::Layout::per_token;
  w.weights.keep_baseline = false;
  w.weights.resize(weighting_.heads(), b.n_tokens(), static_cast<std::uint32_t>(slots), plan_.shared_baseline);
  timer.to(prof::kWeightingAll);
  poison_weights(w.weights, false);
  weighting_.weights(b, Weighting::kAllSlots, w.weights);
  timer.to(prof::kValidate);
  for (std::size_t j = 0; j < slots; ++j)
    check_weights(b, w.weights, j, j > 0 && plan_.shared_baseline, w.names[j], plan_.label, opt_.simd);
  timer.to(prof::kKernels);
  bool nonfinite = false;
  compute_all_slots(w, w.axis64, opt_.simd, res.metrics, plan_.shared_baseline, nonfinite);
  timer.to(prof::kValidate);
  for (std::size_t j = 0; j < slots && nonfinite; ++j) check_results(b, res.metrics[j], w.names[j], source_.label(), plan_.label);
}

// Scenario `slot` of a per-token scheme: its weights, their validation, the metric kernels.
void Pipeline::weigh_and_compute(Work& w, std::size_t slot, prof::StageTimer& timer) {
  const ReportBatch& b = w.batch;
  BatchResult& res = w.result;
  const std::string& name = w.names[slot];
  w.weights.layout = WeightBlock::Layout::per_token;
  w.weights.resize(weighting_.heads(), b.n_tokens());  // (one slot: rows [0, heads])
  w.weights.keep_baseline = slot > 0 && plan_.shared_baseline;
  timer.to(prof::weighting(plan_.own.empty() ? b.scenarios[slot] : slot));
  poison_weights(w.weights, w.weights.keep_baseline);
  weighting_.weights(b, static_cast<std::uint32_t>(slot), w.weights);
  timer.to(prof::kValidate);
  check_weights(b, w.weights, 0, w.weights.keep_baseline, name, plan_.label, opt_.simd);
  timer.to(prof::kKernels);
  const MetricBlock* baseline = w.weights.keep_baseline ? &res.metrics[0] : nullptr;
  bool nonfinite = false;  // the kernels' own check: the scan below only names the report
  if (opt_.precision == Precision::f64) compute_slot(w, w.axis64, opt_.simd, res.metrics[slot], baseline, nonfinite);
  else compute_slot(w, w.axis32, opt_.simd, res.metrics[slot], baseline, nonfinite);
  timer.to(prof::kValidate);
  if (nonfinite) check_results(b, res.metrics[slot], name, source_.label(), plan_.label);
}

// Scenario `slot` of an attention scheme (runtime/attention/): QKV projections and the fused
// kernels, or a per-query scheme's explicit maps. It computes in f32 whatever --precision says;
// contexts come back as doubles.
void Pipeline::attention(Work& w, std::size_t slot, bool& projected32, prof::StageTimer& timer) {
  const ReportBatch& b = w.batch;
  BatchResult& res = w.result;
  const std::string& name = w.names[slot];
  if (!projected32) axes_.project(b, w.axis32), projected32 = true;
  timer.to(prof::kKernels);
  attention_slot(b, weighting_, static_cast<std::uint32_t>(slot), w.axis32, opt_.simd, name, plan_.label, w.weights,
                 w.attention, res.metrics[slot], opt_, res.dumps.empty() ? nullptr : &res.dumps[slot]);
  timer.to(prof::kValidate);
  check_results(b, res.metrics[slot], name, source_.label(), plan_.label);
}

void Pipeline::prepare_sinks(Work& w, prof::StageTimer& timer) {
  w.partials.resize(sinks_.size());
  for (std::size_t s = 0; s < sinks_.size(); ++s) {
    timer.to(prof::prepare(s));
    sinks_[s]->prepare(w.result, w.partials[s]);
  }
}

// ---- serial output stage --------------------------------------------------------------------

void Pipeline::output(Work* w) {
  tsan::ReleaseOnExit done{&all_stages_};
  tsan::acquire(&output_order_);
  tsan::acquire(w);
  consume(*w);
  tsan::release(&output_order_);
}

// Batches arrive in order: the first failed one raises its error; a random-access chunk past the
// end stops everything after it.
void Pipeline::consume(Work& w) {
  if (w.error && !past_end_) std::rethrow_exception(w.error);  // the first failed batch, in order
  if (w.error) {
    // A random-access chunk after the end (its failure is not part of the run: whether it was
    // computed at all depends on timing).
  } else if (w.result.batch && !past_end_) {
    deliver(w);
  } else {
    // Random-access sources: the first chunk past the end stops everything after it, so a later
    // chunk that (wrongly) reports data cannot slip in out of order.
    past_end_ = true;
    exhausted_ = true;
  }
  for (auto& p : w.partials) p.reset();
  pool_.give(&w);
}

// The sinks consume the batch (merge, write), then the run's counts and the progress bar.
void Pipeline::deliver(Work& w) {
  try {
    prof::StageTimer timer(profiler_, w.index);
    timer.reports(w.batch.n_reports());
    for (std::size_t s = 0; s < sinks_.size(); ++s) {
      timer.to(prof::consume(s));
      sinks_[s]->consume(w.result, w.partials[s].get());
    }
  } catch (const std::bad_alloc&) {
    out_of_memory("writing", w.index, w.batch);
  }
  ++stats_.batches;
  stats_.reports += w.batch.n_reports();
  stats_.groups += w.batch.n_reports() * w.result.metrics.size();
  stats_.source_rows += w.batch.source_rows;
  progress_.update(stats_.reports, plan_.total_hint);
}

// ---- after the pipeline ---------------------------------------------------------------------

void Pipeline::joined() { tsan::acquire(&all_stages_); }  // the exception object and the pool's batches

// End of stream: a source that declared its number of reports must have delivered exactly that
// many, or the outputs would silently miss reports. Plugin sources check every chunk against
// the contract and name the plugin; this catches whatever slips past (any source).
void Pipeline::end_of_stream() {
  progress_.done(stats_.reports, plan_.total_hint);
  if (exchange_) exchange_->finish();
  if (plan_.total_hint && stats_.reports != plan_.total_hint && (!exchange_ || merger_))
    throw Error("the scenario source delivered " + std::to_string(stats_.reports) + " reports but declared " +
                std::to_string(plan_.total_hint) + " (total_reports); the output would be incomplete");
}

void Pipeline::end_profile(const RunStats& stats) {
  if (profiler_) profiler_->impl().end_run(stats, scenario_names_for(weighting_, source_.schema()));
}

}  // namespace headsep::engine
