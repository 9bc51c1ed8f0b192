// run_model (model_run.hpp): a oneTBB pipeline — serial input (sequential sources parse; random-
// access ones only get an index; under MPI the exchange hands over a chunk to compute here or
// another rank's finished rows) → parallel: generate, token ids, axes, BERT forward with every
// head measured (one MetricBlock per layer: the sinks' rows), per-batch sums, the sinks' prepare →
// serial, in batch order: the sinks' consume, merge into the scenario's sums.
// ModelPipeline holds one call's state, a member function per stage; the parallel stage's steps
// are ModelBatch's (model_batch.cpp), ModelSummary's json/table are in model_summary.cpp.
#include "headsep/model_run.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>

#include "headsep/error.hpp"
#include "headsep/run.hpp"
#include "model/model_batch.hpp"
#include "profile/stage_timer.hpp"
#include "support/progress.hpp"
#include "support/token_pool.hpp"
#include "support/tsan_order.hpp"

namespace headsep {
namespace {

struct Item {
  ReportBatch batch;
  std::uint64_t index = 0;
  std::string scenario;
  BatchResult res;                                     // the rows: one slot per layer
  std::vector<std::unique_ptr<SinkPartial>> partials;  // per sink
  bool remote = false;                                 // rows computed by another process (exchange)
  BatchSums sums;
  std::exception_ptr error;  // a stage's failure, raised by the ordered output stage (the first bad batch wins)
};

// Per query head 1..H its key/value head (at [h - 1]): the summary's kv_head_of and the rows'.
std::vector<std::uint32_t> kv_head_of(const ModelShape& shape) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t h = 1; h <= shape.heads; ++h) v.push_back(shape.kv_head(h));
  return v;
}

std::string scenario_of(const ReportBatch& b, const Schema& s) {
  if (b.scenarios.empty()) return "all";
  std::string n;
  for (auto j : b.scenarios) n += (n.empty() ? "" : "+") + s.scenario_names.at(j);
  return n;
}

// ThreadSanitizer (tsan_order.hpp): released by run() once the filters exist; acquired first thing
// by every stage invocation, before it reads the pipeline's members. Address only.
const char pipeline_built = 0;

/// The column of the feature `token_id`; throws when the source gives none.
std::size_t token_id_column(const Schema& schema) {
  const auto tid = std::find(schema.feature_names.begin(), schema.feature_names.end(), "token_id");
  if (tid == schema.feature_names.end())
    throw Error("--model: the scenario generator gives no 'token_id' feature (use the text or ops-text generator, "
                "which tokenize with the model's vocab.txt)");
  return static_cast<std::size_t>(tid - schema.feature_names.begin());
}

/// The column of the feature `text_status` (the text generators': truncated / empty), or none.
std::size_t text_status_column(const Schema& schema) {
  const auto c = std::find(schema.feature_names.begin(), schema.feature_names.end(), "text_status");
  return c == schema.feature_names.end() ? ModelBatch::kNone : static_cast<std::size_t>(c - schema.feature_names.begin());
}

/// One run_model call. The const members run in the parallel stage (several threads at once:
/// they read the call's fixed state and write only their item and their thread's scratch);
/// input() and merge() are the serial stages, one invocation at a time in batch order.
class ModelPipeline {
 public:
  ModelPipeline(ReportSource& source, const Architecture& model, const AxisMap& axes, const ModelRunOptions& opt);
  ModelSummary run();

 private:
  // serial in order: the next batch (sequential sources) or only its index (random access)
  Item* input(tbb::flow_control& fc);
  // parallel: generate (random access), then compute
  void work(Item& it) const;
  void compute(Item& it, prof::StageTimer& timer) const;
  // serial in order: merge into the scenario's sums
  void merge(Item& it);
  ModelSummary::Scenario& scenario(const Item& it);
  void prepare_sinks(Item& it, prof::StageTimer& timer) const;
  // the stages as oneTBB filters, with the orders stated to ThreadSanitizer
  tbb::filter<void, void> filters();
  void finish(std::chrono::steady_clock::time_point t0);

  ReportSource& source_;
  const Architecture& model_;
  const ModelRunOptions& opt_;
  const Schema& schema_;
  const ModelBatch batch_;
  const unsigned threads_;
  const std::size_t chunk_;
  const bool random_;
  // Random-access sources: chunks up to total_reports (when known), else until one comes back empty.
  const std::uint64_t chunks_;
  Profiler* const profiler_;
  ChunkExchange* const exchange_;
  const bool merger_;  // the exchange's merging process (rank 0)
  ModelSummary out_;
  mutable tbb::enumerable_thread_specific<BatchScratch> scratch_;
  std::map<std::string, std::size_t> index_of_;
  std::uint64_t next_index_ = 0;
  std::atomic<bool> done_{false};
  double flops_ = 0;
  std::uint64_t delivered_ = 0, batches_ = 0;
  bool input_failed_ = false;
  // ThreadSanitizer tokens (tsan_order.hpp): the input and output stages' invocations, everything
  // any stage did (for what follows the pipeline).
  const char input_order_ = 0, output_order_ = 0, all_stages_ = 0;
  // Items in flight (raw-pointer tokens: token_pool.hpp says why).
  detail::TokenPool<Item> pool_;
  detail::Progress progress_;  // the engine's bar (support/progress.hpp), drawn from merge()
};

ModelPipeline::ModelPipeline(ReportSource& source, const Architecture& model, const AxisMap& axes,
                             const ModelRunOptions& opt)
    : source_(source),
      model_(model),
      opt_(opt),
      schema_(source.schema()),
      batch_(model, axes, opt, token_id_column(schema_), text_status_column(schema_)),
      threads_(opt.threads ? opt.threads : static_cast<unsigned>(tbb::info::default_concurrency())),
      chunk_(std::max<std::size_t>(1, opt.chunk_reports)),
      random_(source.random_access()),
      chunks_(random_ && source.total_reports() ? (source.total_reports() + chunk_ - 1) / chunk_ : 0),
      profiler_(opt.profiler),
      exchange_(opt.exchange),
      merger_(exchange_ && exchange_->merges()),

      progress_(opt.progress) {
  out_.model = model.name();
  out_.layers = model.shape().layers;
  out_.heads = model.shape().heads;
  if (model.shape().model_type != "bert") {
    out_.decoder_type = model.shape().model_type, out_.kv_heads = model.shape().kv_heads;
    out_.kv_head_of = kv_head_of(model.shape());
    out_.sliding_window = model.shape().sliding_window;
  }
  out_.axes = axes.names();
  for (const auto& n : opt.model_axes.names()) out_.axes.push_back(n);
  out_.top = opt.top;
  out_.simd = std::string(to_string(opt.simd));
  out_.threads = threads_;
  out_.max_tokens = opt.max_tokens;
  out_.max_tokens_from = opt.max_tokens_from;
  out_.empty_text_tokens = opt.empty_text_tokens;
}

ModelSummary ModelPipeline::run() {
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads_);
  if (profiler_) {
    std::vector<std::string> stages{"merge"};  // consume(0); the sinks' prepare and consume: k + 1
    for (const ResultSink* sink : opt_.sinks) stages.push_back(prof::sink_name(*sink));
    profiler_->impl().begin_run(prof::RunSetup{threads_, random_, false, source_.label(), {}, stages}, model_.name());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto chain = filters();
  tsan::release(&pipeline_built);
  try {
    tbb::parallel_pipeline(2 * threads_, chain);
  } catch (...) {
    tsan::acquire(&all_stages_);
    throw;
  }
  tsan::acquire(&all_stages_);
  finish(t0);
  return std::move(out_);
}

tbb::filter<void, void> ModelPipeline::filters() {
  return tbb::make_filter<void, Item*>(tbb::filter_mode::serial_in_order,
                                       [this](tbb::flow_control& fc) -> Item* {
                                         tsan::acquire(&pipeline_built);
                                         tsan::ReleaseOnExit end{&all_stages_};
                                         tsan::acquire(&input_order_);
                                         prof::StageTimer timer(profiler_, next_index_);
                                         timer.to(prof::kInput);
                                         Item* it = input(fc);
                                         if (it) timer.reports(it->batch.n_reports());
                                         else timer.drop();
                                         if (it) tsan::release(it);
                                         tsan::release(&input_order_);
                                         return it;
                                       }) &
         tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel,
                                        [this](Item* it) {
                                          tsan::acquire(&pipeline_built);
                                          tsan::ReleaseOnExit end{&all_stages_};
                                          tsan::acquire(it);
                                          work(*it);
                                          tsan::release(it);
                                          return it;
                                        }) &
         tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order, [this](Item* it) {
           tsan::acquire(&pipeline_built);
           tsan::ReleaseOnExit end{&all_stages_};
           tsan::acquire(&output_order_);
           tsan::acquire(it);
           merge(*it);  // may throw: the pool still owns the item
           pool_.give(it);
           tsan::release(&output_order_);
         });
}

// ---- serial input ------------------------------------------------------------------------------

Item* ModelPipeline::input(tbb::flow_control& fc) {
  if (opt_.stop && opt_.stop->load(std::memory_order_relaxed)) throw Interrupted("the run was interrupted");
  // A share of a distributed run takes chunks rank, rank + ranks, ... (random access).
  const std::uint64_t index = exchange_ && random_ ? exchange_->chunk_index(next_index_) : next_index_;
  if (input_failed_ || done_ || (chunks_ && index >= chunks_)) {
    fc.stop();
    return nullptr;
  }
  Item* it = pool_.take();
  *it = Item{};
  it->index = index;
  ++next_index_;
  if (merger_ || !random_) {
    try {
      std::vector<std::string> names;
      const auto take = merger_ ? exchange_->take(index, source_, chunk_, it->batch, it->res, names)
                        : source_.next(it->batch, chunk_) ? ChunkExchange::Take::local : ChunkExchange::Take::end;
      if (take == ChunkExchange::Take::end) {
        done_ = true;
        fc.stop();
        pool_.give(it);
        return nullptr;
      }
      it->remote = take == ChunkExchange::Take::remote;
      if (it->remote) it->scenario = names.empty() ? "all" : names.front();
      else if (!random_) it->scenario = scenario_of(it->batch, schema_);
    } catch (...) {
      // Handed on, not thrown: an earlier batch still computing may fail too and must win.
      it->error = std::current_exception();
      input_failed_ = true;
    }
  }
  return it;
}

// ---- parallel: generate, then one batch through the model (model_batch.cpp) -----------------------

void ModelPipeline::work(Item& it) const {
  if (it.error) return;
  prof::StageTimer timer(profiler_, it.index);
  try {
    if (it.remote) {  // another process's rows: only the sums and the sinks' prepare are left
      timer.reports(it.batch.n_reports());
      timer.to(prof::kHeads);
      batch_.sums_of(it.batch, it.res, scratch_.local(), it.sums, timer);
      return prepare_sinks(it, timer);
    }
    if (random_) timer.to(prof::kGenerate);
    if (random_ && !source_.fill(it.index, chunk_, it.batch)) return;  // past the end: empty
    timer.reports(it.batch.n_reports());
    compute(it, timer);
    prepare_sinks(it, timer);
  } catch (...) {
    it.error = std::current_exception();
  }
}

// --profile (runtime/profile/, the engine's profiler): the parallel stage's clock moves from
// token ids + axes to the forward to the head metrics; without a profiler each is a branch.
void ModelPipeline::compute(Item& it, prof::StageTimer& timer) const {
  timer.to(prof::kAxes);
  if (random_) it.scenario = scenario_of(it.batch, schema_);  // a random-access schema is fixed
  batch_.measure(it.batch, scratch_.local(), it.res, it.sums, timer);
}

// The rows as the sinks read them (BatchResult: slots = layers, every slot the item's scenario).
void ModelPipeline::prepare_sinks(Item& it, prof::StageTimer& timer) const {
  it.res.index = it.index;
  it.res.batch = &it.batch;
  it.res.scenario_names.assign(it.res.metrics.size(), &it.scenario);
  it.partials.resize(opt_.sinks.size());
  if (it.sums.reports == 0) return;
  for (std::size_t k = 0; k < opt_.sinks.size(); ++k) {
    timer.to(prof::prepare(k + 1));
    opt_.sinks[k]->prepare(it.res, it.partials[k]);
  }
}

// ---- serial output: merge in batch order ---------------------------------------------------------

void ModelPipeline::merge(Item& it) {
  if (it.error) {
    if (random_ && done_) return;  // a chunk past the end: whether it ran at all depends on timing
    std::rethrow_exception(it.error);
  }
  if (it.sums.reports == 0) {
    if (random_) done_ = true;
    return;
  }
  prof::StageTimer timer(profiler_, it.index);
  timer.reports(it.sums.reports);
  for (std::size_t k = 0; k < opt_.sinks.size(); ++k) {
    timer.to(prof::consume(k + 1));
    opt_.sinks[k]->consume(it.res, it.partials[k].get());
  }
  timer.to(prof::consume(0));
  delivered_ += it.sums.reports;
  ++batches_;
  progress_.update(delivered_, source_.total_reports());
  ModelSummary::Scenario& sc = scenario(it);
  sc.reports += it.sums.reports;
  sc.tokens += it.sums.tokens;
  sc.empty_reports += it.sums.empty;
  sc.truncated_reports += it.sums.truncated;
  sc.tokens_without_axis_value += it.sums.without_value;
  for (std::size_t i = 0; i < sc.head.size(); ++i) sc.head[i] += it.sums.head[i];
  for (std::size_t i = 0; i < sc.ctx.size(); ++i) sc.ctx[i] += it.sums.ctx[i];
  for (std::size_t i = 0; i < sc.pair.size(); ++i) sc.pair[i] += it.sums.pair[i];
  for (std::size_t i = 0; i < sc.dist.size(); ++i) sc.dist[i] += it.sums.dist[i];
  for (std::size_t i = 0; i < sc.entropy.size(); ++i) sc.entropy[i].merge(it.sums.entropy[i]);
  for (std::size_t i = 0; i < sc.separation.size(); ++i) sc.separation[i].merge(it.sums.separation[i]);
  // The top reports and their maps: a map is dropped when its report leaves the top.
  sc.top.merge(it.sums.top);
  for (auto& [index, id] : it.sums.top_ids) sc.top_ids.emplace(index, std::move(id));
  for (auto& mm : it.sums.maps) sc.maps.emplace(mm.index, std::move(mm));
  std::map<std::uint64_t, std::string> ids;
  std::map<std::uint64_t, ModelMap> maps;
  for (const auto& [v, index] : sc.top.sorted()) {
    ids.emplace(index, std::move(sc.top_ids.at(index)));
    if (auto m = sc.maps.find(index); m != sc.maps.end()) maps.emplace(index, std::move(m->second));
  }
  sc.top_ids.swap(ids);
  sc.maps.swap(maps);
  flops_ += it.sums.flops;
}

/// The item's scenario in the summary, added (zeroed, sized as the item's sums) when first seen.
ModelSummary::Scenario& ModelPipeline::scenario(const Item& it) {
  auto [pos, fresh] = index_of_.try_emplace(it.scenario, out_.scenarios.size());
  if (fresh) {
    ModelSummary::Scenario sc;
    sc.name = it.scenario;
    sc.head.assign(it.sums.head.size(), 0.0);
    sc.ctx.assign(it.sums.ctx.size(), 0.0);
    sc.pair.assign(it.sums.pair.size(), 0.0);
    sc.dist.assign(it.sums.dist.size(), 0.0);
    sc.entropy.assign(it.sums.entropy.size(), QuantileSketch());
    sc.separation.assign(it.sums.separation.size(), QuantileSketch());
    sc.top = TopK(opt_.top_reports);
    out_.scenarios.push_back(std::move(sc));
  }
  return out_.scenarios[pos->second];
}

void ModelPipeline::finish(std::chrono::steady_clock::time_point t0) {
  if (exchange_) exchange_->finish();
  // A source that declared its number of reports must deliver exactly that many (as run()).
  if (source_.total_reports() && delivered_ != source_.total_reports() && (!exchange_ || merger_))
    throw Error("the scenario source delivered " + std::to_string(delivered_) + " reports but declared " +
                std::to_string(source_.total_reports()) + " (total_reports); the summary would be incomplete");
  progress_.done(delivered_, source_.total_reports());
  out_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out_.gflop = flops_ * 1e-9;
  if (profiler_) {
    RunStats st;  // one (report, scenario) group per report: the model has no weighting scenarios
    st.seconds = out_.seconds, st.batches = batches_, st.reports = delivered_, st.groups = delivered_;
    profiler_->impl().end_run(st, {});
  }
}

}  // namespace

RunInfo model_run_info(const Architecture& model, const AxisMap& axes, const ModelAxes& model_axes) {
  RunInfo info;
  info.axis_names = axes.names();
  for (const auto& n : model_axes.names()) info.axis_names.push_back(n);
  info.heads = model.shape().heads;
  info.attention = true;
  info.layers = model.shape().layers;
  if (model.shape().model_type != "bert") info.kv_head_of = kv_head_of(model.shape());
  return info;
}

ModelSummary run_model(ReportSource& source, const Architecture& model, const AxisMap& axes, const ModelRunOptions& opt) {
  ModelPipeline pipeline(source, model, axes, opt);
  return pipeline.run();
}

}  // namespace headsep
