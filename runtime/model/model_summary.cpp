// ModelSummary (model_run.hpp): the per-scenario sums run_model merged, as means — json() for
// --summary, table() for the terminal. Kept apart from the pipeline that fills them.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "headsep/model_run.hpp"
#include "support/json_input.hpp"

namespace headsep {
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

nlohmann::ordered_json quantiles(const QuantileSketch& q) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!q.count()) return j;
  for (auto [name, p] : {std::pair{"p01", 0.01}, {"p10", 0.10}, {"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}}) j[name] = q.quantile(p);
  return j;
}

}  // namespace

std::string ModelSummary::json() const {
  nlohmann::ordered_json j;
  j["model"] = model;
  j["layers"] = layers;
  j["heads"] = heads;
  if (!decoder_type.empty()) {  // docs/MODEL.md, "Decoders"
    j["model_type"] = decoder_type;
    j["causal"] = true;
    j["kv_heads"] = kv_heads;
    j["kv_head_of"] = kv_head_of;
    if (!sliding_window.empty()) j["sliding_window"] = sliding_window;
  }
  j["axes"] = axes;
  j["baseline"] = decoder_type.empty()
                      ? "head 0 of each layer: the layer's own Q/K/V projections as one full-width head, softmax(Q K^T / sqrt(hidden))"
                      : "head 0 of each layer: every query head's Q (rotated where the model uses RoPE) against its key/value "
                        "head's K, as one head of width heads x head_dim, causal: softmax(Q K^T / sqrt(heads x head_dim))" +
                            std::string(sliding_window.empty() ? "" : ", within the layer's sliding window where it has one");
  j["top_by"] = "a report's separation: the mean over layers and head pairs of the pair's context distance (ties: smaller report index)";
  j["threads"] = threads;
  j["simd"] = simd;
  j["seconds"] = seconds;
  j["gflop"] = gflop;
  j["scenarios"] = nlohmann::ordered_json::array();  // present (empty) when no report came
  if (max_tokens) j["truncation"] = {{"max_tokens", max_tokens}, {"from", max_tokens_from}};
  for (const auto& sc : scenarios) {
    View v{*this, sc};
    nlohmann::ordered_json js;
    js["name"] = sc.name;
    js["reports"] = sc.reports;
    js["tokens"] = sc.tokens;
    js["empty_reports"] = sc.empty_reports;
    js["truncated_reports"] = sc.truncated_reports;
    js["tokens_without_axis_value"] = sc.tokens_without_axis_value;
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
  check_finite_json(j, "model summary", "the model's values are too large to summarize in double");
  return j.dump(1) + "\n";
}

std::string ModelSummary::table() const {
  (void)json();  // the same numbers, checked finite there, before any is printed
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
