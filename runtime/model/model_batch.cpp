// ModelBatch (model/model_batch.hpp): one batch through the model, the steps of run_model's
// parallel stage in the order they run.
#include "model/model_batch.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "headsep/error.hpp"
#include "kernels/metrics_scalar.hpp"
#include "support/metric_check.hpp"

namespace headsep {
namespace {
std::string number(double v) {  // as the user wrote it: 40000, not 40000.000000
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::ostringstream o;
  o << std::setprecision(17) << v;
  return o.str();
}
}  // namespace

ModelBatch::ModelBatch(const Architecture& model, const AxisMap& axes, const ModelRunOptions& opt, std::size_t id_col,
                       std::size_t status_col)
    : model_(model),
      axes_(axes),
      opt_(opt),
      cfg_(model.shape()),
      id_col_(id_col),
      status_col_(status_col),
      L(cfg_.layers),
      H(cfg_.heads),
      H1(H + 1),
      P(H * (H - 1) / 2),
      C(axes.size() + opt.model_axes.size()),
      CF(axes.size()),
      CS(opt.model_axes.semantic.size()),
      CD(opt.model_axes.direction.size()),
      directions_{static_cast<std::uint32_t>(CD), opt.model_axes.directions.data()},
      dump_layer_(L, opt.dump_layers.empty()) {
  for (auto l : opt.dump_layers) {
    if (l >= L)
      throw UsageError("--attention-layers: layer " + std::to_string(l) + " is not a layer of the model (0.." +
                       std::to_string(L - 1) + ")");
    dump_layer_[l] = true;
  }
}

void ModelBatch::measure(const ReportBatch& b, BatchScratch& s, BatchResult& res, BatchSums& sums,
                         prof::StageTimer& timer) const {
  token_ids(b, s);
  check_lengths(b);
  prepare_outputs(b, s, res);
  timer.to(prof::kForward);
  s.bert.clock = ForwardClock(timer.on());
  model_.forward(s.ids.data(), b.token_offset.data(), b.n_reports(), static_cast<std::uint32_t>(C), s.axis_ptr.data(),
                 opt_.simd, s.outs, nullptr, s.bert, nullptr, &directions_);
  timer.forward_parts(s.bert.clock);
  timer.to(prof::kHeads);
  separations(res.metrics);
  res.token_ids = s.ids;
  report_status(b, res);
  head_sums(b, res.metrics, s, sums);
  text_status(b, res, sums);
  sums.without_value = res.tokens_without_axis_value = without_value(b, s);
  top_reports(b, s, sums, timer);
  dumps(b, s, res, timer);
}

void ModelBatch::sums_of(const ReportBatch& b, const BatchResult& res, BatchScratch& s, BatchSums& sums,
                         prof::StageTimer& timer) const {
  if (opt_.keep_maps) throw Error("run_model: keep_maps needs every chunk computed by this process (no exchange)");
  if (res.metrics.size() != L)
    throw Error("a model chunk arrived with " + std::to_string(res.metrics.size()) + " layers, not " + std::to_string(L));
  for (const MetricBlock& m : res.metrics)
    if (m.heads != H || m.axes != C || m.n != b.n_reports() || m.head_stat_count != kHeadStats ||
        m.pair_stat_count != kPairStats || m.context.size() != H1 * C * m.n || m.pairwise.size() != P * m.n ||
        m.head_stats.size() != H1 * kHeadStats * m.n || m.pair_stats.size() != P * kPairStats * m.n)
      throw Error("a model chunk arrived with metric rows of another model or axes: all ranks must run the same command");
  head_sums(b, res.metrics, s, sums);
  text_status(b, res, sums);
  sums.without_value = res.tokens_without_axis_value;
  top_reports(b, s, sums, timer);
}

/// Each report's text_status (the text generators' column, read at a report's first token: 0, 1
/// truncated, 2 empty) into res.report_status, which travels with the chunk under MPI.
void ModelBatch::report_status(const ReportBatch& b, BatchResult& res) const {
  res.report_status.clear();
  if (status_col_ == kNone) return;
  const double* col = b.features.at(status_col_).data();
  res.report_status.resize(b.n_reports());
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    const double v = col[b.token_offset[r]];
    if (v != 0 && v != 1 && v != 2)
      throw Error("report '" + b.report_id(r) + "': text_status " + number(v) + " is not 0, 1 (truncated) or 2 (empty)");
    res.report_status[r] = static_cast<std::uint8_t>(v);
  }
}

/// Empty and truncated reports counted from res.report_status (this process's chunk or another's).
void ModelBatch::text_status(const ReportBatch& b, const BatchResult& res, BatchSums& sums) const {
  if (status_col_ != kNone && res.report_status.size() != b.n_reports())
    throw Error("a model chunk arrived without its reports' text status: all ranks must run the same command");
  for (const std::uint8_t v : res.report_status) {
    if (v == 1) ++sums.truncated;
    else if (v == 2) ++sums.empty;
  }
}

/// The batch's token_id column as vocabulary ids, each checked.
void ModelBatch::token_ids(const ReportBatch& b, BatchScratch& s) const {
  const std::size_t R = b.n_reports();
  s.ids.resize(b.n_tokens());
  const double* col = b.features.at(id_col_).data();
  for (std::size_t r = 0; r < R; ++r)
    for (std::uint64_t t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
      const double v = col[t];
      if (!(v >= 0 && v < double(cfg_.vocab_size) && v == std::floor(v)))
        throw Error("report '" + b.report_id(r) + "': token " + std::to_string(t - b.token_offset[r] + 1) +
                    ": token_id " + number(v) + " is not an id of the model's vocabulary: vocab.txt and the embedding " +
                    "table (config.json vocab_size) hold ids 0.." + std::to_string(cfg_.vocab_size - 1));
      s.ids[t] = static_cast<std::uint32_t>(v);
    }
}

void ModelBatch::check_lengths(const ReportBatch& b) const {
  for (std::size_t r = 0; r < b.n_reports(); ++r)
    if (b.report_length(r) == 0)  // a model cannot run a zero-length sequence (transformers refuses it too)
      throw Error("report '" + b.report_id(r) + "': no token to measure (an empty sequence): give the report at least one token");
  for (std::size_t r = 0; r < b.n_reports(); ++r)
    if (b.report_length(r) > cfg_.max_positions)
      throw Error("report '" + b.report_id(r) + "': " + std::to_string(b.report_length(r)) +
                  " tokens, over the model's " + std::to_string(cfg_.max_positions) + " positions");
}

/// The axes as f32 rows: the AxisMap's from the features, the semantic axes' per id (s.ids); the
/// direction axes' are the forward's (their pointers null).
void ModelBatch::project_axes(const ReportBatch& b, BatchScratch& s) const {
  axes_.project<float>(b, s.axis32);
  const std::size_t T = b.n_tokens();
  s.axis32.resize(CF + CS);
  const float* table = opt_.model_axes.semantic_values.data();
  for (std::size_t k = 0; k < CS; ++k) {
    std::vector<float>& col = s.axis32[CF + k];
    col.resize(T);
    for (std::size_t t = 0; t < T; ++t) col[t] = table[std::size_t(s.ids[t]) * CS + k];
  }
  s.axis_ptr.assign(C, nullptr);
  for (std::size_t c = 0; c < CF + CS; ++c) s.axis_ptr[c] = s.axis32[c].data();
}

/// Tokens 0 on every axis given per token (none when the run has direction axes).
std::uint64_t ModelBatch::without_value(const ReportBatch& b, const BatchScratch& s) const {
  if (CD) return 0;
  std::uint64_t n = 0;
  for (std::size_t t = 0; t < b.n_tokens(); ++t) {
    bool any = false;
    for (std::size_t c = 0; c < CF + CS && !any; ++c) any = s.axis32[c][t] != 0.0f;
    n += !any;
  }
  return n;
}

/// The axes (project_axes), and per layer a zeroed MetricBlock (the rows) for the forward to fill.
void ModelBatch::prepare_outputs(const ReportBatch& b, BatchScratch& s, BatchResult& res) const {
  const std::size_t R = b.n_reports();
  project_axes(b, s);
  res.metrics.resize(L), s.outs.resize(L);
  res.layers.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    MetricBlock& m = res.metrics[l];
    m.head_stat_count = kHeadStats, m.pair_stat_count = kPairStats;
    m.resize(static_cast<std::uint32_t>(H), static_cast<std::uint32_t>(C), R);
    std::fill(m.context.begin(), m.context.end(), 0.0);
    std::fill(m.head_stats.begin(), m.head_stats.end(), 0.0);
    std::fill(m.pair_stats.begin(), m.pair_stats.end(), 0.0);
    s.outs[l] = AttentionOut{};
    s.outs[l].context = m.context.data();
    s.outs[l].head_stats = m.head_stats.data();
    s.outs[l].pair_stats = P ? m.pair_stats.data() : &s.no_pairs;
    s.outs[l].stride = R;
    res.layers[l] = static_cast<std::uint32_t>(l);
  }
}

/// Per layer and report the rows' differences from the baseline, pairwise context distances and
/// head separation: the engine's scalar kernel's arithmetic (kernels/metrics_scalar.hpp).
void ModelBatch::separations(std::vector<MetricBlock>& metrics) const {
  for (MetricBlock& m : metrics)
    for (std::size_t r = 0; r < m.n; ++r)
      kernels::separation_scalar(m.context.data(), m.difference.data(), m.pairwise.data(), m.separation.data(), H1,
                                 C, m.n, r);
}

/// The batch's sums over reports (head, context, pair statistics; pair distances) and its
/// distributions (entropy, separation); s.report_sep gets each report's total pair distance.
void ModelBatch::head_sums(const ReportBatch& b, const std::vector<MetricBlock>& metrics, BatchScratch& s,
                           BatchSums& m) const {
  const std::size_t R = b.n_reports();
  m.reports = R;
  m.tokens = b.n_tokens();
  m.flops = model_.flops(b.token_offset.data(), R);
  m.head.assign(L * H1 * kHeadStats, 0.0);
  m.ctx.assign(L * H1 * C, 0.0);
  m.pair.assign(L * P * kPairStats, 0.0);
  m.dist.assign(L * P, 0.0);
  m.entropy.assign(L * H1, QuantileSketch());
  m.separation.assign(L * H, QuantileSketch());
  s.report_sep.assign(R, 0.0);
  for (std::size_t l = 0; l < L; ++l) {
    const MetricBlock& mb = metrics[l];
    if (any_nonfinite_metric(mb))  // finite weights can still overflow f32 (a v_proj of 3e38): nothing non-finite leaves
      for (std::size_t r = 0; r < R; ++r)
        if (const std::string what = nonfinite_metric(mb, r); !what.empty())
          throw Error("report '" + b.report_id(r) + "': layer " + std::to_string(l) + ": " + what +
                      " is not finite: the model's arithmetic overflowed (weights or activations too large for f32)");
    s.sep.assign(H * R, 0.0);  // [(h-1)*R + r]: sum of the distances to the other heads
    for (std::size_t r = 0; r < R; ++r) {
      for (std::size_t h = 0; h < H1; ++h) {
        for (std::size_t k = 0; k < kHeadStats; ++k) {
          m.head[(l * H1 + h) * kHeadStats + k] += mb.head_stats[(h * kHeadStats + k) * R + r];
        }
        for (std::size_t c = 0; c < C; ++c) m.ctx[(l * H1 + h) * C + c] += mb.context[(h * C + c) * R + r];
      }
      std::size_t p = 0;
      for (std::size_t i = 1; i <= H; ++i)
        for (std::size_t j = i + 1; j <= H; ++j, ++p) {
          for (std::size_t k = 0; k < kPairStats; ++k)
            m.pair[(l * P + p) * kPairStats + k] += mb.pair_stats[(p * kPairStats + k) * R + r];
          const double d = mb.pairwise[p * R + r];
          m.dist[l * P + p] += d;
          s.sep[(i - 1) * R + r] += d, s.sep[(j - 1) * R + r] += d;
          s.report_sep[r] += d;
        }
    }
    for (std::size_t h = 0; h < H1; ++h) m.entropy[l * H1 + h].add(mb.head_stats.data() + (h * kHeadStats + kEntropy) * R, R);
    for (std::size_t h = 0; h < H; ++h) {
      for (std::size_t r = 0; r < R; ++r) s.sep[h * R + r] = H > 1 ? s.sep[h * R + r] / double(H - 1) : 0.0;
      m.separation[l * H + h].add(s.sep.data() + h * R, R);
    }
  }
}

// The batch's top reports by separation (mean over layers and pairs): any report of the
// scenario's top is in its batch's top.
void ModelBatch::top_reports(const ReportBatch& b, BatchScratch& s, BatchSums& m, prof::StageTimer& timer) const {
  m.top = TopK(opt_.top_reports);
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    const double v = L * P > 0 ? s.report_sep[r] / double(L * P) : 0.0;
    if (!std::isfinite(v)) throw Error("report '" + b.report_id(r) + "': its head separation is not finite");
    m.top.add(v, b.first_report + r);
  }
  for (const auto& [v, index] : m.top.sorted()) {
    const std::size_t r = index - b.first_report;
    m.top_ids.emplace_back(index, b.report_id(r));
    if (!opt_.keep_maps) continue;
    m.maps.push_back(report_maps(b, r, index, v, s, timer));
  }
}

// Report r recomputed alone with its maps into s.maps[l] ((H+1) x n x n, query-major; grouping
// never changes a bit: the same metrics as in the batch).
void ModelBatch::report_forward(const ReportBatch& b, std::size_t r, BatchScratch& s, prof::StageTimer& timer) const {
  const std::uint64_t off[2] = {b.token_offset[r], b.token_offset[r + 1]};
  const std::size_t n = off[1] - off[0];
  const std::uint64_t zero = 0;
  std::vector<double> c1(H1 * C + 1), h1(H1 * kHeadStats), p1(P * kPairStats + 1);
  std::vector<AttentionOut> outs(L);
  s.maps.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    s.maps[l].assign(H1 * n * n, 0.0f);
    outs[l].context = c1.data(), outs[l].head_stats = h1.data(), outs[l].pair_stats = p1.data(), outs[l].stride = 1;
    outs[l].maps = s.maps[l].data(), outs[l].maps_offset = &zero;
  }
  timer.to(prof::kForward);
  s.bert.clock = ForwardClock(timer.on());
  model_.forward(s.ids.data(), off, 1, static_cast<std::uint32_t>(C), s.axis_ptr.data(), opt_.simd, outs, nullptr, s.bert,
                 nullptr, &directions_);
  timer.forward_parts(s.bert.clock);
  timer.to(prof::kHeads);
}

ModelMap ModelBatch::report_maps(const ReportBatch& b, std::size_t r, std::uint64_t index, double separation,
                                 BatchScratch& s, prof::StageTimer& timer) const {
  report_forward(b, r, s, timer);
  const std::size_t n = b.report_length(r);
  ModelMap mm;
  mm.id = b.report_id(r);
  mm.index = index;
  mm.separation = separation;
  mm.n = static_cast<std::uint32_t>(n);
  mm.keys = static_cast<std::uint32_t>(std::min(n, opt_.map_tokens));
  for (std::size_t k = 0; k < mm.keys; ++k) mm.tokens.push_back(b.token_name(r, b.token_offset[r] + k));
  mm.maps.reserve(L * H1 * mm.keys * mm.keys);
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t h = 0; h < H1; ++h)
      for (std::size_t q = 0; q < mm.keys; ++q)
        for (std::size_t k = 0; k < mm.keys; ++k) mm.maps.push_back(s.maps[l][(h * n + q) * n + k]);
  return mm;
}

// ModelRunOptions::dump_reports: per slot (layer) one AttentionDump, the kept layers' maps of the
// chosen reports (every query); the other layers' dumps stay empty.
void ModelBatch::dumps(const ReportBatch& b, BatchScratch& s, BatchResult& res, prof::StageTimer& timer) const {
  res.dumps.clear();
  if (!opt_.dump_reports) return;
  res.dumps.resize(L);
  for (auto& d : res.dumps) d.heads = static_cast<std::uint32_t>(H);
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    if (!opt_.dump_reports(b, r)) continue;
    report_forward(b, r, s, timer);
    const std::size_t n = b.report_length(r);
    for (std::size_t l = 0; l < L; ++l) {
      if (!dump_layer_[l]) continue;
      AttentionDump& d = res.dumps[l];
      d.reports.push_back(static_cast<std::uint32_t>(r));
      d.queries.push_back(0);
      d.n_queries.push_back(static_cast<std::uint32_t>(n));
      d.maps_offset.push_back(d.maps.size());
      d.maps.insert(d.maps.end(), s.maps[l].begin(), s.maps[l].end());
    }
  }
}

}  // namespace headsep
