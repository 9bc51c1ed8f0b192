// The scaling figures (headsep scaling): speedup against the thread or rank count, and busy
// thread-seconds per stage at each count.
#include <algorithm>
#include <cmath>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

// Both scaling figures: width, plot left/right/top/bottom, height.
struct Frame {
  double W, L, R, T, B, H;
};
constexpr Frame kScalingFrame{620, 60, 440, 50, 320, 370};

}  // namespace

// The header's note after the counts: "(headsep scaling)", or "ranks (headsep scaling --ranks)".
std::string sc_unit_note(const Scaling& sc) {
  return sc.unit == "ranks" ? " ranks (headsep scaling --ranks)" : " (headsep scaling)";
}

// What `r.threads` independent 1-thread copies got, as a speedup over runs[0] (0 if not measured).
double scaling_ceiling(const Scaling& sc, const ScalingRun& r) {
  if (!r.copies_wall_s || *r.copies_wall_s <= 0 || sc.runs.empty()) return 0;
  return r.threads * sc.runs[0].wall_s / *r.copies_wall_s;
}

// Speedup against thread count: the engine's (median run, whisker from its slowest to its
// fastest run), linear scaling dashed, and with --ceiling what independent copies got.
Figure scaling_speedup(const Scaling& sc) {
  const auto [W, L, R, T, B, H] = kScalingFrame;
  Figure f{"scaling-speedup", "scaling", "Speedup against " + sc.unit, "", ""};
  const auto& runs = sc.runs;
  const double t0 = runs.empty() ? 1 : runs[0].threads, w0 = runs.empty() ? 1 : runs[0].wall_s;
  auto speedup = [&](double wall) { return wall > 0 ? w0 / wall : 0.0; };
  double tmax = t0, smax = 1;
  for (const auto& r : runs) {
    tmax = std::max(tmax, double(r.threads));
    smax = std::max({smax, speedup(r.min_s), speedup(r.wall_s), scaling_ceiling(sc, r), double(r.threads) / t0});
  }
  // The counts' own axis: a tick at each count run (whole numbers), from the first to the last.
  Ticks tx;
  const double pad = tmax > t0 ? (tmax - t0) * 0.05 : 0.5;
  tx.lo = t0 - pad, tx.hi = tmax + pad, tx.step = 1;
  for (const auto& r : runs) tx.values.push_back(r.threads);
  const Ticks ty = nice_ticks(0, smax, 5);
  const Scale sx{tx.lo, tx.hi, L, R}, sy{ty.lo, ty.hi, B, T};
  std::string o = svg_open(f.id, "scaling", W, H);
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, "speedup over the first count's median run; whiskers: slowest to fastest run", "fill=\"#444\"");
  o += x_axis(tx, sx, T, B, sc.unit, (L + R) / 2);
  o += y_axis(ty, sy, L, R, "speedup", (T + B) / 2);
  o += line(sx(t0), sy(1), sx(tmax), sy(tmax / t0), "class=\"linear\" stroke=\"#999\" stroke-dasharray=\"5,4\"");
  std::string pts;
  for (const auto& r : runs) pts += px(sx(r.threads)) + "," + px(sy(speedup(r.wall_s))) + " ";
  const Marker mk = marker(1);
  o += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + mk.colour + "\" stroke-width=\"2\"/>\n";
  for (const auto& r : runs) {
    const double x = sx(r.threads), s = speedup(r.wall_s);
    if (r.min_s > 0 && r.max_s > 0 && r.max_s != r.min_s)
      o += line(x, sy(speedup(r.max_s)), x, sy(speedup(r.min_s)), "stroke=\"" + std::string(mk.colour) + "\"");
    o += glyph(1, x, sy(s), 5,
               "class=\"marker engine\" data-threads=\"" + std::to_string(r.threads) + "\" data-speedup=\"" + exact(s) + "\"") +
         "<title>" + escape(std::to_string(r.threads) + " " + sc.unit + ": " + number(s) + "× (" + number(r.wall_s) + " s)") +
         "</title></path>\n";
    if (r.copies_wall_s) {
      const double c = scaling_ceiling(sc, r);
      o += glyph(2, x, sy(c), 5,
                 "class=\"marker ceiling\" data-threads=\"" + std::to_string(r.threads) + "\" data-speedup=\"" +
                     exact(c) + "\"",
                 0.25, true) +
           "<title>" + escape(std::to_string(r.threads) + " independent 1-thread copies at once: " + number(c) + "×") +
           "</title></path>\n";
    }
  }
  double ly = T + 8;
  o += glyph(1, R + 20, ly - 4, 5, "class=\"legend-marker\"") + "</path>" + text(R + 30, ly, "headsep");
  o += line(R + 12, ly + 14, R + 28, ly + 14, "stroke=\"#999\" stroke-dasharray=\"5,4\"") + text(R + 30, ly + 18, "linear");
  bool any_ceiling = false;
  for (const auto& r : runs) any_ceiling = any_ceiling || r.copies_wall_s.has_value();
  if (any_ceiling)
    o += glyph(2, R + 20, ly + 32, 5, "class=\"legend-marker\"", 0.25, true) + "</path>" +
         text(R + 30, ly + 36, "independent copies");
  f.svg = o + "</svg>\n";
  return f;
}

// Busy thread-seconds per stage at each count, one stacked bar per count: where the time went,
// and which stage grew when threads were added.
Figure scaling_stages(const Scaling& sc) {
  const auto [W, L, R, T, B, H] = kScalingFrame;
  Figure f{"scaling-stages", "scaling", "Busy thread-seconds per stage", "", ""};
  double top = 0;
  for (const auto& r : sc.runs) {
    double sum = 0;
    for (double b : r.busy) sum += b;
    top = std::max(top, sum);
  }
  const Ticks ty = nice_ticks(0, top > 0 ? top : 1, 5);
  const Scale sy{ty.lo, ty.hi, B, T};
  const std::size_t n = sc.runs.size();
  const double slot = (R - L) / double(std::max<std::size_t>(n, 1)), bar = std::min(60.0, slot * 0.6);
  std::string o = svg_open(f.id, "scaling", W, H);
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, "summed over threads, per count (the median run); flat bars = no added work", "fill=\"#444\"");
  o += y_axis(ty, sy, L, R, "thread-seconds", (T + B) / 2);
  o += "<g class=\"axis x\">" + line(L, B, R, B, "stroke=\"#333\"");
  for (std::size_t i = 0; i < n; ++i)
    o += text(L + slot * (double(i) + 0.5), B + 17, std::to_string(sc.runs[i].threads), "text-anchor=\"middle\"");
  o += text((L + R) / 2, B + 34, sc.unit, "text-anchor=\"middle\" class=\"axis-title\"") + "</g>\n";
  static constexpr const char* colours[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
                                            "#56B4E9", "#000000", "#F0E442", "#999999", "#882255", "#44AA99"};
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = sc.runs[i];
    const double x = L + slot * (double(i) + 0.5) - bar / 2;
    double acc = 0;
    for (std::size_t k = 0; k < sc.kinds.size() && k < r.busy.size(); ++k) {
      if (r.busy[k] <= 0) continue;
      const double y1 = sy(acc), y2 = sy(acc + r.busy[k]);
      std::string bar_svg = rect(x, y2, bar, y1 - y2,
                                 "class=\"stage\" fill=\"" + std::string(colours[k % std::size(colours)]) +
                                     "\" data-threads=\"" + std::to_string(r.threads) + "\" data-stage=\"" +
                                     escape(sc.kinds[k]) + "\" data-busy=\"" + exact(r.busy[k]) + "\"");
      bar_svg.replace(bar_svg.size() - 3, 3,  // "/>\n": a tooltip inside
                      "><title>" + escape(sc.kinds[k] + " at " + std::to_string(r.threads) + " " + sc.unit + ": " +
                                          number(r.busy[k]) + " s") + "</title></rect>\n");
      o += bar_svg;
      acc += r.busy[k];
    }
  }
  for (std::size_t k = 0; k < sc.kinds.size(); ++k) {
    const double ly = T + 8 + 18.0 * double(k);
    o += rect(R + 14, ly - 10, 12, 12, "fill=\"" + std::string(colours[k % std::size(colours)]) + "\"") +
         text(R + 32, ly, escape(sc.kinds[k]));
  }
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace headsep::report
