#include "headsep/summary.hpp"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace headsep {
namespace {

constexpr std::size_t kExactCapacity = 4096;

struct Partial : SinkPartial {
  struct Slot {
    std::vector<QuantileSketch> sketches;
    TopK top{0};
    std::vector<std::pair<std::uint64_t, std::string>> ids;  // ids of the chunk's top reports
  };
  std::vector<Slot> slots;
};

// Metric row k of a block: 0 = head_separation, 1.. = difference components.
const double* metric_row(const MetricBlock& m, std::size_t k) {
  return k == 0 ? m.separation.data() : m.difference.data() + (k - 1) * m.n;
}

}  // namespace

void Summary::Moments::add(const double* x, std::size_t count) {
  if (!count) return;
  if (n == 0) shift = min = max = x[0];  // shifting by the first value keeps s2 - s1^2/n well-conditioned
  for (std::size_t i = 0; i < count; ++i) {
    const double d = x[i] - shift;
    s1 += d;
    s2 += d * d;
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
  }
  n += count;
}

double Summary::Moments::stddev() const {
  if (n < 2) return 0.0;
  const double var = (s2 - s1 * s1 / double(n)) / double(n);
  return var > 0 ? std::sqrt(var) : 0.0;
}

Summary::Summary(RunInfo info, SummaryOptions options) : info_(std::move(info)), opt_(options) {}

std::vector<std::string> Summary::metric_names() const {
  std::vector<std::string> names{"head_separation"};
  for (std::uint32_t h = 1; h <= info_.heads; ++h)
    for (const auto& a : info_.axis_names) names.push_back("diff_head" + std::to_string(h) + "_" + a);
  return names;
}

Summary::Scenario& Summary::scenario(const std::string& name) {
  auto [it, inserted] = index_.try_emplace(name, scenarios_.size());
  if (inserted) {
    Scenario s{name, 0, {}, TopK(opt_.top_k), {}};
    for (auto& m : metric_names()) s.metrics.push_back({m, {}, QuantileSketch(opt_.relative_accuracy, kExactCapacity)});
    scenarios_.push_back(std::move(s));
  }
  return scenarios_[it->second];
}

void Summary::prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const {
  auto p = std::make_unique<Partial>();
  const auto& b = *res.batch;
  const std::size_t n_metrics = 1 + std::size_t(info_.heads) * info_.axis_names.size();
  // Quantiles stay exact while a scenario has at most kExactCapacity groups. A batch reaching
  // past that report index can only feed a scenario that will end in sketch mode (whatever the
  // chunking), so it skips storing values and goes straight to buckets.
  const std::size_t capacity = b.first_report + b.n_reports() <= kExactCapacity ? kExactCapacity : 0;
  for (const auto& m : res.metrics) {
    Partial::Slot slot;
    for (std::size_t k = 0; k < n_metrics; ++k) {
      QuantileSketch s(opt_.relative_accuracy, capacity);
      s.add(metric_row(m, k), m.n);
      slot.sketches.push_back(std::move(s));
    }
    slot.top = TopK(opt_.top_k);
    for (std::size_t r = 0; r < m.n; ++r) slot.top.add(m.separation[r], b.first_report + r);
    for (const auto& [value, index] : slot.top.sorted()) slot.ids.emplace_back(index, b.report_id(index - b.first_report));
    p->slots.push_back(std::move(slot));
  }
  partial = std::move(p);
}

void Summary::consume(const BatchResult& res, SinkPartial* partial) {
  auto* p = static_cast<Partial*>(partial);
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const auto& m = res.metrics[j];
    Scenario& s = scenario(*res.scenario_names[j]);
    s.count += m.n;
    for (std::size_t k = 0; k < s.metrics.size(); ++k) {
      s.metrics[k].moments.add(metric_row(m, k), m.n);
      s.metrics[k].sketch.merge(p->slots[j].sketches[k]);
    }
    s.top.merge(p->slots[j].top);
    for (auto& [index, id] : p->slots[j].ids) s.top_ids.emplace(index, std::move(id));
    // Keep only the ids of reports still in the top k.
    if (s.top_ids.size() > 4 * opt_.top_k + 16) {
      std::unordered_map<std::uint64_t, std::string> keep;
      for (const auto& [v, index] : s.top.sorted()) keep.emplace(index, s.top_ids.at(index));
      s.top_ids.swap(keep);
    }
  }
}

std::uint64_t Summary::groups() const noexcept {
  std::uint64_t g = 0;
  for (const auto& s : scenarios_) g += s.count;
  return g;
}

std::string Summary::json() const {
  using nlohmann::ordered_json;
  ordered_json root;
  root["heads"] = info_.heads;
  root["axes"] = info_.axis_names;
  root["groups"] = groups();
  root["quantiles"] = {{"method", "exact (linear interpolation) up to 4096 groups per scenario, else relative-error sketch"},
                       {"relative_accuracy", opt_.relative_accuracy}};
  ordered_json scen = ordered_json::array();
  for (const auto& s : scenarios_) {
    ordered_json js;
    js["scenario"] = s.name;
    js["count"] = s.count;
    ordered_json metrics = ordered_json::object();
    for (const auto& m : s.metrics) {
      ordered_json jm;
      jm["mean"] = m.moments.n ? m.moments.mean() : 0.0;
      jm["std"] = m.moments.stddev();
      jm["min"] = m.moments.min;
      jm["max"] = m.moments.max;
      for (auto [label, q] : {std::pair{"p01", 0.01}, {"p10", 0.10}, {"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}})
        jm[label] = m.sketch.count() ? m.sketch.quantile(q) : 0.0;
      jm["quantiles_exact"] = m.sketch.exact();
      metrics[m.name] = jm;
    }
    js["metrics"] = metrics;
    const auto& sep = s.metrics[0];
    ordered_json hist = ordered_json::array();
    if (sep.sketch.count())
      for (const auto& bin : histogram(sep.sketch, sep.moments.min, sep.moments.max, opt_.histogram_bins))
        hist.push_back({{"lo", bin.lo}, {"hi", bin.hi}, {"count", bin.count}});
    js["head_separation_histogram"] = hist;
    ordered_json top = ordered_json::array();
    for (const auto& [value, index] : s.top.sorted())
      top.push_back({{"report_id", s.top_ids.at(index)}, {"report_index", index}, {"head_separation", value}});
    js["top"] = top;
    scen.push_back(js);
  }
  root["scenarios"] = scen;
  return root.dump(2) + "\n";
}

std::string Summary::table() const {
  std::string out = "head_separation per scenario\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-30s %12s %9s %9s %9s %9s %9s %9s %9s\n", "scenario", "reports", "mean", "std",
                "p01", "p10", "p50", "p90", "p99");
  out += line;
  for (const auto& s : scenarios_) {
    const auto& m = s.metrics[0];
    auto q = [&](double p) { return m.sketch.count() ? m.sketch.quantile(p) : 0.0; };
    std::snprintf(line, sizeof line, "%-30s %12llu %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", s.name.c_str(),
                  static_cast<unsigned long long>(s.count), m.moments.n ? m.moments.mean() : 0.0, m.moments.stddev(),
                  q(0.01), q(0.10), q(0.50), q(0.90), q(0.99));
    out += line;
  }
  return out;
}

}  // namespace headsep
