#include "headsep/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tbb/enumerable_thread_specific.h>

#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

constexpr std::size_t kExactCapacity = 4096;

struct Partial : SinkPartial {
  struct Slot {
    std::vector<QuantileSketch> sketches;           // a batch within the first kExactCapacity reports
    std::vector<QuantileSketch::RowTally> tallies;  // later: the rows' counts and extremes (buckets: Pending)
    TopK top{0};
    std::vector<std::pair<std::uint64_t, std::string>> ids;  // ids of the chunk's top reports
  };
  std::vector<Slot> slots;
};

// Metric row k of a block: 0 = head_separation, 1.. = difference components, then (attention
// schemes) the head statistics of heads 0..N and the pair statistics, in MetricBlock order.
const double* metric_row(const MetricBlock& m, std::size_t k) {
  if (k == 0) return m.separation.data();
  const std::size_t diffs = std::size_t(m.heads) * m.axes;
  if (k <= diffs) return m.difference.data() + (k - 1) * m.n;
  k -= diffs + 1;
  const std::size_t heads = std::size_t(m.heads + 1) * m.head_stat_count;
  if (k < heads) return m.head_stats.data() + k * m.n;
  return m.pair_stats.data() + (k - heads) * m.n;
}

std::string head_name(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("single"); }

}  // namespace

// Per thread: scenario name -> one bucket sketch per metric (gathered in any order: counts add).
struct Summary::Pending {
  using Buckets = std::unordered_map<std::string, std::vector<QuantileSketch>>;
  tbb::enumerable_thread_specific<Buckets> threads;
};

Summary::Summary(RunInfo info, SummaryOptions options)
    : info_(std::move(info)), opt_(options), metric_count_(metric_names().size()), pending_(std::make_unique<Pending>()) {}

Summary::~Summary() = default;

const std::vector<Summary::Scenario>& Summary::gathered() const {
  for (auto& buckets : pending_->threads) {
    for (auto& [name, sketches] : buckets) {
      const auto it = index_.find(name);
      if (it == index_.end()) continue;  // prepared, never consumed (a run that failed)
      for (std::size_t k = 0; k < sketches.size(); ++k) scenarios_[it->second].metrics[k].sketch.merge_buckets(sketches[k]);
    }
    buckets.clear();
  }
  return scenarios_;
}

std::vector<std::string> Summary::metric_names() const {
  std::vector<std::string> names{"head_separation"};
  for (std::uint32_t h = 1; h <= info_.heads; ++h)
    for (const auto& a : info_.axis_names) names.push_back("diff_head" + std::to_string(h) + "_" + a);
  if (info_.attention) {
    for (std::uint32_t h = 0; h <= info_.heads; ++h)
      for (std::uint32_t k = 0; k < kHeadStats; ++k) names.push_back(head_name(h) + "_" + std::string(head_stat_name(k)));
    for (std::uint32_t i = 1; i <= info_.heads; ++i)
      for (std::uint32_t j = i + 1; j <= info_.heads; ++j)
        for (std::uint32_t k = 0; k < kPairStats; ++k)
          names.push_back(head_name(i) + "_" + head_name(j) + "_" + std::string(pair_stat_name(k)));
  }
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
  const std::size_t n_metrics = metric_count_;
  // Quantiles stay exact while a scenario has at most kExactCapacity groups. A batch reaching
  // past that report index can only feed a scenario that will end in sketch mode (whatever the
  // chunking), so it skips storing values and goes straight to buckets.
  const bool exact = b.first_report + b.n_reports() <= kExactCapacity;
  Pending::Buckets* const mine = exact ? nullptr : &pending_->threads.local();
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const auto& m = res.metrics[j];
    Partial::Slot slot;
    if (exact) {
      for (std::size_t k = 0; k < n_metrics; ++k) {
        QuantileSketch s(opt_.relative_accuracy, kExactCapacity);
        s.add(metric_row(m, k), m.n, opt_.simd);
        slot.sketches.push_back(std::move(s));
      }
    } else {
      auto [it, fresh] = mine->try_emplace(*res.scenario_names[j]);
      if (fresh) it->second.assign(n_metrics, QuantileSketch(opt_.relative_accuracy, 0));
      for (std::size_t k = 0; k < n_metrics; ++k)
        slot.tallies.push_back(it->second[k].add_buckets(metric_row(m, k), m.n, opt_.simd));
    }
    slot.top = TopK(opt_.top_k);
    slot.top.add(m.separation.data(), m.n, b.first_report);
    for (const auto& [value, index] : slot.top.sorted()) slot.ids.emplace_back(index, b.report_id(index - b.first_report));
    p->slots.push_back(std::move(slot));
  }
  partial = std::move(p);
}

void Summary::consume(const BatchResult& res, SinkPartial* partial) {
  auto* p = static_cast<Partial*>(partial);
  // Every slot's moments in one add_rows call (rows of one length): 3 scenarios x 5 metrics are
  // three groups of 4 rows and one of 3, not three of 4 and three rows alone (each a single chain
  // of dependent adds). First every scenario's index (scenario() may grow scenarios_ and move them).
  consumed_.clear();
  for (std::size_t j = 0; j < res.metrics.size(); ++j)
    consumed_.push_back(static_cast<std::size_t>(&scenario(*res.scenario_names[j]) - scenarios_.data()));
  moments_.clear(), rows_.clear();
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const auto& m = res.metrics[j];
    Scenario& s = scenarios_[consumed_[j]];
    s.count += m.n;
    // Another length, or a scenario already in the group (its rows must follow each other, not
    // interleave): the rows so far first.
    const bool again = std::find(consumed_.begin(), consumed_.begin() + std::ptrdiff_t(j), consumed_[j]) !=
                       consumed_.begin() + std::ptrdiff_t(j);
    if (j && (m.n != res.metrics[j - 1].n || again)) {
      Moments::add_rows(moments_.data(), rows_.data(), moments_.size(), res.metrics[j - 1].n);
      moments_.clear(), rows_.clear();
    }
    for (std::size_t k = 0; k < s.metrics.size(); ++k) {
      moments_.push_back(&s.metrics[k].moments), rows_.push_back(metric_row(m, k));
      if (p->slots[j].sketches.empty())
        s.metrics[k].sketch.add_tally(p->slots[j].tallies[k]);
      else
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
  if (!res.metrics.empty())  // in report order, as add()
    Moments::add_rows(moments_.data(), rows_.data(), moments_.size(), res.metrics.back().n);
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
  for (const auto& s : gathered()) {
    ordered_json js;
    js["scenario"] = s.name;
    js["count"] = s.count;
    ordered_json metrics = ordered_json::object();
    for (const auto& m : s.metrics) {
      ordered_json jm;
      const bool any = m.moments.count() > 0;
      jm["mean"] = any ? m.moments.mean() : 0.0;
      jm["std"] = m.moments.stddev();
      jm["min"] = any ? m.moments.min() : 0.0;
      jm["max"] = any ? m.moments.max() : 0.0;
      for (auto [label, q] : {std::pair{"p01", 0.01}, {"p10", 0.10}, {"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}})
        jm[label] = m.sketch.count() ? m.sketch.quantile(q) : 0.0;
      jm["quantiles_exact"] = m.sketch.exact();
      metrics[m.name] = jm;
    }
    js["metrics"] = metrics;
    const auto& sep = s.metrics[0];
    ordered_json hist = ordered_json::array();
    if (sep.sketch.count())
      for (const auto& bin : histogram(sep.sketch, sep.moments.min(), sep.moments.max(), opt_.histogram_bins))
        hist.push_back({{"lo", bin.lo}, {"hi", bin.hi}, {"count", bin.count}});
    js["head_separation_histogram"] = hist;
    ordered_json top = ordered_json::array();
    for (const auto& [value, index] : s.top.sorted())
      top.push_back({{"report_id", s.top_ids.at(index)}, {"report_index", index}, {"head_separation", value}});
    js["top"] = top;
    scen.push_back(js);
  }
  root["scenarios"] = scen;
  check_finite_json(root, "summary", "the values are too large to summarize in double: moments of numbers past ~1e154 overflow");
  return root.dump(2) + "\n";
}

std::string Summary::table() const {
  (void)json();  // the same numbers, checked finite there (check_finite_json), before any is printed
  std::string out = "head_separation per scenario\n";
  char line[256];
  // Fits 100 columns: the name column as wide as the longest name, at most 26; a longer name gets
  // a line of its own above its numbers.
  int w = 8;
  for (const auto& s : gathered()) w = std::max(w, int(std::min<std::size_t>(26, s.name.size())));
  std::snprintf(line, sizeof line, "%-*s %10s %8s %8s %8s %8s %8s %8s %8s\n", w, "scenario", "reports", "mean", "std",
                "p01", "p10", "p50", "p90", "p99");
  out += line;
  for (const auto& s : scenarios_) {
    const auto& m = s.metrics[0];
    auto q = [&](double p) { return m.sketch.count() ? m.sketch.quantile(p) : 0.0; };
    if (int(s.name.size()) > w) out += printable(s.name, 200) + "\n";
    std::snprintf(line, sizeof line, "%-*s %10llu %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", w,
                  int(s.name.size()) > w ? "" : printable(s.name, 200).c_str(), static_cast<unsigned long long>(s.count),
                  m.moments.count() ? m.moments.mean() : 0.0, m.moments.stddev(), q(0.01), q(0.10), q(0.50), q(0.90), q(0.99));
    out += line;
  }
  if (!info_.attention) return out;
  // Attention schemes: per head, then per pair of heads, the mean of each statistic.
  const std::size_t first_head = 1 + std::size_t(info_.heads) * info_.axis_names.size();
  const std::size_t first_pair = first_head + std::size_t(info_.heads + 1) * kHeadStats;
  auto mean = [](const Metric& m) { return m.moments.count() ? m.moments.mean() : 0.0; };
  out += "\nattention per head (means over reports)\n";
  std::snprintf(line, sizeof line, "%-30s %-8s %10s %10s %10s %10s %10s\n", "scenario", "head", "entropy", "confidence",
                "self", "prev", "first");
  out += line;
  for (const auto& s : scenarios_)
    for (std::uint32_t h = 0; h <= info_.heads; ++h) {
      const Metric* m = &s.metrics[first_head + std::size_t(h) * kHeadStats];
      std::snprintf(line, sizeof line, "%-30s %-8s %10.4f %10.4f %10.4f %10.4f %10.4f\n", printable(s.name, 200).c_str(),
                    head_name(h).c_str(), mean(m[kEntropy]), mean(m[kConfidence]), mean(m[kSelfWeight]),
                    mean(m[kPrevWeight]), mean(m[kFirstWeight]));
      out += line;
    }
  if (info_.heads < 2) return out;
  out += "\nattention per pair of heads (means over reports)\n";
  std::snprintf(line, sizeof line, "%-30s %-12s %10s %10s %10s %10s %10s\n", "scenario", "pair", "JS", "overlap",
                "subspace", "out_cos", "out_dist");
  out += line;
  for (const auto& s : scenarios_) {
    std::size_t p = 0;
    for (std::uint32_t i = 1; i <= info_.heads; ++i)
      for (std::uint32_t j = i + 1; j <= info_.heads; ++j, ++p) {
        const Metric* m = &s.metrics[first_pair + p * kPairStats];
        const std::string pair = std::to_string(i) + "-" + std::to_string(j);
        std::snprintf(line, sizeof line, "%-30s %-12s %10.4f %10.4f %10.4f %10.4f %10.4f\n", printable(s.name, 200).c_str(), pair.c_str(),
                      mean(m[kJensenShannon]), mean(m[kPositionOverlap]), mean(m[kSubspaceCosine]),
                      mean(m[kOutputCosine]), mean(m[kOutputDistance]));
        out += line;
      }
  }
  return out;
}

}  // namespace headsep
