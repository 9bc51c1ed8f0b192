// Attention maps: query x key weights of one head (or the baseline) in one of a scenario's top
// reports, and which kept maps are drawn within the report's cell budget (Limits::map_cells).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {

std::string map_anchor(std::size_t si, std::size_t mi, std::uint32_t h) {
  return "map-" + std::to_string(si) + "-" + std::to_string(mi) + "-h" + std::to_string(h);
}

Figure attention_map(const ReportData& d, std::size_t si, std::size_t mi, std::uint32_t h) {
  const auto& s = d.scenarios[si];
  const auto& m = s.maps[mi];
  const double cell = m.keys > 24 ? 14 : 20;
  const std::vector<std::string> shown_tokens = display_tokens(m.tokens);  // as text; the raw piece on hover
  auto label = [&](std::size_t t) {  // a token's label with its raw piece as <title> when they differ
    if (t >= m.tokens.size()) return "#" + std::to_string(t);
    return escape(cut(shown_tokens[t], 14)) + (shown_tokens[t] == m.tokens[t] ? "" : "<title>" + escape(m.tokens[t]) + "</title>");
  };
  std::size_t longest = 1;
  for (const auto& t : shown_tokens) longest = std::max(longest, std::min<std::size_t>(14, t.size()));
  const double L = 30 + std::min(110.0, 7.0 * double(longest)), T = 60 + std::min(80.0, 5.0 * double(longest));
  const double W = std::max(340.0, L + cell * m.keys + 20), H = T + cell * m.queries + 56;
  Figure f;
  f.id = map_anchor(si, mi, h);
  f.section = "maps";
  f.title = head_label(h) + " · report " + m.id;
  f.group = s.name + " · report " + m.id + " (#" + std::to_string(mi + 1) + " by head_separation)";
  std::string o = svg_open(f.id, "attention-map", W, H,
                           " data-head=\"" + std::to_string(h) + "\" data-report=\"" + escape(m.id) +
                               "\" data-report-index=\"" + std::to_string(m.index) + "\"");
  o += text(8, 18, escape(cut(f.title, 44)), "font-size=\"13\" font-weight=\"bold\" class=\"fig-title\"");
  std::string sub = cut(s.name, 24) + " · head_separation " + number(m.separation);
  if (m.keys < m.n || m.queries < m.all_queries) sub += " · first " + std::to_string(m.keys) + " of " + std::to_string(m.n) + " tokens";
  o += text(8, 34, escape(sub), "fill=\"#444\"");
  for (std::uint32_t k = 0; k < m.keys; ++k)
    o += "<text class=\"token key\" transform=\"translate(" + px(L + cell * (k + 0.5) + 3) + "," + px(T - 6) +
         ") rotate(-60)\">" + label(k) + "</text>\n";
  // One shared cell shape (<use>), a row per query (its y once), each cell with its numbers on
  // hover: key token and weight (3 decimals; the row is its query, outlined on hover by the page's
  // style: naming the query in every cell cost ~10 % of a model page). The lightest colour is the row's, so the
  // many near-zero cells carry no fill of their own. Keeps a map near 60 bytes a cell.
  const std::string shape = "k" + std::to_string(si) + "-" + std::to_string(mi) + "-" + std::to_string(h);
  const std::string light = blues(0);
  o += "<defs><rect id=\"" + shape + "\" width=\"" + px(cell - 1) + "\" height=\"" + px(cell - 1) + "\"/></defs>\n";
  std::vector<std::string> keys(m.keys), xs(m.keys);
  for (std::uint32_t k = 0; k < m.keys; ++k) keys[k] = escape(cut(shown_tokens[k], 20)), xs[k] = px(L + cell * k);
  char weight[16];
  for (std::uint32_t q = 0; q < m.queries; ++q) {
    const std::uint32_t tok = m.first_query + q;
    o += text(L - 6, T + cell * (q + 0.5) + 4, label(tok), "class=\"token query\" text-anchor=\"end\"");
    o += "<g class=\"row\" data-query=\"" + std::to_string(tok) + "\" transform=\"translate(0," + px(T + cell * q) +
         ")\" fill=\"" + light + "\">";
    for (std::uint32_t k = 0; k < m.keys; ++k) {
      const double w = m.maps[(std::size_t(h) * m.queries + q) * m.keys + k];
      const std::string colour = blues(std::round(w * 64) / 64);  // 65 shades; the title has the weight
      std::snprintf(weight, sizeof weight, "%.3f", w);
      o += "<use href=\"#" + shape + "\" x=\"" + xs[k] + "\"" + (colour == light ? "" : " fill=\"" + colour + "\"") + "><title>" + keys[k] + ": " +
           weight + "</title></use>";
    }
    o += "</g>\n";
  }
  // The colour bar: blues() is linear in RGB, so a two-stop gradient is the scale exactly.
  const double by = T + cell * m.queries + 12;
  o += "<defs><linearGradient id=\"" + shape + "g\"><stop offset=\"0\" stop-color=\"" + blues(0) +
       "\"/><stop offset=\"1\" stop-color=\"" + blues(1) + "\"/></linearGradient></defs>\n" +
       rect(L, by, 160, 10, "fill=\"url(#" + shape + "g)\" class=\"colour-bar\"") +
       text(L, by + 22, "0", "text-anchor=\"start\"") + text(L + 160, by + 22, "1", "text-anchor=\"end\"");
  f.svg = o + "</svg>\n";
  return f;
}

std::vector<std::size_t> maps_that_fit(const ReportData& d) {
  // Which maps fit the cell budget (the bound on the report's size; html() says what is left
  // out): every scenario's top report first, then every scenario's second, and so on.
  std::vector<std::size_t> fit(shown(d), 0);
  std::size_t cells = 0, most = 0;
  for (std::size_t i = 0; i < shown(d); ++i) most = std::max(most, d.scenarios[i].maps.size());
  for (std::size_t m = 0; m < most; ++m)
    for (std::size_t i = 0; i < shown(d); ++i) {
      const auto& s = d.scenarios[i];
      if (fit[i] != m || m >= s.maps.size()) continue;  // a scenario's maps are drawn in top order
      const std::size_t need = std::size_t(s.maps[m].queries) * s.maps[m].keys * (d.heads + 1);
      if (cells + need > d.limits.map_cells) continue;
      cells += need;
      fit[i] = m + 1;
    }
  return fit;
}

std::vector<std::pair<std::size_t, std::size_t>> drawn_maps(const ReportData& d) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (d.distributions) {  // an attention scheme's run: each scenario's first maps_that_fit
    const std::vector<std::size_t> fit = maps_that_fit(d);
    for (std::size_t i = 0; i < fit.size(); ++i)
      for (std::size_t m = 0; m < fit[i]; ++m) out.emplace_back(i, m);
    return out;
  }
  // A model run: the top report's maps of every (scenario, layer) first, so each grid cell links
  // to one, then the next reports while the report holds fewer than Limits::map_cells cells.
  std::size_t cells = 0, most = 0;
  for (std::size_t i = 0; i < shown(d); ++i) most = std::max(most, d.scenarios[i].maps.size());
  for (std::size_t m = 0; m < most; ++m)
    for (std::size_t i = 0; i < shown(d); ++i) {
      const auto& s = d.scenarios[i];
      if (m >= s.maps.size()) continue;
      const std::size_t need = std::size_t(s.maps[m].queries) * s.maps[m].keys * (d.heads + 1);
      if (m > 0 && cells + need > d.limits.map_cells) continue;
      cells += need;
      out.emplace_back(i, m);
    }
  return out;
}

std::vector<Figure> model_maps(const ReportData& d) {
  std::vector<Figure> maps;
  for (const auto& [i, m] : drawn_maps(d))
    for (std::uint32_t h = 0; h <= d.heads; ++h) maps.push_back(attention_map(d, i, m, h));
  return maps;
}

}  // namespace headsep::report
