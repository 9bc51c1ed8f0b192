// The seed's plot: per scenario, the baseline's and heads' contexts on the first two context axes
// (top reports faded, the mean outlined), every scenario on the same axes (docs/REPORTS.md).
#include <algorithm>
#include <array>
#include <cmath>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

constexpr std::uint32_t kMaxPairLines = 4;  // beyond 4 heads (6 pairs) the lines would hide the markers

struct PlaneDomain {
  Ticks x, y;
};

double ctx(const std::vector<double>& v, std::size_t axes, std::uint32_t h, std::size_t c) {
  return c < axes ? v[std::size_t(h) * axes + c] : 0.0;
}

PlaneDomain plane_domain(const ReportData& d) {
  const std::size_t axes = d.axes.size();
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto take = [&](const std::vector<double>& v) {
    for (std::uint32_t h = 0; h <= d.heads; ++h) {
      const double x = ctx(v, axes, h, 0), y = ctx(v, axes, h, 1);
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  };
  for (std::size_t i = 0; i < shown(d); ++i) {
    const auto& s = d.scenarios[i];
    if (!s.context_mean.empty() && s.count) take(s.context_mean);
    for (const auto& r : s.top) take(r.context);
  }
  if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  const double px_ = 0.05 * (x1 - x0), py_ = 0.05 * (y1 - y0);
  return {nice_ticks(x0 - px_, x1 + px_), nice_ticks(y0 - py_, y1 + py_)};
}

// The legend below the plane: one entry per head (up to 24), as the seed describes them, what the
// dashed lines are, and the note on the mean. `ly` is its first line's baseline; it ends at its last's.
std::string seed_legend(const ReportData& d, double W, const std::string& mean_note, double& ly) {
  std::string o;
  double lx = 8;
  for (std::uint32_t h = 0; h <= d.heads && h <= 24; ++h) {
    const std::string name = d.heads > 8 && h ? "h" + std::to_string(h) : head_label(h);
    const double wdt = (d.heads > 8 && h ? 24 : 30) + 6.8 * double(name.size());
    if (lx + wdt > W - 8) lx = 8, ly += 18;
    o += "<g class=\"legend-item\">" +
         (h ? glyph(h, lx + 6, ly - 4, 5, "class=\"legend-marker\"") : baseline_ring(lx + 6, ly - 4, 4, "class=\"legend-marker\"")) +
         "</path>" +
         text(lx + 15, ly, escape(name)) + "</g>\n";
    lx += wdt;
  }
  if (d.heads > 24) o += text(lx, ly, escape("… " + std::to_string(d.heads - 24) + " more"));
  if (d.heads >= 2) {
    ly += 18;
    if (d.heads <= kMaxPairLines) o += line(8, ly - 4, 26, ly - 4, "stroke=\"#333\" stroke-dasharray=\"4 3\"");
    o += text(d.heads <= kMaxPairLines ? 32 : 8, ly,
              escape(d.heads == 2 ? "distance between the heads = head_separation"
                     : d.heads <= kMaxPairLines ? "distances between heads; head_separation = their mean"
                                                : "head_separation = mean distance over all head pairs (not drawn)"));
  }
  if (!mean_note.empty()) ly += 18, o += text(8, ly, escape(mean_note), "fill=\"#444\"");
  return o;
}

struct LabelWant {
  double mx, my, nx, ny;  // the segment's midpoint and its normal
  std::string text;
};

// Label boxes: ~6.5 px a character at 11 px, the baseline 9 px below the top. Markers: 8 px each
// way from their centre (radius 6, outline included).
struct Box {
  double x0, y0, x1, y1;
  bool meets(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

std::string place_labels(const std::vector<LabelWant>& wants, const std::vector<std::array<double, 2>>& marks, double L,
                         double R, double T, double B) {
  std::vector<Box> taken;
  for (const auto& m : marks) taken.push_back({m[0] - 8, m[1] - 8, m[0] + 8, m[1] + 8});
  std::string out;
  for (const auto& w : wants) {
    const double width = 6.5 * double(w.text.size());  // the labels are ASCII: a number and a name
    double bx = 0, by = 0, cost = 1e300;
    const char* anchor = "start";
    for (double dist : {12.0, 22.0, 34.0, 48.0})
      for (double side : {1.0, -1.0})
        for (double along : {0.0, 1.0, -1.0}) {  // the perpendicular, then tilted along the segment
          const double nx = w.nx * side + along * w.ny * 0.7, ny = w.ny * side - along * w.nx * 0.7;
          const char* a = nx > 0.3 ? "start" : nx < -0.3 ? "end" : "middle";
          const double x = std::clamp(w.mx + dist * nx, L + 4, R - 4), y = std::clamp(w.my + dist * ny + 4, T + 12, B - 4);
          const double x0 = a[0] == 's' ? x : a[0] == 'e' ? x - width : x - width / 2;
          const Box box{x0, y - 10, x0 + width, y + 3};
          double c = (box.x0 < L ? L - box.x0 : 0) + (box.x1 > R ? box.x1 - R : 0) + dist * 0.01;
          for (const auto& t : taken) c += box.meets(t) ? 100 : 0;
          if (c < cost) cost = c, bx = x, by = y, anchor = a;
        }
    const double x0 = anchor[0] == 's' ? bx : anchor[0] == 'e' ? bx - width : bx - width / 2;
    taken.push_back({x0, by - 10, x0 + width, by + 3});
    out += text(bx, by, escape(w.text), std::string("class=\"separation-label\" text-anchor=\"") + anchor +
                "\" fill=\"#222\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"");
  }
  return out;
}

Figure seed_plot(const ReportData& d, std::size_t si, const PlaneDomain& dom) {
  const auto& s = d.scenarios[si];
  const std::size_t axes = d.axes.size();
  // W leaves 26 px right of the plane: the last x tick's label is centred on R.
  const double W = 414, L = 64, R = 388, T = 50, B = 262;
  const Scale sx{dom.x.lo, dom.x.hi, L, R}, sy{dom.y.lo, dom.y.hi, B, T};
  Figure f;
  f.id = "seed-plot-" + std::to_string(si);
  f.section = "seed";
  f.title = "The seed's plot: " + s.name;
  std::string o;  // the <svg> element is opened at the end, when the legend's height is known
  o += "<title>" + escape(f.title) + "</title>\n";
  o += text(8, 18, escape(cut(s.name, 48)), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  // One report drawn as itself; a model run keeps no per-report contexts (top is empty), so its
  // one-report layer is drawn from the mean like any other (it said "no reports").
  const bool single = (s.count <= 1 && !s.top.empty()) || (s.count == 0);
  const auto& sep = s.separation.stats;
  std::string sub = single ? (s.top.empty() ? "no reports" : "report " + s.top[0].id + " · head_separation " + number(s.top[0].separation))
                           : count(s.count) + (s.count == 1 ? " report" : " reports") + " · mean head_separation " + number(sep.mean);
  o += text(8, 36, escape(cut(sub, 70)), "fill=\"#444\" class=\"fig-subtitle\"");
  o += x_axis(dom.x, sx, T, B, axes > 0 ? d.axes[0] : "", (L + R) / 2);
  o += y_axis(dom.y, sy, L, R, axes > 1 ? d.axes[1] : "(one axis)", (T + B) / 2);

  // One set of markers: the heads of a report or of the mean, with the lines between heads.
  // Labels are drawn last, above every marker.
  // Labels are placed after every marker is known: beside their segment's midpoint, on the
  // first of several offsets (either side, further out) whose box meets no marker and no label.
  std::vector<LabelWant> wants;
  std::vector<std::array<double, 2>> marks;  // marker centres
  auto draw = [&](const std::vector<double>& c, const std::string& what, const std::string& id, double opacity,
                  bool outlined, const std::string& label) {
    std::string g = "<g class=\"point-set " + what + "\" data-report=\"" + escape(id) + "\">\n";
    auto X = [&](std::uint32_t h) { return sx(ctx(c, axes, h, 0)); };
    auto Y = [&](std::uint32_t h) { return sy(ctx(c, axes, h, 1)); };
    for (std::uint32_t i = 1; i <= d.heads && d.heads <= kMaxPairLines; ++i)
      for (std::uint32_t j = i + 1; j <= d.heads; ++j)
        g += line(X(i), Y(i), X(j), Y(j),
                  "class=\"separation\" stroke=\"#333\" stroke-dasharray=\"4 3\" stroke-opacity=\"" + px(0.35 + 0.5 * opacity) + "\"");
    if (d.heads == 2 && !label.empty()) {
      // The label sits beside the segment's midpoint, pushed perpendicular to it.
      const double mx = (X(1) + X(2)) / 2, my = (Y(1) + Y(2)) / 2, dx = X(2) - X(1), dy = Y(2) - Y(1);
      const double len = std::hypot(dx, dy);
      wants.push_back({mx, my, len > 0 ? -dy / len : 0, len > 0 ? dx / len : -1, label});
    }
    // Heads 1..H, then the baseline above them as a ring: it hid under heads at the same place
    // (a model's layer 0); a ring wider than a head's marker (7 vs 6) stays visible around it.
    for (std::uint32_t k = 1; k <= d.heads + 1; ++k) {
      const std::uint32_t h = k % (d.heads + 1);
      const double x = ctx(c, axes, h, 0), y = ctx(c, axes, h, 1);
      marks.push_back({X(h), Y(h)});
      const std::string attrs = "class=\"marker head-" + std::to_string(h) + "\" data-head=\"" + std::to_string(h) +
                                "\" data-x=\"" + exact(x) + "\" data-y=\"" + exact(y) + "\"";
      g += (h ? glyph(h, X(h), Y(h), 6, attrs, opacity, outlined) : baseline_ring(X(h), Y(h), 7, attrs, opacity)) +
           "<title>" + escape(head_label(h) + " (" + what + " " + id + "): (" + number(x, 4) + ", " + number(y, 4) + ")") +
           "</title></path>\n";
    }
    return g + "</g>\n";
  };
  std::string mean_note;
  if (single) {
    for (const auto& r : s.top) o += draw(r.context, "report", r.id, 1, false, "head_separation = " + number(r.separation));
  } else {
    for (std::size_t k = s.top.size(); k-- > 0;)
      o += draw(s.top[k].context, "report", s.top[k].id, 0.45, false, k == 0 ? number(s.top[k].separation) + " (top)" : "");
    if (!s.context_mean.empty()) {
      const double dm = d.heads == 2 ? std::hypot(ctx(s.context_mean, axes, 2, 0) - ctx(s.context_mean, axes, 1, 0),
                                                  ctx(s.context_mean, axes, 2, 1) - ctx(s.context_mean, axes, 1, 1))
                                     : 0;
      o += draw(s.context_mean, "mean", "mean", 1, true, "");
      mean_note = (s.top.empty() ? std::string("outlined: the mean over the reports")
                                 : "faded: top " + std::to_string(s.top.size()) + " reports; outlined: the mean") +
                  (d.heads == 2 ? " (means " + number(dm) + " apart)" : "");
    }
  }
  o += place_labels(wants, marks, L, R, T, B);
  double ly = 318;
  o += seed_legend(d, W, mean_note, ly);
  const double H = std::max(374.0, ly + 16);
  f.svg = svg_open(f.id, "seed-plot", W, H, " data-scenario=\"" + escape(s.name) + "\"") + o + "</svg>\n";
  return f;
}

}  // namespace

void add_seed_plots(const ReportData& d, std::vector<Figure>& out) {
  const PlaneDomain dom = plane_domain(d);
  for (std::size_t i = 0; i < shown(d); ++i) out.push_back(seed_plot(d, i, dom));
}

}  // namespace headsep::report
