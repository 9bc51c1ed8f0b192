// The report's data: what Collector keeps while a run streams, joined with the Summary.
#include <algorithm>
#include <cmath>

#include "headsep/attention.hpp"
#include "headsep/summary.hpp"
#include "report/report.hpp"

namespace headsep::report {
namespace {

struct Partial : SinkPartial {
  struct Slot {
    TopK top{0}, map_top{0};
    std::vector<PlotReport> reports;  // payloads of the batch's top
    std::vector<AttentionMap> maps;   // maps of the batch's map_top
  };
  std::vector<Slot> slots;
};

AttentionMap cut_map(const BatchResult& res, const AttentionDump& d, std::size_t i, const MetricBlock& m,
                     const Limits& lim) {
  const auto& b = *res.batch;
  const std::size_t r = d.reports[i];
  const std::size_t n = b.report_length(r), nq = d.n_queries[i];
  AttentionMap a;
  a.id = b.report_id(r);
  a.index = b.first_report + r;
  a.separation = m.separation[r];
  a.n = std::uint32_t(n);
  a.first_query = d.queries[i];
  a.all_queries = std::uint32_t(nq);
  a.queries = std::uint32_t(std::min(nq, lim.map_tokens));
  a.keys = std::uint32_t(std::min(n, lim.map_tokens));
  for (std::size_t k = 0; k < a.keys; ++k) a.tokens.push_back(b.token_name(r, b.token_offset[r] + k));
  const float* src = d.maps.data() + d.maps_offset[i];
  for (std::uint32_t h = 0; h <= d.heads; ++h)
    for (std::uint32_t q = 0; q < a.queries; ++q)
      for (std::uint32_t k = 0; k < a.keys; ++k) a.maps.push_back(src[(std::size_t(h) * nq + q) * n + k]);
  return a;
}

Stats stats_of(const Summary::Metric& m) {
  Stats s;
  s.count = m.moments.count();
  const bool any = s.count > 0;
  s.mean = any ? m.moments.mean() : 0.0;
  s.std = m.moments.stddev();
  s.min = any ? m.moments.min() : 0.0;
  s.max = any ? m.moments.max() : 0.0;
  if (m.sketch.count()) {
    s.p01 = m.sketch.quantile(0.01), s.p10 = m.sketch.quantile(0.10), s.p50 = m.sketch.quantile(0.50);
    s.p90 = m.sketch.quantile(0.90), s.p99 = m.sketch.quantile(0.99);
  }
  s.exact = m.sketch.exact();
  return s;
}

}  // namespace

Collector::Collector(RunInfo info, Limits limits) : info_(std::move(info)), limits_(limits) {}

Collector::Kept& Collector::scenario(const std::string& name) {
  auto [it, inserted] = index_.try_emplace(name, scenarios_.size());
  if (inserted) {
    Kept k{name, 0, {}, {}, TopK(limits_.plot_reports), {}, TopK(limits_.map_reports), {}};
    k.context.resize(std::size_t(info_.heads + 1) * info_.axis_names.size());
    k.pairwise.resize(pair_count(info_.heads));
    scenarios_.push_back(std::move(k));
  }
  return scenarios_[it->second];
}

void Collector::prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const {
  auto p = std::make_unique<Partial>();
  const auto& b = *res.batch;
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const auto& m = res.metrics[j];
    Partial::Slot slot;
    slot.top = TopK(limits_.plot_reports);
    for (std::size_t r = 0; r < m.n; ++r) slot.top.add(m.separation[r], b.first_report + r);
    for (const auto& [value, index] : slot.top.sorted()) {
      const std::size_t r = index - b.first_report;
      PlotReport pr{b.report_id(r), index, value, {}, {}};
      if (!b.token_names.empty())
        for (std::size_t t = b.token_offset[r]; t < std::min(b.token_offset[r + 1], b.token_offset[r] + 16); ++t)
          pr.tokens.push_back(b.token_names[t]);
      for (std::uint32_t h = 0; h <= m.heads; ++h)
        for (std::uint32_t c = 0; c < m.axes; ++c) pr.context.push_back(m.ctx(h, c, r));
      slot.reports.push_back(std::move(pr));
    }
    slot.map_top = TopK(limits_.map_reports);
    if (j < res.dumps.size() && limits_.map_reports) {
      // The batch's top by the Summary's order; the engine kept their maps (keep_top_maps).
      for (std::size_t r = 0; r < m.n; ++r) slot.map_top.add(m.separation[r], b.first_report + r);
      std::vector<std::uint64_t> want;
      for (const auto& [v, index] : slot.map_top.sorted()) want.push_back(index);
      std::sort(want.begin(), want.end());
      const auto& d = res.dumps[j];
      for (std::size_t i = 0; i < d.reports.size(); ++i)
        if (std::binary_search(want.begin(), want.end(), b.first_report + d.reports[i]))
          slot.maps.push_back(cut_map(res, d, i, m, limits_));
    }
    p->slots.push_back(std::move(slot));
  }
  partial = std::move(p);
}

void Collector::consume(const BatchResult& res, SinkPartial* partial) {
  auto* p = static_cast<Partial*>(partial);
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const auto& m = res.metrics[j];
    Kept& s = scenario(*res.scenario_names[j]);
    s.count += m.n;
    // Means in report order (Moments), as the Summary's.
    for (std::size_t row = 0; row < s.context.size(); ++row) s.context[row].add(m.context.data() + row * m.n, m.n);
    for (std::size_t pr = 0; pr < s.pairwise.size(); ++pr) s.pairwise[pr].add(m.pairwise.data() + pr * m.n, m.n);
    auto& slot = p->slots[j];
    s.top.merge(slot.top);
    for (auto& r : slot.reports) s.reports.emplace(r.index, std::move(r));
    if (s.reports.size() > 4 * limits_.plot_reports + 16) {
      std::map<std::uint64_t, PlotReport> keep;
      for (const auto& [v, index] : s.top.sorted()) keep.emplace(index, std::move(s.reports.at(index)));
      s.reports.swap(keep);
    }
    // A map stays while its report is in the top: replaced when the report is evicted.
    s.map_top.merge(slot.map_top);
    for (auto& a : slot.maps) s.maps.emplace(a.index, std::move(a));
    if (!slot.maps.empty()) {
      std::map<std::uint64_t, AttentionMap> keep;
      for (const auto& [v, index] : s.map_top.sorted())
        if (auto it = s.maps.find(index); it != s.maps.end()) keep.emplace(index, std::move(it->second));
      s.maps.swap(keep);
    }
  }
}

ReportData build(const Summary& summary, const Collector& collector, Header header) {
  const RunInfo& info = summary.info();
  ReportData d;
  d.header = std::move(header);
  d.axes = info.axis_names;
  d.heads = info.heads;
  d.attention = info.attention;
  d.histogram_bins = summary.options().histogram_bins;
  d.limits = collector.limits();
  const std::size_t axes = info.axis_names.size();
  const auto& sums = summary.scenarios();
  const std::size_t n_metrics = sums.empty() ? 0 : sums.front().metrics.size();
  const std::size_t n_diffs = std::size_t(info.heads) * axes;

  // Every metric's histogram on one axis shared by all scenarios: the overall [min, max].
  std::vector<double> lo(n_metrics, INFINITY), hi(n_metrics, -INFINITY);
  for (const auto& s : sums)
    for (std::size_t k = 0; k < n_metrics; ++k)
      if (s.metrics[k].moments.count())
        lo[k] = std::min(lo[k], s.metrics[k].moments.min()), hi[k] = std::max(hi[k], s.metrics[k].moments.max());
  auto distribution = [&](const Summary::Metric& m, std::size_t k) {
    Distribution dist{stats_of(m), {}};
    if (m.sketch.count() && k <= n_diffs) {
      const Ticks t = nice_ticks(lo[k], hi[k]);
      dist.bins = histogram(m.sketch, t.lo, t.hi, d.histogram_bins);
    }
    return dist;
  };

  for (const auto& s : sums) {
    Scenario sc;
    sc.name = s.name;
    sc.count = s.count;
    sc.separation = distribution(s.metrics[0], 0);
    for (std::size_t k = 1; k <= n_diffs; ++k) sc.differences.push_back(distribution(s.metrics[k], k));
    if (info.attention) {
      const std::size_t first_head = 1 + n_diffs;
      for (std::uint32_t h = 0; h <= info.heads; ++h) {
        sc.entropy.push_back(stats_of(s.metrics[first_head + std::size_t(h) * kHeadStats + kEntropy]));
        sc.confidence.push_back(stats_of(s.metrics[first_head + std::size_t(h) * kHeadStats + kConfidence]));
      }
      const std::size_t first_pair = first_head + std::size_t(info.heads + 1) * kHeadStats;
      for (std::size_t p = 0; p < pair_count(info.heads); ++p)
        sc.js_mean.push_back(stats_of(s.metrics[first_pair + p * kPairStats + kJensenShannon]).mean);
    }
    for (const auto& k : collector.scenarios()) {
      if (k.name != s.name) continue;
      for (const auto& mo : k.context) sc.context_mean.push_back(mo.count() ? mo.mean() : 0.0);
      for (const auto& mo : k.pairwise) sc.pair_separation_mean.push_back(mo.count() ? mo.mean() : 0.0);
      for (const auto& [v, index] : k.top.sorted()) sc.top.push_back(k.reports.at(index));
      for (const auto& [v, index] : k.map_top.sorted())  // the Summary's top, in its order
        if (auto it = k.maps.find(index); it != k.maps.end()) sc.maps.push_back(it->second);
    }
    d.scenarios.push_back(std::move(sc));
  }
  return d;
}

}  // namespace headsep::report
