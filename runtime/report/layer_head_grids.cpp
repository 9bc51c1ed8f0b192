// Layer x head grids: one value per head in a layer x head matrix (viridis, value in the cell),
// a cell linking to its head's attention map. An attention scheme's mean separation (one layer),
// or a model run's separation, Jensen–Shannon divergence and entropy (ReportData::grids).
#include <algorithm>
#include <functional>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

// A layer x head matrix of one value per head (viridis, value printed in the cell); `link(l, c)`
// gives the anchor a cell links to ("" = none).
Figure grid_figure(const std::string& id, const std::string& section, const std::string& title, const std::string& subtitle,
                   const std::string& footnote, std::uint32_t layers, std::uint32_t per, const std::vector<double>& v,
                   const std::function<std::string(std::uint32_t, std::uint32_t)>& link) {
  // The colour scale spans the data (the report's one rule, as the Jensen–Shannon heatmap).
  double top = v.empty() ? 0 : v[0], bottom = top;
  for (double x : v) top = std::max(top, x), bottom = std::min(bottom, x);
  const double span = top > bottom ? top - bottom : 1;
  const double cell = per > 16 ? 30 : 46, L = 70, T = 56;
  const double W = std::max(380.0, L + cell * per + 20), H = T + cell * layers + 74;
  Figure f;
  f.id = id;
  f.section = section;
  f.title = title;
  std::string o = svg_open(f.id, "heatmap grid", W, H);
  o += text(8, 18, escape(cut(f.title, 60)), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, escape(subtitle), "fill=\"#444\"");
  o += text(8, H - 8, escape(footnote), "fill=\"#444\"");
  for (std::uint32_t l = 0; l < layers; ++l) o += text(L - 6, T + cell * (l + 0.5) + 4, "layer " + std::to_string(l), "text-anchor=\"end\"");
  for (std::uint32_t l = 0; l < layers; ++l)
    for (std::uint32_t c = 0; c < per && std::size_t(l) * per + c < v.size(); ++c) {
      const double val = v[std::size_t(l) * per + c];
      const double x = L + cell * c, y = T + cell * l, t = (val - bottom) / span;
      const char* ink = t > 0.55 ? "#000" : "#fff";
      std::string cellsvg = "<g class=\"cell\" data-layer=\"" + std::to_string(l) + "\" data-head=\"" + std::to_string(c + 1) +
                            "\" data-value=\"" + exact(val) + "\">" + rect(x, y, cell - 1, cell - 1, "fill=\"" + viridis(t) + "\"") +
                            text(x + cell / 2, y + cell / 2 - (cell >= 40 ? 3 : -4), "h" + std::to_string(c + 1),
                                 std::string("text-anchor=\"middle\" font-size=\"10\" fill=\"") + ink + "\"");
      if (cell >= 40)
        cellsvg += text(x + cell / 2, y + cell / 2 + 11, number(val, 2),
                        std::string("text-anchor=\"middle\" font-size=\"10\" fill=\"") + ink + "\"");
      cellsvg += "<title>" + escape("layer " + std::to_string(l) + " head " + std::to_string(c + 1) + ": " + number(val, 4)) +
                 "</title></g>";
      const std::string target = link ? link(l, c) : std::string();
      o += target.empty() ? cellsvg + "\n" : "<a href=\"#" + target + "\">" + cellsvg + "</a>\n";
    }
  o += colour_bar(L, T + cell * layers + 14, 200, number(bottom), number(top), viridis, true);
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace

// Layer x head grid of an attention scheme: per head, the mean over its pairs of the mean
// pairwise separation; heads are layer-major (ReportData::layers).
Figure layer_head_grid(const ReportData& d, std::size_t si, bool linked) {
  const auto& s = d.scenarios[si];
  const std::uint32_t n = d.heads, layers = std::max<std::uint32_t>(1, d.layers), per = (n + layers - 1) / layers;
  std::vector<double> v(n + 1, 0.0);
  std::vector<int> k(n + 1, 0);
  std::size_t p = 0;
  for (std::uint32_t i = 1; i <= n; ++i)
    for (std::uint32_t j = i + 1; j <= n; ++j, ++p) {
      const double x = p < s.pair_separation_mean.size() ? s.pair_separation_mean[p] : 0.0;
      v[i] += x, v[j] += x, ++k[i], ++k[j];
    }
  for (std::uint32_t h = 1; h <= n; ++h) v[h] = k[h] ? v[h] / k[h] : 0;
  v.erase(v.begin());  // [h - 1]
  return grid_figure("grid-" + std::to_string(si), "attention", "Layer × head: mean separation",
                     cut(s.name, 30) + " · each head's mean distance to the others",
                     layers == 1 ? "one layer (the scheme has none); a head links to its maps" : "a head links to its maps",
                     layers, per, v, [&](std::uint32_t l, std::uint32_t c) {
                       return linked ? map_anchor(si, 0, l * per + c + 1) : std::string();
                     });
}

Figure model_grid(const Grid& g, const std::set<std::string>& drawn) {
  return grid_figure(g.id, "model", g.title, cut(g.subtitle, 64),
                     drawn.empty() ? "means over the reports" : "means over the reports; a head links to its map in the top report",
                     g.layers, g.heads, g.values, [&](std::uint32_t l, std::uint32_t c) {
                       const std::string a = map_anchor(g.maps_of + l, 0, c + 1);
                       return drawn.count(a) ? a : std::string();
                     });
}

}  // namespace headsep::report
