#include "headsep/run.hpp"

#include <cmath>

#include "headsep/error.hpp"

namespace headsep {
namespace {

template <class T>
void compute_slot(const ReportBatch& batch, const std::vector<std::vector<T>>& axis, const WeightBlock& w,
                  std::vector<std::vector<T>>& wconv, SimdLevel level, MetricBlock& out) {
  const std::size_t n = batch.n_reports();
  out.resize(w.heads, static_cast<std::uint32_t>(axis.size()), n);
  std::vector<const T*> axis_ptr, weight_ptr;
  for (const auto& a : axis) axis_ptr.push_back(a.data());
  if constexpr (std::is_same_v<T, double>) {
    for (const auto& r : w.rows) weight_ptr.push_back(r.data());
  } else {
    wconv.resize(w.rows.size());
    for (std::size_t h = 0; h < w.rows.size(); ++h) {
      wconv[h].assign(w.rows[h].begin(), w.rows[h].end());
      weight_ptr.push_back(wconv[h].data());
    }
  }
  KernelArgs<T> a;
  a.n_reports = n;
  a.token_offset = batch.token_offset.data();
  a.axes = static_cast<std::uint32_t>(axis.size());
  a.heads = w.heads;
  a.axis = axis_ptr.data();
  a.weight = weight_ptr.data();
  a.stride = n;
  if constexpr (std::is_same_v<T, double>) {
    a.context = out.context.data();
    a.difference = out.difference.data();
    a.pairwise = out.pairwise.data();
    a.separation = out.separation.data();
    compute_metrics(a, level);
  } else {
    std::vector<float> ctx(out.context.size()), diff(out.difference.size()), pw(out.pairwise.size()), sep(n);
    a.context = ctx.data(), a.difference = diff.data(), a.pairwise = pw.data(), a.separation = sep.data();
    compute_metrics(a, level);
    out.context.assign(ctx.begin(), ctx.end());
    out.difference.assign(diff.begin(), diff.end());
    out.pairwise.assign(pw.begin(), pw.end());
    out.separation.assign(sep.begin(), sep.end());
  }
}

void check_weights(const ReportBatch& batch, const WeightBlock& w, const std::string& scenario) {
  for (std::uint32_t h = 0; h <= w.heads; ++h)
    for (std::size_t r = 0; r < batch.n_reports(); ++r)
      for (auto t = batch.token_offset[r]; t < batch.token_offset[r + 1]; ++t) {
        double v = w.rows[h][t];
        if (!std::isfinite(v) || v < 0)
          throw Error("report '" + batch.report_id(r) + "', scenario '" + scenario + "': " +
                      (h ? "head" + std::to_string(h) : std::string("single")) + " weight of token " +
                      std::to_string(t - batch.token_offset[r] + 1) + " is " + std::to_string(v) +
                      " (weights must be finite and >= 0)");
      }
}

}  // namespace

void run(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& opt,
         ResultSink& sink) {
  const auto own = weighting.own_scenarios();
  ReportBatch batch;
  WeightBlock w;
  std::vector<std::vector<double>> axis64;
  std::vector<std::vector<float>> axis32, wconv;
  std::vector<std::vector<double>> wconv64;
  BatchResult result;
  while (source.next(batch, opt.chunk_reports)) {
    const std::size_t slots = own.empty() ? batch.scenarios.size() : own.size();
    result.batch = &batch;
    result.scenario_names.clear();
    result.metrics.resize(slots);
    if (opt.precision == Precision::f64) axes.project(batch, axis64);
    else axes.project(batch, axis32);
    for (std::size_t j = 0; j < slots; ++j) {
      const std::string& name = own.empty() ? source.schema().scenario_names[batch.scenarios[j]] : own[j];
      result.scenario_names.push_back(&name);
      w.resize(weighting.heads(), batch.n_tokens());
      weighting.weights(batch, static_cast<std::uint32_t>(j), w);
      check_weights(batch, w, name);
      if (opt.precision == Precision::f64) compute_slot(batch, axis64, w, wconv64, opt.simd, result.metrics[j]);
      else compute_slot(batch, axis32, w, wconv, opt.simd, result.metrics[j]);
      for (std::size_t r = 0; r < batch.n_reports(); ++r) {
        const auto& m = result.metrics[j];
        bool ok = std::isfinite(m.separation[r]);
        for (std::uint32_t h = 0; ok && h <= m.heads; ++h)
          for (std::uint32_t c = 0; c < m.axes; ++c) ok = ok && std::isfinite(m.ctx(h, c, r));
        if (!ok)
          throw Error("report '" + batch.report_id(r) + "', scenario '" + name +
                      "': a context overflowed to a non-finite value (inputs too large)");
      }
    }
    sink.consume(result);
  }
}

}  // namespace headsep
