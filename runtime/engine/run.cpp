// The engine pipeline (oneTBB parallel_pipeline):
//   serial in order : take the next batch (sequential sources generate it here; random-access
//                     sources only get an index, and generate in the parallel stage)
//   parallel        : generate (random access), project axes, per scenario either weight and run
//                     the metric kernels, or run the attention stage (QKV projections, fused
//                     softmax/A·V/metrics kernels; or explicit maps), let sinks prepare (format
//                     rows, fill per-chunk sketches)
//   serial in order : sinks consume (merge, write) — batch order, never thread order
// At most `in_flight` batches exist at once, so memory is bounded by chunk size x in_flight; the
// chunk shrinks when heads make a report's metrics large (pairs grow as heads^2, docs/LIMITS.md),
// and a stage that runs out of memory names its batch instead of a bare std::bad_alloc.
// ThreadSanitizer builds annotate the order oneTBB guarantees (tsan_release/tsan_acquire below).
#include "headsep/run.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string_view>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>

#include "attention/stage.hpp"
#include "support/float_bits.hpp"
#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "kernels/metrics_simd.hpp"
#include "profile/profiler_impl.hpp"
#include "support/token_pool.hpp"
#include "support/tsan_order.hpp"

namespace headsep {
namespace {

using Clock = std::chrono::steady_clock;

// ThreadSanitizer: the pipeline's orders (tsan_order.hpp).
using tsan::ReleaseOnExit;
inline void tsan_release(const void* p) { tsan::release(p); }
inline void tsan_acquire(const void* p) { tsan::acquire(p); }
// Released by run() once the filters exist; acquired first thing by every stage invocation, before
// it reads its lambda's captures (a namespace-scope token needs none). Address only.
const char pipeline_built = 0;

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

// Slot `slot`'s rows of `w` (slot 0 unless w holds every slot); `skip_baseline`: its row 0 is
// another slot's, checked there.
void check_weights(const ReportBatch& batch, const WeightBlock& w, std::size_t slot, bool skip_baseline,
                   const std::string& scenario, const std::string& label, SimdLevel level) {
  const std::size_t n = batch.n_tokens();
  for (std::uint32_t h = skip_baseline ? 1 : 0; h <= w.heads; ++h) {
    const double* row = w.rows[slot * (std::size_t(w.heads) + 1) + h].data();
    if (kernels::valid_weights(row, n, level)) continue;  // the common case; else find the first bad one
    for (std::size_t r = 0; r < batch.n_reports(); ++r)
      for (auto t = batch.token_offset[r]; t < batch.token_offset[r + 1]; ++t)
        if (!(row[t] >= 0.0 && row[t] <= 1.7976931348623157e308)) {
          char v[32];
          std::snprintf(v, sizeof v, "%g", row[t]);
          throw Error((label.empty() ? std::string() : label + ": ") + "report '" + batch.report_id(r) + "', scenario '" +
                      scenario + "': " +
                      (h ? "head" + std::to_string(h) : std::string("single")) + " weight of token " +
                      std::to_string(t - batch.token_offset[r] + 1) + " is " + v +
                      " (weights must be finite and >= 0)");
        }
  }
}

// Bit 63 set iff some value is Inf or NaN (float_bits.hpp).
std::uint64_t nonfinite_bits(const std::vector<double>& v) noexcept {
  std::uint64_t acc = 0;
  for (double x : v) acc |= detail::nonfinite_bit(x);
  return acc;
}

void check_results(const ReportBatch& batch, const MetricBlock& m, const std::string& scenario) {
  const std::uint64_t bits = nonfinite_bits(m.context) | nonfinite_bits(m.separation) | nonfinite_bits(m.head_stats) |
                             nonfinite_bits(m.pair_stats);
  if (!(bits >> 63)) return;
  for (std::size_t r = 0; r < m.n; ++r) {
    bool ok = std::isfinite(m.separation[r]);
    for (std::uint32_t h = 0; h <= m.heads; ++h)
      for (std::uint32_t c = 0; c < m.axes; ++c) ok = ok && std::isfinite(m.ctx(h, c, r));
    for (std::uint32_t h = 0; h <= m.heads && m.attention(); ++h)
      for (std::uint32_t k = 0; k < m.head_stat_count; ++k) ok = ok && std::isfinite(m.head_stat(h, k, r));
    for (std::size_t p = 0; p < pair_count(m.heads) && m.attention(); ++p)
      for (std::uint32_t k = 0; k < m.pair_stat_count; ++k) ok = ok && std::isfinite(m.pair_stat(p, k, r));
    if (!ok)
      throw Error("report '" + batch.report_id(r) + "', scenario '" + scenario +
                  "': a context overflowed to a non-finite value (inputs too large)");
  }
}

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

// `baseline`: an earlier slot of this batch whose baseline contexts this slot shares (f64 only:
// the f32 kernels recompute them), else nullptr. Sets `nonfinite` when some context or
// separation is not finite (KernelArgs::nonfinite; check_results then names the report).
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

// Every slot of a batch in one kernel call (f64; Weighting::all_slots): the axes are read once
// for all slots; each slot's metrics are bit-identical to compute_slot's.
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

std::size_t bounded_chunk(std::size_t chunk, std::uint32_t heads, std::size_t axes, std::size_t slots, bool attention) {
  const std::size_t h = heads, pairs = pair_count(h);
  std::size_t values = (2 * h + 1) * axes + pairs + 1;
  if (attention) values += (h + 1) * kHeadStats + pairs * kPairStats;
  const std::size_t per_report = values * kBytesPerValue * std::max<std::size_t>(slots, 1);
  return std::max<std::size_t>(1, std::min(chunk, kBatchMetricBudget / per_report));
}

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

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()), last_(start_) {}
  void update(std::uint64_t reports, std::uint64_t total_hint) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(200) || now - start_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = reports / secs;
    char line[160];
    if (total_hint) {
      const double frac = double(reports) / double(total_hint);
      const int filled = int(frac * 30);
      std::string bar(static_cast<std::size_t>(filled), '#');
      bar.resize(30, '.');
      std::snprintf(line, sizeof line, "\r[%s] %5.1f%%  %llu reports  %.3g reports/s  ETA %.0fs ", bar.c_str(),
                    100 * frac, static_cast<unsigned long long>(reports), rate, (total_hint - reports) / rate);
    } else {
      std::snprintf(line, sizeof line, "\r%llu reports  %.3g reports/s ", static_cast<unsigned long long>(reports), rate);
    }
    std::fputs(line, stderr);
    shown_ = true;
  }
  void done() {
    if (shown_) std::fputs("\n", stderr);
  }

 private:
  bool enabled_, shown_ = false;
  Clock::time_point start_, last_;
};

}  // namespace

std::vector<std::string> scenario_names_for(const Weighting& weighting, const Schema& schema) {
  auto own = weighting.own_scenarios();
  return own.empty() ? schema.scenario_names : own;
}

RunStats run(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
             const std::vector<ResultSink*>& sinks) {
  const unsigned threads = opt.threads ? opt.threads : static_cast<unsigned>(oneapi::tbb::info::default_concurrency());
  oneapi::tbb::global_control cap(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  const std::size_t in_flight = opt.in_flight ? opt.in_flight : 2 * std::size_t(threads);
  const auto own = weighting.own_scenarios();
  const std::string label = weighting.label();
  const bool random_access = source.random_access();
  const bool attention_scheme = weighting.per_query() || weighting.attention(0) != nullptr;
  const bool shared_baseline = !attention_scheme && weighting.shared_baseline();  // baseline row and contexts from slot 0
  // Every slot in one weights() call and one kernel call (f64): features and axes read once per
  // batch, not once per slot. HEADSEP_ALL_SLOTS=0 asks slot by slot (A/B, tests: same output).
  const char* all_env = std::getenv("HEADSEP_ALL_SLOTS");
  const bool all_slots = !attention_scheme && weighting.all_slots() && opt.precision == Precision::f64 &&
                         !(all_env && std::string_view(all_env) == "0");
  // Fixed for the whole run (random-access chunk i is reports [i*chunk, ...)); scenario slots are
  // the scheme's own, else those the source knows up front (at least 1).
  std::size_t chunk = bounded_chunk(opt.chunk_reports ? opt.chunk_reports : 1, weighting.heads(), axes.names().size(),
                                    own.empty() ? source.schema().scenario_names.size() : own.size(), attention_scheme);
  if (random_access && chunk > 1) {
    // fill() is pure, so the first reports can be sampled for their length before the run.
    ReportBatch probe;
    if (source.fill(0, std::min<std::size_t>(chunk, 64), probe) && probe.n_reports() > 0) {
      const double tokens = double(probe.n_tokens()) / double(probe.n_reports());
      const double bytes = 8.0 * double(probe.features.size() + axes.names().size() + weighting.heads() + 1) +
                           4.0 * double(source.schema().d_model);
      chunk = std::max<std::size_t>(1, static_cast<std::size_t>(std::min(double(chunk), kBatchTokenBudget / std::max(1.0, tokens * bytes))));
    }
  }
  const std::uint64_t total_hint = source.total_reports();

  WorkPool pool;
  RunStats stats;
  Progress progress(opt.progress);
  std::uint64_t next_index = 0;
  std::atomic<bool> exhausted{false};  // set by the output stage for random-access sources
  const std::uint64_t max_chunks = random_access && total_hint ? (total_hint + chunk - 1) / chunk : UINT64_MAX;
  // --profile: stage clocks per thread (runtime/profile/); without a profiler each hook is a branch.
  Profiler* const profiler = opt.profiler;
  if (profiler) {
    prof::RunSetup ps{threads, random_access, attention_scheme, source.label(), label, {}};
    for (const auto* sink : sinks) ps.sink_names.push_back(prof::sink_name(*sink));
    profiler->impl().begin_run(ps);
  }
  ChunkExchange* const exchange = opt.exchange;  // scale-out (runtime/dist/): null when alone
  const bool merger = exchange && exchange->merges();
  const auto t0 = Clock::now();

  auto resolve_names = [&](Work& w) {
    w.names.clear();
    if (!own.empty()) {
      w.names = own;
      return;
    }
    const auto& all = source.schema().scenario_names;
    for (std::uint32_t s : w.batch.scenarios) {
      if (s >= all.size()) throw Error("scenario generator returned scenario index " + std::to_string(s) + " beyond its schema");
      w.names.push_back(all[s]);
    }
  };

  // TSan order tokens (addresses only): the input stage's and the output stage's invocations,
  // and everything any stage did (for run() after the pipeline).
  const char input_order = 0, output_order = 0, all_stages = 0;

  bool input_failed = false;
  auto take_next = [&](oneapi::tbb::flow_control& fc) -> Work* {
    // A share of a distributed run takes chunks rank, rank + ranks, ... (random access).
    const std::uint64_t index = exchange && random_access ? exchange->chunk_index(next_index) : next_index;
    if (input_failed || exhausted.load(std::memory_order_relaxed) || index >= max_chunks) {
      fc.stop();
      return nullptr;
    }
    Work* w = pool.take();
    w->error = nullptr;
    w->index = index;
    w->remote = false;
    if (merger) {
      ChunkExchange::Take t = ChunkExchange::Take::local;
      try {
        t = exchange->take(index, source, chunk, w->batch, w->result, w->names);
        if (t == ChunkExchange::Take::local && !random_access) resolve_names(*w);
      } catch (...) {  // as below: raised in batch order
        w->error = std::current_exception();
        input_failed = true;
        ++next_index;
        return w;
      }
      if (t == ChunkExchange::Take::end) {
        exhausted = true;
        pool.give(w);
        fc.stop();
        return nullptr;
      }
      w->remote = t == ChunkExchange::Take::remote;
    } else if (!random_access) {
      bool more = false;
      try {
        try {
          more = source.next(w->batch, chunk);
        } catch (const std::bad_alloc&) {
          out_of_memory("reading", next_index, w->batch);  // w stays owned by the pool
        }
        if (more) resolve_names(*w);
      } catch (...) {
        // Handed on rather than thrown here: batches before this one may still be computing, and
        // one of them failing must be the error reported.
        w->error = std::current_exception();
        input_failed = true;
        ++next_index;
        return w;
      }
      if (!more) {
        exhausted = true;
        pool.give(w);
        fc.stop();
        return nullptr;
      }
      // (A sequential source may grow its scenario list while later batches are read, so the
      // names were copied above, on the thread that calls next(), not in the parallel stage.)
    }
    ++next_index;
    return w;
  };
  auto input = [&](oneapi::tbb::flow_control& fc) -> Work* {
    tsan_acquire(&pipeline_built);
    ReleaseOnExit done{&all_stages};
    tsan_acquire(&input_order);
    prof::StageTimer timer(profiler, next_index);
    timer.to(prof::kInput);
    Work* w = take_next(fc);
    if (w) timer.reports(w->batch.n_reports());
    else timer.drop();
    if (w) tsan_release(w);  // the batch as read, for the parallel stage
    tsan_release(&input_order);
    return w;
  };

  auto compute_batch = [&](Work* w) -> Work* {
    prof::StageTimer timer(profiler, w->index);
    if (w->remote) {  // results computed by another process: the sinks' share is all that is left
      BatchResult& res = w->result;
      res.index = w->index;
      res.batch = &w->batch;
      res.scenario_names.clear();
      for (const auto& name : w->names) res.scenario_names.push_back(&name);
      w->partials.resize(sinks.size());
      timer.reports(w->batch.n_reports());
      for (std::size_t s = 0; s < sinks.size(); ++s) {
        timer.to(prof::prepare(s));
        sinks[s]->prepare(res, w->partials[s]);
      }
      return w;
    }
    if (random_access) timer.to(prof::kGenerate);
    if (random_access && !source.fill(w->index, chunk, w->batch)) {
      w->batch.clear();
      w->batch.token_offset.assign(1, 0);
      w->result.batch = nullptr;  // past the end: nothing to consume
      return w;
    }
    ReportBatch& b = w->batch;
    if (random_access) resolve_names(*w);  // random-access sources have a fixed schema
    const std::size_t slots = w->names.size();
    timer.reports(b.n_reports());
    timer.to(prof::kAxes);
    BatchResult& res = w->result;
    res.index = w->index;
    res.batch = &b;
    res.scenario_names.clear();
    res.metrics.resize(slots);
    res.dumps.resize(opt.keep_maps || opt.keep_top_maps ? slots : 0);
    bool projected32 = false;
    if (opt.precision == Precision::f64) axes.project(b, w->axis64);
    else axes.project(b, w->axis32), projected32 = true;
    const bool at_once = all_slots && slots > 1;
    if (at_once) {
      for (std::size_t j = 0; j < slots; ++j) res.scenario_names.push_back(&w->names[j]);
      w->weights.layout = WeightBlock::Layout::per_token;
      w->weights.keep_baseline = false;
      w->weights.resize(weighting.heads(), b.n_tokens(), static_cast<std::uint32_t>(slots), shared_baseline);
      timer.to(prof::kWeightingAll);
      weighting.weights(b, Weighting::kAllSlots, w->weights);
      timer.to(prof::kValidate);
      for (std::size_t j = 0; j < slots; ++j) check_weights(b, w->weights, j, j > 0 && shared_baseline, w->names[j], label, opt.simd);
      timer.to(prof::kKernels);
      bool nonfinite = false;
      compute_all_slots(*w, w->axis64, opt.simd, res.metrics, shared_baseline, nonfinite);
      timer.to(prof::kValidate);
      for (std::size_t j = 0; j < slots && nonfinite; ++j) check_results(b, res.metrics[j], w->names[j]);
    }
    for (std::size_t j = 0; j < slots && !at_once; ++j) {
      const std::string& name = w->names[j];
      res.scenario_names.push_back(&name);
      if (attention_scheme) {
        // Attention computes in f32 whatever --precision says; contexts come back as doubles.
        if (!projected32) axes.project(b, w->axis32), projected32 = true;
        timer.to(prof::kKernels);
        attention_slot(b, weighting, static_cast<std::uint32_t>(j), w->axis32, opt.simd, name, label, w->weights,
                       w->attention, res.metrics[j], opt, res.dumps.empty() ? nullptr : &res.dumps[j]);
        timer.to(prof::kValidate);
        check_results(b, res.metrics[j], name);
        continue;
      }
      w->weights.layout = WeightBlock::Layout::per_token;
      w->weights.resize(weighting.heads(), b.n_tokens());  // (one slot: rows [0, heads])
      w->weights.keep_baseline = j > 0 && shared_baseline;
      timer.to(prof::weighting(own.empty() ? b.scenarios[j] : j));
      weighting.weights(b, static_cast<std::uint32_t>(j), w->weights);
      timer.to(prof::kValidate);
      check_weights(b, w->weights, 0, w->weights.keep_baseline, name, label, opt.simd);
      timer.to(prof::kKernels);
      const MetricBlock* baseline = w->weights.keep_baseline ? &res.metrics[0] : nullptr;
      bool nonfinite = false;  // the kernels' own check: the scan below only names the report
      if (opt.precision == Precision::f64) compute_slot(*w, w->axis64, opt.simd, res.metrics[j], baseline, nonfinite);
      else compute_slot(*w, w->axis32, opt.simd, res.metrics[j], baseline, nonfinite);
      timer.to(prof::kValidate);
      if (nonfinite) check_results(b, res.metrics[j], name);
    }
    w->partials.resize(sinks.size());
    for (std::size_t s = 0; s < sinks.size(); ++s) {
      timer.to(prof::prepare(s));
      sinks[s]->prepare(res, w->partials[s]);
    }
    return w;
  };
  auto compute = [&](Work* w) -> Work* {
    tsan_acquire(&pipeline_built);
    ReleaseOnExit done{&all_stages};
    tsan_acquire(w);
    if (!w->error) {
      try {
        try {
          compute_batch(w);
        } catch (const std::bad_alloc&) {
          out_of_memory("computing", w->index, w->batch);
        }
      } catch (...) {
        w->error = std::current_exception();
      }
    }
    tsan_release(w);  // the results, for the output stage
    return w;
  };

  bool past_end = false;
  auto consume = [&](Work* w) {
    if (w->error && !past_end) std::rethrow_exception(w->error);  // the first failed batch, in order
    if (w->error) {
      // A random-access chunk after the end (its failure is not part of the run: whether it was
      // computed at all depends on timing).
    } else if (w->result.batch && !past_end) {
      try {
        prof::StageTimer timer(profiler, w->index);
        timer.reports(w->batch.n_reports());
        for (std::size_t s = 0; s < sinks.size(); ++s) {
          timer.to(prof::consume(s));
          sinks[s]->consume(w->result, w->partials[s].get());
        }
      } catch (const std::bad_alloc&) {
        out_of_memory("writing", w->index, w->batch);
      }
      ++stats.batches;
      stats.reports += w->batch.n_reports();
      stats.groups += w->batch.n_reports() * w->result.metrics.size();
      stats.source_rows += w->batch.source_rows;
      progress.update(stats.reports, total_hint);
    } else {
      // Random-access sources: the first chunk past the end stops everything after it, so a later
      // chunk that (wrongly) reports data cannot slip in out of order.
      past_end = true;
      exhausted = true;
    }
    for (auto& p : w->partials) p.reset();
    pool.give(w);
  };
  auto output = [&](Work* w) {
    tsan_acquire(&pipeline_built);
    ReleaseOnExit done{&all_stages};
    tsan_acquire(&output_order);
    tsan_acquire(w);
    consume(w);
    tsan_release(&output_order);
  };

  const auto filters =
      oneapi::tbb::make_filter<void, Work*>(oneapi::tbb::filter_mode::serial_in_order, input) &
      oneapi::tbb::make_filter<Work*, Work*>(oneapi::tbb::filter_mode::parallel, compute) &
      oneapi::tbb::make_filter<Work*, void>(oneapi::tbb::filter_mode::serial_in_order, output);
  tsan_release(&pipeline_built);
  try {
    oneapi::tbb::parallel_pipeline(in_flight, filters);
  } catch (...) {
    tsan_acquire(&all_stages);  // the exception object and the pool's batches
    throw;
  }
  tsan_acquire(&all_stages);
  progress.done();
  // End of stream: a source that declared its number of reports must have delivered exactly that
  // many, or the outputs would silently miss reports. Plugin sources check every chunk against
  // the contract and name the plugin; this catches whatever slips past (any source).
  if (exchange) exchange->finish();
  if (total_hint && stats.reports != total_hint && (!exchange || merger))
    throw Error("the scenario source delivered " + std::to_string(stats.reports) + " reports but declared " +
                std::to_string(total_hint) + " (total_reports); the output would be incomplete");
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (profiler) profiler->impl().end_run(stats, scenario_names_for(weighting, source.schema()));
  return stats;
}

}  // namespace headsep
