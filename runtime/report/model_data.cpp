// The ReportData of a model run (--model): built from ModelSummary's per-scenario sums; means only.
#include "headsep/attention.hpp"
#include "headsep/model_run.hpp"
#include "report/report.hpp"

namespace headsep::report {

ReportData build(const ModelSummary& m, Header header) {
  ReportData d;
  d.limits.map_tokens = Limits::model_map_tokens, d.limits.map_cells = Limits::model_map_cells;
  d.header = std::move(header);
  d.axes = m.axes;
  d.heads = m.heads;
  d.distributions = false;
  const std::size_t H = m.heads, H1 = H + 1, C = m.axes.size(), P = H * (H - (H > 0)) / 2;
  auto pair_index = [&](std::size_t i, std::size_t j) { return (i - 1) * H - (i - 1) * i / 2 + (j - i - 1); };
  std::size_t si = 0;
  for (const auto& sc : m.scenarios) {
    const double n = sc.reports ? double(sc.reports) : 1.0;
    // The seed's plot per layer: the layer's baseline (head 0) and heads at their mean contexts.
    for (std::uint32_t l = 0; l < m.layers; ++l) {
      Scenario s;
      s.name = sc.name + " · layer " + std::to_string(l);
      s.model_scenario = sc.name, s.layer = l;
      s.count = sc.reports;
      for (std::size_t h = 0; h < H1; ++h)
        for (std::size_t c = 0; c < C; ++c) s.context_mean.push_back(sc.ctx[(l * H1 + h) * C + c] / n);
      double sep = 0;
      for (std::size_t p = 0; p < P; ++p) sep += sc.dist[l * P + p] / n;
      s.separation.stats.count = sc.reports;
      s.separation.stats.mean = P ? sep / double(P) : 0.0;
      // Per head, distributions over reports: the sketches' quantiles, the sums' means.
      auto stats = [&](const QuantileSketch& q, double mean) {
        Stats st;
        st.count = q.count();
        st.mean = mean;
        st.exact = q.exact();
        if (st.count) {
          st.min = q.min(), st.max = q.max();
          st.p01 = q.quantile(0.01), st.p10 = q.quantile(0.10), st.p50 = q.quantile(0.50);
          st.p90 = q.quantile(0.90), st.p99 = q.quantile(0.99);
        }
        return st;
      };
      for (std::size_t h = 0; h < H1 && l * H1 + h < sc.entropy.size(); ++h)
        s.entropy.push_back(stats(sc.entropy[l * H1 + h], sc.head[(l * H1 + h) * kHeadStats + kEntropy] / n));
      for (std::size_t h = 1; h <= H && l * H + h - 1 < sc.separation.size(); ++h) {
        double t = 0;
        for (std::size_t o = 1; o <= H; ++o)
          if (o != h) t += sc.dist[l * P + pair_index(std::min(h, o), std::max(h, o))] / n;
        s.head_separation.push_back(stats(sc.separation[l * H + h - 1], H > 1 ? t / double(H - 1) : 0.0));
      }
      // The top reports' maps of this layer (heads 0..H), in the order of the ranking.
      for (const auto& [v, index] : sc.top.sorted()) {
        const auto it = sc.maps.find(index);
        if (it == sc.maps.end()) continue;
        const ModelMap& mm = it->second;
        AttentionMap a;
        a.id = mm.id;
        a.index = mm.index;
        a.separation = mm.separation;
        a.tokens = mm.tokens;
        a.n = mm.n;
        a.queries = a.keys = mm.keys;
        a.all_queries = mm.n;
        const std::size_t block = std::size_t(mm.keys) * mm.keys;
        a.maps.assign(mm.maps.begin() + std::ptrdiff_t(l * H1 * block), mm.maps.begin() + std::ptrdiff_t((l + 1) * H1 * block));
        s.maps.push_back(std::move(a));
      }
      d.scenarios.push_back(std::move(s));
    }
    // Per head: mean over the other heads of its layer of a pair value; or a head statistic.
    auto per_head = [&](auto pair_value) {
      std::vector<double> v;
      for (std::size_t l = 0; l < m.layers; ++l)
        for (std::size_t h = 1; h <= H; ++h) {
          double t = 0;
          for (std::size_t o = 1; o <= H; ++o)
            if (o != h) t += pair_value(l, pair_index(std::min(h, o), std::max(h, o)));
          v.push_back(H > 1 ? t / double(H - 1) : 0.0);
        }
      return v;
    };
    const std::string tag = std::to_string(si);
    const std::size_t first_layer = d.scenarios.size() - m.layers;
    Grid sep{"model-sep-" + tag, "Layer × head: mean separation", sc.name + " · mean context distance to the other heads of the layer",
             m.layers, m.heads, per_head([&](std::size_t l, std::size_t p) { return sc.dist[l * P + p] / n; })};
    Grid js{"model-js-" + tag, "Layer × head: Jensen–Shannon divergence", sc.name + " · mean JS to the other heads of the layer (nats)",
            m.layers, m.heads,
            per_head([&](std::size_t l, std::size_t p) { return sc.pair[(l * P + p) * kPairStats + kJensenShannon] / n; })};
    Grid ent{"model-entropy-" + tag, "Layer × head: attention entropy", sc.name + " · mean entropy of the attention rows (nats)",
             m.layers, m.heads, {}};
    for (std::size_t l = 0; l < m.layers; ++l)
      for (std::size_t h = 1; h <= H; ++h) ent.values.push_back(sc.head[(l * H1 + h) * kHeadStats + kEntropy] / n);
    sep.maps_of = js.maps_of = ent.maps_of = first_layer;
    d.grids.push_back(std::move(sep));
    d.grids.push_back(std::move(js));
    d.grids.push_back(std::move(ent));
    ++si;
  }
  return d;
}

}  // namespace headsep::report
