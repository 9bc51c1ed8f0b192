// The head x head heatmap of mean Jensen–Shannon divergence of an attention scheme's scenario
// (viridis over the data's range, the range shown on the colour bar: the report's one colour rule,
// as the model's grids; docs/REPORTS.md).
#include <algorithm>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
Figure js_heatmap(const ReportData& d, std::size_t si) {
  const auto& s = d.scenarios[si];
  const std::uint32_t n = d.heads;
  const double cell = n > 16 ? 14 : 32, L = 70, T = 56;
  const double W = std::max(360.0, L + cell * n + 20), H = T + cell * n + 60;
  Figure f;
  f.id = "js-" + std::to_string(si);
  f.section = "attention";
  f.title = "Jensen–Shannon divergence between heads";
  std::string o = svg_open(f.id, "heatmap js", W, H);
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, escape(cut(s.name, 30) + " · mean JS(A_i[q], A_j[q]) in nats"), "fill=\"#444\"");
  auto pair_index = [&](std::uint32_t i, std::uint32_t j) {  // 1 <= i < j <= n
    return std::size_t(i - 1) * (2 * n - i) / 2 + (j - i - 1);
  };
  // The colour scale spans the pairs' values (the diagonal, a head with itself, is blank).
  double lo = 0, hi = 0;
  for (std::size_t p = 0; p < std::size_t(n) * (n - 1) / 2; ++p) {
    lo = p ? std::min(lo, s.js_mean[p]) : s.js_mean[p];
    hi = p ? std::max(hi, s.js_mean[p]) : s.js_mean[p];
  }
  const double span = hi > lo ? hi - lo : 1;
  for (std::uint32_t i = 1; i <= n; ++i) {
    o += text(L - 6, T + cell * (i - 0.5) + 4, "head " + std::to_string(i), "text-anchor=\"end\"");
    o += text(L + cell * (i - 0.5), T - 6, std::to_string(i), "text-anchor=\"middle\"");
    for (std::uint32_t j = 1; j <= n; ++j) {
      if (i == j) {  // a head with itself: 0 by definition, outside the colour scale
        o += "<g class=\"cell\" data-i=\"" + std::to_string(i) + "\" data-j=\"" + std::to_string(j) + "\" data-value=\"0\">" +
             rect(L + cell * (j - 1), T + cell * (i - 1), cell - 1, cell - 1, "fill=\"#eeeeee\"") + "<title>" +
             escape("head " + std::to_string(i) + " with itself: 0") + "</title></g>\n";
        continue;
      }
      const double v = s.js_mean[pair_index(std::min(i, j), std::max(i, j))];
      const double t = (v - lo) / span;
      o += "<g class=\"cell\" data-i=\"" + std::to_string(i) + "\" data-j=\"" + std::to_string(j) + "\" data-value=\"" +
           exact(v) + "\">" + rect(L + cell * (j - 1), T + cell * (i - 1), cell - 1, cell - 1, "fill=\"" + viridis(t) + "\"");
      if (cell >= 28)
        o += text(L + cell * (j - 0.5), T + cell * (i - 0.5) + 4, number(v, 2),
                  std::string("text-anchor=\"middle\" font-size=\"10\" fill=\"") + (t > 0.55 ? "#000" : "#fff") + "\"");
      o += "<title>" + escape("head " + std::to_string(i) + " vs head " + std::to_string(j) + ": " + number(v, 4)) +
           "</title></g>\n";
    }
  }
  o += colour_bar(L, T + cell * n + 14, std::min(200.0, W - L - 20), number(lo, 3), number(hi, 3) + " nats", viridis, true);
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace headsep::report
