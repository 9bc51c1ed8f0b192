// Distributions: per scenario a histogram of head_separation, or of one difference_from_single
// component, with p10 / p50 / p90; every scenario on one shared x axis (docs/REPORTS.md).
#include <algorithm>
#include <cmath>
#include <functional>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

Figure distribution_figure(const ReportData& d, const std::string& id, const std::string& title,
                           const std::function<const Distribution&(const Scenario&)>& get) {
  const std::size_t n = shown(d);
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < d.scenarios.size(); ++i) {
    const auto& st = get(d.scenarios[i]).stats;
    if (st.count) lo = std::min(lo, st.min), hi = std::max(hi, st.max);
  }
  const Ticks t = nice_ticks(lo, hi);
  const double W = 820, L = 190, R = 560, T = 54, row = 48;
  const double B = T + row * double(std::max<std::size_t>(n, 1));
  const double H = B + 66;
  const Scale sx{t.lo, t.hi, L, R};
  Figure f;
  f.id = id;
  f.section = "dist";
  f.title = title;
  std::string o = svg_open(id, "distribution", W, H);
  o += "<title>" + escape(title) + "</title>\n";
  o += text(8, 18, escape(title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, escape("all scenarios on one axis; bar heights scaled per scenario; lines at p10, p50, p90"),
            "fill=\"#444\" class=\"fig-subtitle\"");
  o += x_axis(t, sx, T, B, title, (L + R) / 2);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = d.scenarios[i];
    const auto& dist = get(s);
    const double y0 = T + row * double(i + 1) - 6, hmax = row - 14;
    o += "<g class=\"row\" data-scenario=\"" + escape(s.name) + "\">\n";
    o += text(L - 40, y0 - hmax / 2 + 4, escape(cut(s.name, 22)) + "<title>" + escape(s.name) + "</title>",
              "text-anchor=\"end\" class=\"row-name\"");
    std::uint64_t top = 1;
    for (const auto& b : dist.bins) top = std::max(top, b.count);
    // The row's count axis: 0 at the baseline, the fullest bin's count at the top.
    o += line(L - 3, y0, L - 3, y0 - hmax, "class=\"count-axis\" stroke=\"#999\"") +
         text(L - 6, y0 - hmax + 7, count(top), "class=\"count-tick\" text-anchor=\"end\" font-size=\"9\" fill=\"#555\"") +
         text(L - 6, y0, "0", "class=\"count-tick\" text-anchor=\"end\" font-size=\"9\" fill=\"#555\"");
    for (const auto& b : dist.bins) {
      if (!b.count) continue;
      const double h = hmax * double(b.count) / double(top);
      std::string bar = rect(sx(b.lo), y0 - h, std::max(0.8, sx(b.hi) - sx(b.lo) - 0.6), h,
                             "class=\"bar\" fill=\"#56B4E9\" data-count=\"" + std::to_string(b.count) + "\"");
      bar.resize(bar.size() - 3);  // "/>\n": the bar gets its numbers on hover
      o += bar + "><title>" + escape(number(b.lo, 4) + " … " + number(b.hi, 4) + ": " + count(b.count) +
                                    (b.count == 1 ? " report" : " reports")) + "</title></rect>\n";
    }
    o += line(L, y0, R, y0, "stroke=\"#999\"");
    const auto& st = dist.stats;
    if (st.count) {
      for (auto [name, v] : {std::pair{"p10", st.p10}, {"p50", st.p50}, {"p90", st.p90}}) {
        const bool mid = std::string(name) == "p50";
        o += line(sx(v), y0 - hmax - 2, sx(v), y0 + 2,
                  std::string("class=\"q ") + name + "\" data-value=\"" + exact(v) + "\" stroke=\"" +
                      (mid ? "#000" : "#D55E00") + "\" stroke-width=\"" + (mid ? "2" : "1.5") + "\"" +
                      (mid ? "" : " stroke-dasharray=\"3 2\""));
      }
      o += text(R + 12, y0 - hmax / 2 - 2,
                escape("p10 " + number(st.p10) + " · p50 " + number(st.p50) + " · p90 " + number(st.p90)));
      o += text(R + 12, y0 - hmax / 2 + 12, escape(count(st.count) + (st.count == 1 ? " report" : " reports") + " · mean " + number(st.mean)),
                "fill=\"#555\"");
    }
    o += "</g>\n";
  }
  // Legend.
  o += line(L, H - 10, L + 18, H - 10, "stroke=\"#000\" stroke-width=\"2\"") + text(L + 22, H - 6, "p50");
  o += line(L + 60, H - 10, L + 78, H - 10, "stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"") +
       text(L + 82, H - 6, "p10, p90");
  if (d.scenarios.size() > n)
    o += text(R, H - 6, escape(count(d.scenarios.size() - n) + " more scenarios in the table above"), "fill=\"#a00\"");
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace

void add_distributions(const ReportData& d, std::vector<Figure>& out) {
  out.push_back(distribution_figure(d, "dist-head_separation", "head_separation",
                                    [](const Scenario& s) -> const Distribution& { return s.separation; }));
  for (std::uint32_t h = 1; h <= d.heads; ++h)
    for (std::size_t c = 0; c < d.axes.size(); ++c) {
      const std::size_t k = (h - 1) * d.axes.size() + c;
      out.push_back(distribution_figure(d, "dist-diff-" + std::to_string(k),
                                        "difference_from_single: head " + std::to_string(h) + " − single, " + d.axes[c],
                                        [k](const Scenario& s) -> const Distribution& { return s.differences[k]; }));
    }
}

}  // namespace headsep::report
