// Every figure of the report in reading order: the seed's plots, a model run's grids, strips and
// maps, the distributions, an attention scheme's views, the sweep, the scaling figures. Each
// family is drawn in its own file (figures.hpp names them); this file only orders them.
#include <algorithm>
#include <set>

#include "report/figures.hpp"

namespace headsep::report {

std::size_t shown(const ReportData& d) { return std::min(d.scenarios.size(), d.limits.scenarios); }

namespace {

// Model runs: the layer x head grids, per layer the heads' entropy and separation strips, then
// the maps (chosen first, so that a grid cell links only to a map that is drawn).
void add_model_figures(const ReportData& d, std::vector<Figure>& out) {
  std::vector<Figure> maps = d.limits.static_maps ? model_maps(d) : std::vector<Figure>{};
  std::set<std::string> drawn;
  for (const auto& f : maps) drawn.insert(f.id);
  for (const auto& g : d.grids) out.push_back(model_grid(g, drawn));
  // Strips draw p01..p99 and the mean: entropy on one axis from 0 for every layer (nats compare
  // across layers), separation on each layer's own p01..p99 (the strip says so), so that neither is
  // squashed by an outlier's maximum or by another layer's range.
  double ent_hi = 1e-3;
  for (const auto& s : d.scenarios)
    for (const auto& st : s.entropy) ent_hi = std::max({ent_hi, st.p99, st.mean});
  for (std::size_t i = 0; i < shown(d); ++i) {
    const auto& s = d.scenarios[i];
    if (!s.entropy.empty()) out.push_back(strips(d, i, "entropy", s.entropy, 0, ent_hi, 0, "model-dist"));
    if (s.head_separation.empty()) continue;
    double lo = s.head_separation[0].p01, hi = lo;
    for (const auto& st : s.head_separation) lo = std::min({lo, st.p01, st.mean}), hi = std::max({hi, st.p99, st.mean});
    out.push_back(strips(d, i, "separation", s.head_separation, lo, hi, 1, "model-dist"));
  }
  for (auto& f : maps) out.push_back(std::move(f));
}

// Attention schemes, per scenario drawn: entropy and confidence strips, the Jensen–Shannon
// heatmap and the layer x head grid (two heads or more), then the maps that fit.
void add_attention_figures(const ReportData& d, std::vector<Figure>& out) {
  double ent_hi = 0;
  for (const auto& s : d.scenarios)
    for (const auto& st : s.entropy) ent_hi = std::max(ent_hi, st.max);
  std::vector<std::size_t> fit = maps_that_fit(d);
  if (!d.limits.static_maps) fit.assign(fit.size(), 0);  // the head view alone holds them
  for (std::size_t i = 0; i < shown(d); ++i) {
    const auto& s = d.scenarios[i];
    out.push_back(strips(d, i, "entropy", s.entropy, 0, std::max(ent_hi, 1e-3)));
    out.push_back(strips(d, i, "confidence", s.confidence, 0, 1));
    if (d.heads >= 2) out.push_back(js_heatmap(d, i));
    if (d.heads >= 2) out.push_back(layer_head_grid(d, i, fit[i] > 0));
    for (std::size_t m = 0; m < fit[i]; ++m)
      for (std::uint32_t h = 0; h <= d.heads; ++h) out.push_back(attention_map(d, i, m, h));
  }
}

}  // namespace

std::vector<Figure> figures(const ReportData& d) {
  std::vector<Figure> out;
  if (!d.scenarios.empty()) add_seed_plots(d, out);
  if (!d.grids.empty()) add_model_figures(d, out);
  if (!d.scenarios.empty() && d.distributions) add_distributions(d, out);
  if (d.attention) add_attention_figures(d, out);
  if (d.sweep) out.push_back(sweep_figure(*d.sweep));
  if (d.scaling) out.push_back(scaling_speedup(*d.scaling)), out.push_back(scaling_stages(*d.scaling));
  return out;
}

}  // namespace headsep::report
