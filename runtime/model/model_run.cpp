// run_model (model_run.hpp): a oneTBB pipeline — serial input (sequential sources parse; random-
// access ones only get an index) → parallel: generate, token ids, axes, BERT forward with every
// head measured, per-batch sums → serial, in batch order: merge into the scenario's sums.
#include "headsep/model_run.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "headsep/error.hpp"
#include "headsep/run.hpp"
#include "profile/profiler_impl.hpp"
#include "support/token_pool.hpp"
#include "support/tsan_order.hpp"

namespace headsep {
namespace {

struct Sums {
  std::uint64_t reports = 0, tokens = 0;
  std::vector<double> head, ctx, pair, dist;
  double flops = 0;
  std::vector<QuantileSketch> entropy, separation;  // the batch's distributions (ModelSummary::Scenario)
  TopK top{0};
  std::vector<std::pair<std::uint64_t, std::string>> top_ids;
  std::vector<ModelMap> maps;  // of the batch's top (keep_maps)
};

struct Item {
  ReportBatch batch;
  std::uint64_t index = 0;
  std::string scenario;
  Sums sums;
  std::exception_ptr error;  // a stage's failure, raised by the ordered output stage (the first bad batch wins)
};

struct Scratch {
  BertScratch bert;
  std::vector<std::uint32_t> ids;
  std::vector<std::vector<float>> axis32;
  std::vector<const float*> axis_ptr;
  std::vector<std::vector<double>> ctx, hs, ps;
  std::vector<BertLayerOut> outs;
  std::vector<double> sep, report_sep;  // per head and report; per report
  std::vector<std::vector<float>> maps;  // one report's maps per layer (keep_maps)
};

std::string scenario_of(const ReportBatch& b, const Schema& s) {
  if (b.scenarios.empty()) return "all";
  std::string n;
  for (auto j : b.scenarios) n += (n.empty() ? "" : "+") + s.scenario_names.at(j);
  return n;
}

}  // namespace

ModelSummary run_model(ReportSource& source, const BertModel& model, const AxisMap& axes, const ModelRunOptions& opt) {
  const BertConfig& cfg = model.config();
  const Schema& schema = source.schema();
  const auto tid = std::find(schema.feature_names.begin(), schema.feature_names.end(), "token_id");
  if (tid == schema.feature_names.end())
    throw Error("--model: the scenario generator gives no 'token_id' feature (use the text or ops-text generator, "
                "which tokenize with the model's vocab.txt)");
  const std::size_t id_col = static_cast<std::size_t>(tid - schema.feature_names.begin());
  const std::size_t L = cfg.layers, H = cfg.heads, H1 = H + 1, P = H * (H - 1) / 2, C = axes.size();

  ModelSummary out;
  out.model = model.name();
  out.layers = cfg.layers;
  out.heads = cfg.heads;
  out.axes = axes.names();
  out.top = opt.top;
  out.simd = std::string(to_string(opt.simd));
  const unsigned threads = opt.threads ? opt.threads : static_cast<unsigned>(tbb::info::default_concurrency());
  out.threads = threads;
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
  const std::size_t chunk = std::max<std::size_t>(1, opt.chunk_reports);
  const bool random = source.random_access();
  tbb::enumerable_thread_specific<Scratch> scratch;
  std::map<std::string, std::size_t> index_of;
  std::uint64_t next_index = 0;
  // Random-access sources: chunks up to total_reports (when known), else until one comes back empty.
  const std::uint64_t chunks = random && source.total_reports() ? (source.total_reports() + chunk - 1) / chunk : 0;
  std::atomic<bool> done{false};

  // --profile (runtime/profile/, the engine's profiler): the parallel stage's clock moves from
  // token ids + axes to the forward to the head metrics; without a profiler each is a branch.
  auto compute = [&](Item& it, prof::StageTimer& timer) {
    ReportBatch& b = it.batch;
    timer.to(prof::kAxes);
    if (random) it.scenario = scenario_of(b, schema);  // a random-access schema is fixed
    const std::size_t R = b.n_reports(), T = b.n_tokens();
    Scratch& s = scratch.local();
    s.ids.resize(T);
    const double* col = b.features.at(id_col).data();
    for (std::size_t r = 0; r < R; ++r)
      for (std::uint64_t t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
        const double v = col[t];
        if (!(v >= 0 && v < double(cfg.vocab_size) && v == std::floor(v)))
          throw Error("report '" + b.report_id(r) + "': token " + std::to_string(t - b.token_offset[r] + 1) +
                      ": token_id " + std::to_string(v) + " is not an id of the model's vocabulary");
        s.ids[t] = static_cast<std::uint32_t>(v);
      }
    for (std::size_t r = 0; r < R; ++r)
      if (b.report_length(r) > cfg.max_positions)
        throw Error("report '" + b.report_id(r) + "': " + std::to_string(b.report_length(r)) +
                    " tokens, over the model's " + std::to_string(cfg.max_positions) + " positions");
    axes.project<float>(b, s.axis32);
    s.axis_ptr.resize(C);
    for (std::size_t c = 0; c < C; ++c) s.axis_ptr[c] = s.axis32[c].data();
    s.ctx.resize(L), s.hs.resize(L), s.ps.resize(L), s.outs.resize(L);
    for (std::size_t l = 0; l < L; ++l) {
      s.ctx[l].assign(H1 * C * R, 0.0);
      s.hs[l].assign(H1 * kHeadStats * R, 0.0);
      s.ps[l].assign(std::max<std::size_t>(1, P * kPairStats * R), 0.0);
      s.outs[l] = BertLayerOut{};
      s.outs[l].context = s.ctx[l].data();
      s.outs[l].head_stats = s.hs[l].data();
      s.outs[l].pair_stats = s.ps[l].data();
      s.outs[l].stride = R;
    }
    timer.to(prof::kForward);
    model.forward(s.ids.data(), b.token_offset.data(), R, static_cast<std::uint32_t>(C), s.axis_ptr.data(), opt.simd,
                  s.outs, nullptr, s.bert);
    timer.to(prof::kHeads);
    Sums& m = it.sums;
    m.reports = R;
    m.tokens = T;
    m.flops = model.flops(b.token_offset.data(), R);
    m.head.assign(L * H1 * kHeadStats, 0.0);
    m.ctx.assign(L * H1 * C, 0.0);
    m.pair.assign(L * P * kPairStats, 0.0);
    m.dist.assign(L * P, 0.0);
    m.entropy.assign(L * H1, QuantileSketch());
    m.separation.assign(L * H, QuantileSketch());
    s.report_sep.assign(R, 0.0);
    for (std::size_t l = 0; l < L; ++l) {
      s.sep.assign(H * R, 0.0);  // [(h-1)*R + r]: sum of the distances to the other heads
      for (std::size_t r = 0; r < R; ++r) {
        for (std::size_t h = 0; h < H1; ++h) {
          for (std::size_t k = 0; k < kHeadStats; ++k) {
            const double v = s.hs[l][(h * kHeadStats + k) * R + r];
            if (!std::isfinite(v))
              throw Error("report '" + b.report_id(r) + "': layer " + std::to_string(l) + " head " + std::to_string(h) +
                          ": " + std::string(head_stat_name(static_cast<std::uint32_t>(k))) + " is not finite");
            m.head[(l * H1 + h) * kHeadStats + k] += v;
          }
          for (std::size_t c = 0; c < C; ++c) m.ctx[(l * H1 + h) * C + c] += s.ctx[l][(h * C + c) * R + r];
        }
        std::size_t p = 0;
        for (std::size_t i = 1; i <= H; ++i)
          for (std::size_t j = i + 1; j <= H; ++j, ++p) {
            for (std::size_t k = 0; k < kPairStats; ++k) m.pair[(l * P + p) * kPairStats + k] += s.ps[l][(p * kPairStats + k) * R + r];
            double d2 = 0;
            for (std::size_t c = 0; c < C; ++c) {
              const double d = s.ctx[l][(i * C + c) * R + r] - s.ctx[l][(j * C + c) * R + r];
              d2 += d * d;
            }
            const double d = std::sqrt(d2);
            m.dist[l * P + p] += d;
            s.sep[(i - 1) * R + r] += d, s.sep[(j - 1) * R + r] += d;
            s.report_sep[r] += d;
          }
      }
      for (std::size_t h = 0; h < H1; ++h) m.entropy[l * H1 + h].add(s.hs[l].data() + (h * kHeadStats + kEntropy) * R, R);
      for (std::size_t h = 0; h < H; ++h) {
        for (std::size_t r = 0; r < R; ++r) s.sep[h * R + r] = H > 1 ? s.sep[h * R + r] / double(H - 1) : 0.0;
        m.separation[l * H + h].add(s.sep.data() + h * R, R);
      }
    }
    // The batch's top reports by separation (mean over layers and pairs): any report of the
    // scenario's top is in its batch's top.
    m.top = TopK(opt.top_reports);
    for (std::size_t r = 0; r < R; ++r) {
      const double v = L * P > 0 ? s.report_sep[r] / double(L * P) : 0.0;
      if (!std::isfinite(v)) throw Error("report '" + b.report_id(r) + "': its head separation is not finite");
      m.top.add(v, b.first_report + r);
    }
    for (const auto& [v, index] : m.top.sorted()) {
      const std::size_t r = index - b.first_report;
      m.top_ids.emplace_back(index, b.report_id(r));
      if (!opt.keep_maps) continue;
      // Recomputed alone with its maps (grouping never changes a bit: the same metrics).
      const std::uint64_t off[2] = {b.token_offset[r], b.token_offset[r + 1]};
      const std::size_t n = off[1] - off[0];
      const std::uint64_t zero = 0;
      std::vector<double> c1(H1 * C + 1), h1(H1 * kHeadStats), p1(P * kPairStats + 1);
      std::vector<BertLayerOut> outs(L);
      s.maps.resize(L);
      for (std::size_t l = 0; l < L; ++l) {
        s.maps[l].assign(H1 * n * n, 0.0f);
        outs[l].context = c1.data(), outs[l].head_stats = h1.data(), outs[l].pair_stats = p1.data(), outs[l].stride = 1;
        outs[l].maps = s.maps[l].data(), outs[l].maps_offset = &zero;
      }
      timer.to(prof::kForward);
      model.forward(s.ids.data(), off, 1, static_cast<std::uint32_t>(C), s.axis_ptr.data(), opt.simd, outs, nullptr, s.bert);
      timer.to(prof::kHeads);
      ModelMap mm;
      mm.id = b.report_id(r);
      mm.index = index;
      mm.separation = v;
      mm.n = static_cast<std::uint32_t>(n);
      mm.keys = static_cast<std::uint32_t>(std::min(n, opt.map_tokens));
      for (std::size_t k = 0; k < mm.keys; ++k) mm.tokens.push_back(b.token_name(r, off[0] + k));
      mm.maps.reserve(L * H1 * mm.keys * mm.keys);
      for (std::size_t l = 0; l < L; ++l)
        for (std::size_t h = 0; h < H1; ++h)
          for (std::size_t q = 0; q < mm.keys; ++q)
            for (std::size_t k = 0; k < mm.keys; ++k) mm.maps.push_back(s.maps[l][(h * n + q) * n + k]);
      m.maps.push_back(std::move(mm));
    }
  };

  Profiler* const profiler = opt.profiler;
  if (profiler) {
    profiler->impl().begin_run(prof::RunSetup{threads, random, false, source.label(), {}, {"merge"}}, model.name());
  }
  const auto t0 = std::chrono::steady_clock::now();
  double flops = 0;
  std::uint64_t delivered = 0, batches = 0;
  bool input_failed = false;
  // ThreadSanitizer tokens (tsan_order.hpp): the filters built, the input and output stages'
  // invocations, everything any stage did (for what follows the pipeline).
  static const char built = 0;
  const char input_order = 0, output_order = 0, all_stages = 0;
  // Items in flight (raw-pointer tokens: token_pool.hpp says why).
  detail::TokenPool<Item> pool;
  auto input = [&](tbb::flow_control& fc) -> Item* {
    if (input_failed || done || (chunks && next_index >= chunks)) {
      fc.stop();
      return nullptr;
    }
    Item* it = pool.take();
    *it = Item{};
    it->index = next_index++;
    if (!random) {
      try {
        if (!source.next(it->batch, chunk)) {
          done = true;
          fc.stop();
          pool.give(it);
          return nullptr;
        }
        it->scenario = scenario_of(it->batch, schema);
      } catch (...) {
        // Handed on, not thrown: an earlier batch still computing may fail too and must win.
        it->error = std::current_exception();
        input_failed = true;
      }
    }
    return it;
  };
  auto work = [&](Item& it) {
    if (it.error) return;
    prof::StageTimer timer(profiler, it.index);
    try {
      if (random) timer.to(prof::kGenerate);
      if (random && !source.fill(it.index, chunk, it.batch)) return;  // past the end: empty
      timer.reports(it.batch.n_reports());
      compute(it, timer);
    } catch (...) {
      it.error = std::current_exception();
    }
  };
  auto merge = [&](Item& it) {
    if (it.error) {
      if (random && done) return;  // a chunk past the end: whether it ran at all depends on timing
      std::rethrow_exception(it.error);
    }
    if (it.sums.reports == 0) {
      if (random) done = true;
      return;
    }
    prof::StageTimer timer(profiler, it.index);
    timer.reports(it.sums.reports);
    timer.to(prof::consume(0));
    delivered += it.sums.reports;
    ++batches;
    auto [pos, fresh] = index_of.try_emplace(it.scenario, out.scenarios.size());
    if (fresh) {
      ModelSummary::Scenario sc;
      sc.name = it.scenario;
      sc.head.assign(it.sums.head.size(), 0.0);
      sc.ctx.assign(it.sums.ctx.size(), 0.0);
      sc.pair.assign(it.sums.pair.size(), 0.0);
      sc.dist.assign(it.sums.dist.size(), 0.0);
      sc.entropy.assign(it.sums.entropy.size(), QuantileSketch());
      sc.separation.assign(it.sums.separation.size(), QuantileSketch());
      sc.top = TopK(opt.top_reports);
      out.scenarios.push_back(std::move(sc));
    }
    ModelSummary::Scenario& sc = out.scenarios[pos->second];
    sc.reports += it.sums.reports;
    sc.tokens += it.sums.tokens;
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
    flops += it.sums.flops;
  };
  const auto filters =
      tbb::make_filter<void, Item*>(tbb::filter_mode::serial_in_order,
                                    [&](tbb::flow_control& fc) -> Item* {
                                      tsan::acquire(&built);
                                      tsan::ReleaseOnExit end{&all_stages};
                                      tsan::acquire(&input_order);
                                      prof::StageTimer timer(profiler, next_index);
                                      timer.to(prof::kInput);
                                      Item* it = input(fc);
                                      if (it) timer.reports(it->batch.n_reports());
                                      else timer.drop();
                                      if (it) tsan::release(it);
                                      tsan::release(&input_order);
                                      return it;
                                    }) &
      tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel,
                                     [&](Item* it) {
                                       tsan::acquire(&built);
                                       tsan::ReleaseOnExit end{&all_stages};
                                       tsan::acquire(it);
                                       work(*it);
                                       tsan::release(it);
                                       return it;
                                     }) &
      tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order, [&](Item* it) {
        tsan::acquire(&built);
        tsan::ReleaseOnExit end{&all_stages};
        tsan::acquire(&output_order);
        tsan::acquire(it);
        merge(*it);  // may throw: the pool still owns the item
        pool.give(it);
        tsan::release(&output_order);
      });
  tsan::release(&built);
  try {
    tbb::parallel_pipeline(2 * threads, filters);
  } catch (...) {
    tsan::acquire(&all_stages);
    throw;
  }
  tsan::acquire(&all_stages);
  // A source that declared its number of reports must deliver exactly that many (as run()).
  if (source.total_reports() && delivered != source.total_reports())
    throw Error("the scenario source delivered " + std::to_string(delivered) + " reports but declared " +
                std::to_string(source.total_reports()) + " (total_reports); the summary would be incomplete");
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.gflop = flops * 1e-9;
  if (profiler) {
    RunStats st;  // one (report, scenario) group per report: the model has no weighting scenarios
    st.seconds = out.seconds, st.batches = batches, st.reports = delivered, st.groups = delivered;
    profiler->impl().end_run(st, {});
  }
  return out;
}

namespace {

struct View {
  const ModelSummary& s;
  const ModelSummary::Scenario& sc;
  std::size_t H1() const { return s.heads + 1; }
  std::size_t P() const { return std::size_t(s.heads) * (s.heads - 1) / 2; }
  double n() const { return sc.reports ? double(sc.reports) : 1.0; }
  double head(std::size_t l, std::size_t h, std::uint32_t k) const { return sc.head[(l * H1() + h) * kHeadStats + k] / n(); }
  double ctx(std::size_t l, std::size_t h, std::size_t c) const { return sc.ctx[(l * H1() + h) * s.axes.size() + c] / n(); }
  double diff(std::size_t l, std::size_t h, std::size_t c) const { return ctx(l, h, c) - ctx(l, 0, c); }
  double pair(std::size_t l, std::size_t p, std::uint32_t k) const { return sc.pair[(l * P() + p) * kPairStats + k] / n(); }
  double dist(std::size_t l, std::size_t p) const { return sc.dist[l * P() + p] / n(); }
  std::size_t pair_index(std::size_t i, std::size_t j) const {  // heads 1-based, i < j
    const std::size_t H = s.heads;
    return (i - 1) * H - (i - 1) * i / 2 + (j - i - 1);
  }
  /// Mean over the other heads of the layer of the pair value f(l, p).
  template <class F>
  double head_mean(std::size_t l, std::size_t h, F f) const {
    if (s.heads < 2) return 0;
    double t = 0;
    for (std::size_t o = 1; o <= s.heads; ++o)
      if (o != h) t += f(l, pair_index(std::min(h, o), std::max(h, o)));
    return t / double(s.heads - 1);
  }
  double separation(std::size_t l, std::size_t h) const {
    return head_mean(l, h, [&](std::size_t ll, std::size_t p) { return dist(ll, p); });
  }
  double js(std::size_t l, std::size_t h) const {
    return head_mean(l, h, [&](std::size_t ll, std::size_t p) { return pair(ll, p, kJensenShannon); });
  }
  double layer_separation(std::size_t l) const {
    double t = 0;
    for (std::size_t p = 0; p < P(); ++p) t += dist(l, p);
    return P() ? t / double(P()) : 0.0;
  }
  struct Lean {
    std::size_t layer, head;
    double value;
  };
  /// Heads leaning most to axis a over axis b relative to their layer's baseline.
  std::vector<Lean> leaning(std::size_t a, std::size_t b) const {
    std::vector<Lean> v;
    for (std::size_t l = 0; l < s.layers; ++l)
      for (std::size_t h = 1; h <= s.heads; ++h) v.push_back({l, h, diff(l, h, a) - diff(l, h, b)});
    std::stable_sort(v.begin(), v.end(), [](const Lean& x, const Lean& y) { return x.value > y.value; });
    if (v.size() > s.top) v.resize(s.top);
    return v;
  }
};

}  // namespace

nlohmann::ordered_json quantiles(const QuantileSketch& q) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!q.count()) return j;
  for (auto [name, p] : {std::pair{"p01", 0.01}, {"p10", 0.10}, {"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}}) j[name] = q.quantile(p);
  return j;
}

std::string ModelSummary::json() const {
  nlohmann::ordered_json j;
  j["model"] = model;
  j["layers"] = layers;
  j["heads"] = heads;
  j["axes"] = axes;
  j["baseline"] = "head 0 of each layer: the layer's own Q/K/V projections as one full-width head, softmax(Q K^T / sqrt(hidden))";
  j["top_by"] = "a report's separation: the mean over layers and head pairs of the pair's context distance (ties: smaller report index)";
  j["threads"] = threads;
  j["simd"] = simd;
  j["seconds"] = seconds;
  j["gflop"] = gflop;
  for (const auto& sc : scenarios) {
    View v{*this, sc};
    nlohmann::ordered_json js;
    js["name"] = sc.name;
    js["reports"] = sc.reports;
    js["tokens"] = sc.tokens;
    for (std::size_t l = 0; l < layers; ++l) {
      nlohmann::ordered_json jl;
      jl["layer"] = l;
      jl["separation"] = v.layer_separation(l);
      for (std::size_t h = 0; h <= heads; ++h) {
        nlohmann::ordered_json jh;
        jh["head"] = h;
        for (std::uint32_t k = 0; k < kHeadStats; ++k) jh[std::string(head_stat_name(k))] = v.head(l, h, k);
        std::vector<double> ctx, diff;
        for (std::size_t c = 0; c < axes.size(); ++c) ctx.push_back(v.ctx(l, h, c)), diff.push_back(v.diff(l, h, c));
        jh["context"] = ctx;
        jh["entropy_quantiles"] = quantiles(sc.entropy.at(l * (heads + 1) + h));  // over reports
        if (h) {
          jh["difference"] = diff;
          jh["separation"] = v.separation(l, h);
          jh["separation_quantiles"] = quantiles(sc.separation.at(l * heads + h - 1));
          jh["js_divergence_mean"] = v.js(l, h);
        }
        if (h) jl["heads"].push_back(jh);
        else jl["baseline"] = jh;
      }
      for (std::size_t i = 1; i <= heads; ++i)
        for (std::size_t jj = i + 1; jj <= heads; ++jj) {
          const std::size_t p = v.pair_index(i, jj);
          nlohmann::ordered_json jp;
          jp["heads"] = {i, jj};
          for (std::uint32_t k = 0; k < kPairStats; ++k) jp[std::string(pair_stat_name(k))] = v.pair(l, p, k);
          jp["context_distance"] = v.dist(l, p);
          jl["pairs"].push_back(jp);
        }
      js["layers"].push_back(jl);
    }
    for (std::size_t a = 0; a < axes.size(); ++a)
      for (std::size_t b = 0; b < axes.size(); ++b) {
        if (a == b) continue;
        nlohmann::ordered_json jr;
        jr["toward"] = axes[a];
        jr["over"] = axes[b];
        for (const auto& x : v.leaning(a, b)) jr["heads"].push_back({{"layer", x.layer}, {"head", x.head}, {"lean", x.value}});
        js["relations"].push_back(jr);
      }
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& [value, index] : sc.top.sorted())
      top.push_back({{"report_id", sc.top_ids.at(index)}, {"report_index", index}, {"separation", value}});
    js["top"] = top;
    j["scenarios"].push_back(js);
  }
  return j.dump(1) + "\n";
}

std::string ModelSummary::table() const {
  std::string o;
  char buf[256];
  auto matrix = [&](const View& v, const char* title, auto cell, bool with_base) {
    o += title;
    o += "\nlayer";
    if (with_base) o += "   base";
    for (std::size_t h = 1; h <= heads; ++h) std::snprintf(buf, sizeof buf, " %6s", ("h" + std::to_string(h)).c_str()), o += buf;
    o += "\n";
    for (std::size_t l = 0; l < layers; ++l) {
      std::snprintf(buf, sizeof buf, "%5zu", l), o += buf;
      for (std::size_t h = with_base ? 0 : 1; h <= heads; ++h) std::snprintf(buf, sizeof buf, " %6.3f", cell(v, l, h)), o += buf;
      o += "\n";
    }
  };
  for (const auto& sc : scenarios) {
    View v{*this, sc};
    std::snprintf(buf, sizeof buf, "\n%s, scenario '%s': %llu reports, %llu tokens; %u layers x %u heads (base = the layer's full-width single head)\n",
                  model.c_str(), sc.name.c_str(), static_cast<unsigned long long>(sc.reports),
                  static_cast<unsigned long long>(sc.tokens), layers, heads);
    o += buf;
    matrix(v, "mean attention entropy (nats)", [](const View& x, std::size_t l, std::size_t h) { return x.head(l, h, kEntropy); }, true);
    matrix(v, "separation: mean context distance to the other heads of the layer",
           [](const View& x, std::size_t l, std::size_t h) { return x.separation(l, h); }, false);
    matrix(v, "mean Jensen-Shannon divergence to the other heads of the layer (nats)",
           [](const View& x, std::size_t l, std::size_t h) { return x.js(l, h); }, false);
    o += "layer separation (mean pairwise context distance) and its most separated pair:\n";
    for (std::size_t l = 0; l < layers; ++l) {
      std::size_t bi = 1, bj = 2;
      double best = -1;
      for (std::size_t i = 1; i <= heads; ++i)
        for (std::size_t j = i + 1; j <= heads; ++j)
          if (v.dist(l, v.pair_index(i, j)) > best) best = v.dist(l, v.pair_index(i, j)), bi = i, bj = j;
      std::snprintf(buf, sizeof buf, "  layer %zu: %.4f; heads %zu-%zu %.4f (JS %.4f)\n", l, v.layer_separation(l), bi, bj,
                    heads > 1 ? best : 0.0, heads > 1 ? v.pair(l, v.pair_index(bi, bj), kJensenShannon) : 0.0);
      o += buf;
    }
    o += "heads that separate the relations most (mean context difference from the layer's single head, toward minus over):\n";
    for (std::size_t a = 0; a < axes.size(); ++a)
      for (std::size_t b = 0; b < axes.size(); ++b) {
        if (a == b) continue;
        o += "  " + axes[a] + " over " + axes[b] + ":";
        for (const auto& x : v.leaning(a, b)) {
          std::snprintf(buf, sizeof buf, " L%zu.h%zu %+.4f", x.layer, x.head, x.value);
          o += buf;
        }
        o += "\n";
      }
  }
  return o;
}

}  // namespace headsep
