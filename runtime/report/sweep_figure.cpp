// The sweep's figure (headsep sweep): head_separation against the swept parameter, per scenario a
// line through p50 and a p10–p90 band. The sweep's data, JSON and table are in sweep.cpp.
#include <algorithm>
#include <cmath>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {

Figure sweep_figure(const Sweep& sw) {
  const double W = 760, L = 70, R = 540, T = 50, B = 330, H = 380;
  const std::size_t nv = sw.values.size(), ns = sw.scenarios.size();
  bool numeric = nv > 0;
  for (const auto& x : sw.numeric) numeric = numeric && x.has_value();
  Ticks tx;
  Scale sx;
  if (numeric) {
    double a = INFINITY, b = -INFINITY;
    for (const auto& x : sw.numeric) a = std::min(a, *x), b = std::max(b, *x);
    tx = nice_ticks(a, b);
    sx = {tx.lo, tx.hi, L, R};
  } else {
    sx = {-0.5, double(nv) - 0.5, L, R};
  }
  auto X = [&](std::size_t i) { return numeric ? sx(*sw.numeric[i]) : sx(double(i)); };
  double a = INFINITY, b = -INFINITY;
  for (const auto& row : sw.stats)
    for (const auto& st : row)
      if (st && st->count) a = std::min(a, st->p10), b = std::max(b, st->p90);
  const Ticks ty = nice_ticks(std::min(a, 0.0), b);
  const Scale sy{ty.lo, ty.hi, B, T};
  Figure f;
  f.id = "sweep";
  f.section = "sweep";
  f.title = "head_separation against " + sw.parameter;
  std::string o = svg_open(f.id, "sweep", W, H, " data-parameter=\"" + escape(sw.parameter) + "\"");
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, "per scenario: line through p50, band p10–p90", "fill=\"#444\"");
  if (numeric) {
    o += x_axis(tx, sx, T, B, sw.parameter, (L + R) / 2);
  } else {
    o += "<g class=\"axis x\">" + line(L, B, R, B, "stroke=\"#333\"");
    for (std::size_t i = 0; i < nv; ++i)
      o += "<g class=\"tick\" transform=\"translate(" + px(X(i)) + ",0)\">" + line(0, T, 0, B, "stroke=\"#e5e5e5\"") +
           text(0, B + 17, escape(cut(sw.values[i], 16)), "text-anchor=\"middle\"") + "</g>\n";
    o += text((L + R) / 2, B + 34, escape(sw.parameter), "text-anchor=\"middle\" class=\"axis-title\"") + "</g>\n";
  }
  o += y_axis(ty, sy, L, R, "head_separation", (T + B) / 2);
  for (std::size_t j = 0; j < ns && j < 24; ++j) {
    const Marker mk = marker(std::uint32_t(j + 1));
    std::string band_top, band_bottom, mid;
    for (std::size_t i = 0; i < nv; ++i) {
      const auto& st = sw.stats[i][j];
      if (!st || !st->count) continue;
      band_top += px(X(i)) + "," + px(sy(st->p90)) + " ";
      band_bottom = px(X(i)) + "," + px(sy(st->p10)) + " " + band_bottom;
      mid += px(X(i)) + "," + px(sy(st->p50)) + " ";
    }
    o += "<g class=\"series\" data-scenario=\"" + escape(sw.scenarios[j]) + "\">\n";
    o += "<polygon points=\"" + band_top + band_bottom + "\" fill=\"" + mk.colour + "\" fill-opacity=\"0.15\"/>\n";
    o += "<polyline points=\"" + mid + "\" fill=\"none\" stroke=\"" + mk.colour + "\" stroke-width=\"2\"/>\n";
    for (std::size_t i = 0; i < nv; ++i) {
      const auto& st = sw.stats[i][j];
      if (!st || !st->count) continue;
      o += glyph(std::uint32_t(j + 1), X(i), sy(st->p50), 5,
                 "class=\"marker\" data-value=\"" + escape(sw.values[i]) + "\" data-p50=\"" + exact(st->p50) + "\"") +
           "<title>" + escape(sw.scenarios[j] + " at " + sw.values[i] + ": p10 " + number(st->p10) + ", p50 " +
                              number(st->p50) + ", p90 " + number(st->p90)) +
           "</title></path>\n";
    }
    o += "</g>\n";
    const double ly = T + 8 + 18.0 * double(j);
    o += glyph(std::uint32_t(j + 1), R + 20, ly - 4, 5, "class=\"legend-marker\"") + "</path>" +
         text(R + 30, ly, escape(cut(sw.scenarios[j], 28)));
  }
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace headsep::report
