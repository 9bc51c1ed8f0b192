// Figures as hand-written SVG and the HTML page around them (docs/REPORTS.md). Everything drawn
// comes from ReportData: no metric is computed here, only positions, colours and labels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>

#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "report/report.hpp"

namespace headsep::report {
namespace {

constexpr const char* kFont =
    "'DejaVu Sans','Noto Sans','Noto Sans CJK KR','Nanum Gothic','Malgun Gothic','Apple SD Gothic Neo',sans-serif";
constexpr double kLn2 = 0.69314718055994530942;
constexpr std::uint32_t kMaxPairLines = 4;  // beyond 4 heads (6 pairs) the lines would hide the markers

// Pixel coordinates with at most two decimals (smaller files, exact enough for a screen).
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

// Full precision for data-* attributes (tests read them back).
std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string svg_open(const std::string& id, const std::string& cls, double w, double h, const std::string& extra = "") {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + id + "\" class=\"fig " + cls + "\" width=\"" + px(w) +
         "\" height=\"" + px(h) + "\" viewBox=\"0 0 " + px(w) + " " + px(h) + "\" font-family=\"" + kFont +
         "\" font-size=\"11\"" + extra + ">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

std::string text(double x, double y, const std::string& escaped, const std::string& attrs = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + escaped + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" " + attrs + "/>\n";
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(0.0, w)) + "\" height=\"" +
         px(std::max(0.0, h)) + "\" " + attrs + "/>\n";
}

// Shape outline around (0, 0), about 2r across.
std::string shape_path(const std::string& shape, double r) {
  auto pts = [&](std::initializer_list<std::pair<double, double>> p) {
    std::string d;
    for (auto [x, y] : p) d += (d.empty() ? "M" : "L") + px(x * r) + " " + px(y * r);
    return d + "Z";
  };
  if (shape == "circle") return "M" + px(-r) + " 0A" + px(r) + " " + px(r) + " 0 1 0 " + px(r) + " 0A" + px(r) + " " + px(r) + " 0 1 0 " + px(-r) + " 0Z";
  if (shape == "triangle") return pts({{0, -1.2}, {1.1, 0.8}, {-1.1, 0.8}});
  if (shape == "square") return pts({{-0.9, -0.9}, {0.9, -0.9}, {0.9, 0.9}, {-0.9, 0.9}});
  if (shape == "diamond") return pts({{0, -1.25}, {1.0, 0}, {0, 1.25}, {-1.0, 0}});
  if (shape == "triangle-down") return pts({{0, 1.2}, {1.1, -0.8}, {-1.1, -0.8}});
  if (shape == "plus")
    return pts({{-0.35, -1.1}, {0.35, -1.1}, {0.35, -0.35}, {1.1, -0.35}, {1.1, 0.35}, {0.35, 0.35}, {0.35, 1.1},
                {-0.35, 1.1}, {-0.35, 0.35}, {-1.1, 0.35}, {-1.1, -0.35}, {-0.35, -0.35}});
  if (shape == "cross")
    return pts({{-1, -0.5}, {-0.5, -1}, {0, -0.5}, {0.5, -1}, {1, -0.5}, {0.5, 0}, {1, 0.5}, {0.5, 1}, {0, 0.5},
                {-0.5, 1}, {-1, 0.5}, {-0.5, 0}});
  if (shape == "hexagon") return pts({{0, -1.1}, {0.95, -0.55}, {0.95, 0.55}, {0, 1.1}, {-0.95, 0.55}, {-0.95, -0.55}});
  // star
  std::string d;
  for (int i = 0; i < 10; ++i) {
    const double a = -M_PI / 2 + i * M_PI / 5, rr = (i % 2 ? 0.5 : 1.25) * r;
    d += (i ? "L" : "M") + px(rr * std::cos(a)) + " " + px(rr * std::sin(a));
  }
  return d + "Z";
}

std::string head_label(std::uint32_t h) { return h ? "head " + std::to_string(h) : std::string("single-head baseline"); }
std::string head_short(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("single"); }

// A marker glyph; `attrs` adds classes and data. Yellow and light colours get a dark outline.
std::string glyph(std::uint32_t h, double x, double y, double r, const std::string& attrs, double opacity = 1,
                  bool outlined = false) {
  const Marker m = marker(h);
  std::string stroke = outlined ? "#000000" : std::string(m.colour) == "#F0E442" ? "#7a6f00" : "none";
  return "<path " + attrs + " d=\"" + shape_path(m.shape, r) + "\" transform=\"translate(" + px(x) + "," + px(y) +
         ")\" fill=\"" + m.colour + "\"" + (opacity < 1 ? " fill-opacity=\"" + px(opacity) + "\"" : "") +
         (stroke != "none" ? " stroke=\"" + stroke + "\" stroke-width=\"1.2\"" : "") + ">";
}

// Axis ticks, grid and labels for a horizontal axis at y = y0 spanning rows [top, y0].
std::string x_axis(const Ticks& t, const Scale& sx, double top, double y0, const std::string& title, double title_x) {
  std::string s = "<g class=\"axis x\">\n";
  s += line(sx.r0, y0, sx.r1, y0, "stroke=\"#333\"");
  for (double v : t.values) {
    const double x = sx(v);
    s += "<g class=\"tick\" data-value=\"" + exact(v) + "\" transform=\"translate(" + px(x) + ",0)\">" +
         line(0, top, 0, y0, "stroke=\"#e5e5e5\"") + line(0, y0, 0, y0 + 5, "stroke=\"#333\"") +
         text(0, y0 + 17, escape(t.label(v)), "text-anchor=\"middle\"") + "</g>\n";
  }
  if (!title.empty()) s += text(title_x, y0 + 34, escape(title), "text-anchor=\"middle\" class=\"axis-title\"");
  return s + "</g>\n";
}

std::string y_axis(const Ticks& t, const Scale& sy, double left, double right, const std::string& title, double title_y) {
  std::string s = "<g class=\"axis y\">\n";
  s += line(left, sy.r0, left, sy.r1, "stroke=\"#333\"");
  for (double v : t.values) {
    const double y = sy(v);
    s += "<g class=\"tick\" data-value=\"" + exact(v) + "\" transform=\"translate(0," + px(y) + ")\">" +
         line(left, 0, right, 0, "stroke=\"#e5e5e5\"") + line(left - 5, 0, left, 0, "stroke=\"#333\"") +
         text(left - 8, 4, escape(t.label(v)), "text-anchor=\"end\"") + "</g>\n";
  }
  if (!title.empty())
    s += "<text class=\"axis-title\" text-anchor=\"middle\" transform=\"translate(" + px(left - 44) + "," + px(title_y) +
         ") rotate(-90)\">" + escape(title) + "</text>\n";
  return s + "</g>\n";
}

// Viridis (sequential, colour-blind safe), t in [0, 1].
std::string viridis(double t) {
  static const double stops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                     {39, 173, 129}, {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 8;
  const int i = std::min(7, int(t));
  const double f = t - i;
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(std::lround(stops[i][0] + f * (stops[i + 1][0] - stops[i][0]))),
                int(std::lround(stops[i][1] + f * (stops[i + 1][1] - stops[i][1]))),
                int(std::lround(stops[i][2] + f * (stops[i + 1][2] - stops[i][2]))));
  return buf;
}

// White to dark blue for attention weights in [0, 1].
std::string blues(double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(std::lround(247 + t * (8 - 247))), int(std::lround(251 + t * (48 - 251))),
                int(std::lround(255 + t * (107 - 255))));
  return buf;
}

std::string cut(const std::string& s, std::size_t max_chars) {
  // Cut at a code point boundary, count code points (not bytes).
  std::size_t cps = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cps == max_chars) return s.substr(0, i) + "…";
      ++cps;
    }
  }
  return s;
}

std::size_t shown(const ReportData& d) { return std::min(d.scenarios.size(), d.limits.scenarios); }

// ---------------------------------------------------------------- the seed's plot

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

Figure seed_plot(const ReportData& d, std::size_t si, const PlaneDomain& dom) {
  const auto& s = d.scenarios[si];
  const std::size_t axes = d.axes.size();
  const double W = 400, L = 64, R = 388, T = 50, B = 262;
  const Scale sx{dom.x.lo, dom.x.hi, L, R}, sy{dom.y.lo, dom.y.hi, B, T};
  Figure f;
  f.id = "seed-plot-" + std::to_string(si);
  f.section = "seed";
  f.title = "The seed's plot: " + s.name;
  std::string o;  // the <svg> element is opened at the end, when the legend's height is known
  o += "<title>" + escape(f.title) + "</title>\n";
  o += text(8, 18, escape(cut(s.name, 48)), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  const bool single = s.count <= 1 || (s.top.size() == 1 && s.count == 1);
  const auto& sep = s.separation.stats;
  std::string sub = single ? (s.top.empty() ? "no reports" : "report " + s.top[0].id + " · head_separation " + number(s.top[0].separation))
                           : count(s.count) + " reports · mean head_separation " + number(sep.mean);
  o += text(8, 36, escape(cut(sub, 70)), "fill=\"#444\" class=\"fig-subtitle\"");
  o += x_axis(dom.x, sx, T, B, axes > 0 ? d.axes[0] : "", (L + R) / 2);
  o += y_axis(dom.y, sy, L, R, axes > 1 ? d.axes[1] : "(one axis)", (T + B) / 2);

  // One set of markers: the heads of a report or of the mean, with the lines between heads.
  // Labels are drawn last, above every marker.
  std::string labels;
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
      const double nx = len > 0 ? -dy / len : 0, ny = len > 0 ? dx / len : -1;
      const double lx = std::clamp(mx + 12 * nx, L + 4, R - 4), ly = std::clamp(my + 12 * ny, T + 10, B - 4);
      const char* anchor = nx > 0.3 ? "start" : nx < -0.3 ? "end" : "middle";
      labels += text(lx, ly, escape(label), std::string("class=\"separation-label\" text-anchor=\"") + anchor +
                     "\" fill=\"#222\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"");
    }
    for (std::uint32_t h = 0; h <= d.heads; ++h) {
      const double x = ctx(c, axes, h, 0), y = ctx(c, axes, h, 1);
      g += glyph(h, X(h), Y(h), h ? 6 : 5,
                 "class=\"marker head-" + std::to_string(h) + "\" data-head=\"" + std::to_string(h) + "\" data-x=\"" +
                     exact(x) + "\" data-y=\"" + exact(y) + "\"",
                 opacity, outlined) +
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
  o += labels;
  // Legend: one entry per head (up to 24), as the seed describes them.
  double lx = 8, ly = 318;
  for (std::uint32_t h = 0; h <= d.heads && h <= 24; ++h) {
    const std::string name = d.heads > 8 && h ? "h" + std::to_string(h) : head_label(h);
    const double wdt = (d.heads > 8 && h ? 24 : 30) + 6.8 * double(name.size());
    if (lx + wdt > W - 8) lx = 8, ly += 18;
    o += "<g class=\"legend-item\">" + glyph(h, lx + 6, ly - 4, h ? 5 : 4.5, "class=\"legend-marker\"") + "</path>" +
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
  const double H = std::max(374.0, ly + 16);
  f.svg = svg_open(f.id, "seed-plot", W, H, " data-scenario=\"" + escape(s.name) + "\"") + o + "</svg>\n";
  return f;
}

// ---------------------------------------------------------------- distributions

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
    o += text(L - 10, y0 - hmax / 2 + 4, escape(cut(s.name, 26)), "text-anchor=\"end\"");
    std::uint64_t top = 1;
    for (const auto& b : dist.bins) top = std::max(top, b.count);
    for (const auto& b : dist.bins) {
      if (!b.count) continue;
      const double h = hmax * double(b.count) / double(top);
      o += rect(sx(b.lo), y0 - h, std::max(0.8, sx(b.hi) - sx(b.lo) - 0.6), h,
                "class=\"bar\" fill=\"#56B4E9\" data-count=\"" + std::to_string(b.count) + "\"");
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

// ---------------------------------------------------------------- attention

// Per head quantile strips (p01–p99 line, p10–p90 box, p50 tick, mean dot) of one statistic.
Figure strips(const ReportData& d, std::size_t si, const std::string& stat, const std::vector<Stats>& v, double lo,
              double hi, std::uint32_t first_head = 0, const std::string& section = "attention") {
  const auto& s = d.scenarios[si];
  const Ticks t = nice_ticks(lo, hi);
  const double W = 560, L = 150, R = 540, T = 50, row = 22;
  const double B = T + row * double(v.size());
  const Scale sx{t.lo, t.hi, L, R};
  Figure f;
  f.id = "attn-" + stat + "-" + std::to_string(si);
  f.section = section;
  f.title = stat + " per head: " + cut(s.name, 30);
  std::string o = svg_open(f.id, "strips", W, B + 48);
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, "line p01–p99 · box p10–p90 · tick p50 · dot mean", "fill=\"#444\"");
  o += x_axis(t, sx, T, B,
              stat == "entropy"      ? "entropy (nats)"
              : stat == "confidence" ? "confidence (max weight)"
                                     : stat + " (mean distance to the other heads)",
              (L + R) / 2);
  for (std::uint32_t i = 0; i < v.size(); ++i) {
    const auto& st = v[i];
    const std::uint32_t h = first_head + i;
    const double y = T + row * (i + 0.5);
    o += "<g class=\"strip head-" + std::to_string(h) + "\" data-head=\"" + std::to_string(h) + "\">";
    o += glyph(h, L - 12, y, 4.5, "class=\"legend-marker\"") + "</path>";
    o += text(L - 22, y + 4, escape(head_short(h)), "text-anchor=\"end\"");
    o += line(sx(st.p01), y, sx(st.p99), y, "stroke=\"#666\"");
    o += rect(sx(st.p10), y - 6, sx(st.p90) - sx(st.p10), 12, std::string("fill=\"") + marker(h).colour + "\" fill-opacity=\"0.5\"");
    o += line(sx(st.p50), y - 7, sx(st.p50), y + 7, "stroke=\"#000\" stroke-width=\"2\"");
    o += "<circle cx=\"" + px(sx(st.mean)) + "\" cy=\"" + px(y) + "\" r=\"2.5\" fill=\"#000\"><title>" +
         escape(head_short(h) + " " + stat + ": mean " + number(st.mean) + ", p10 " + number(st.p10) + ", p50 " +
                number(st.p50) + ", p90 " + number(st.p90)) +
         "</title></circle></g>\n";
  }
  f.svg = o + "</svg>\n";
  return f;
}

std::string colour_bar(double x, double y, double w, const std::string& lo, const std::string& hi,
                       const std::function<std::string(double)>& colour) {
  std::string o;
  for (int i = 0; i < 20; ++i) o += rect(x + w * i / 20, y, w / 20 + 0.5, 10, "fill=\"" + colour((i + 0.5) / 20) + "\"");
  o += text(x, y + 22, escape(lo), "text-anchor=\"start\"") + text(x + w, y + 22, escape(hi), "text-anchor=\"end\"");
  return o;
}

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
  for (std::uint32_t i = 1; i <= n; ++i) {
    o += text(L - 6, T + cell * (i - 0.5) + 4, "head " + std::to_string(i), "text-anchor=\"end\"");
    o += text(L + cell * (i - 0.5), T - 6, std::to_string(i), "text-anchor=\"middle\"");
    for (std::uint32_t j = 1; j <= n; ++j) {
      const double v = i == j ? 0.0 : s.js_mean[pair_index(std::min(i, j), std::max(i, j))];
      const double t = v / kLn2;
      o += "<g class=\"cell\" data-i=\"" + std::to_string(i) + "\" data-j=\"" + std::to_string(j) + "\" data-value=\"" +
           exact(v) + "\">" + rect(L + cell * (j - 1), T + cell * (i - 1), cell - 1, cell - 1, "fill=\"" + viridis(t) + "\"");
      if (cell >= 28)
        o += text(L + cell * (j - 0.5), T + cell * (i - 0.5) + 4, number(v, 2),
                  std::string("text-anchor=\"middle\" font-size=\"10\" fill=\"") + (t > 0.55 ? "#000" : "#fff") + "\"");
      o += "<title>" + escape("head " + std::to_string(i) + " vs head " + std::to_string(j) + ": " + number(v, 4)) +
           "</title></g>\n";
    }
  }
  o += colour_bar(L, T + cell * n + 14, std::min(200.0, W - L - 20), "0", "ln 2 ≈ 0.693", viridis);
  f.svg = o + "</svg>\n";
  return f;
}

std::string map_anchor(std::size_t si, std::size_t mi, std::uint32_t h) {
  return "map-" + std::to_string(si) + "-" + std::to_string(mi) + "-h" + std::to_string(h);
}

// A layer x head matrix of one value per head (viridis, value printed in the cell); `link(l, c)`
// gives the anchor a cell links to ("" = none).
Figure grid_figure(const std::string& id, const std::string& section, const std::string& title, const std::string& subtitle,
                   const std::string& footnote, std::uint32_t layers, std::uint32_t per, const std::vector<double>& v,
                   const std::function<std::string(std::uint32_t, std::uint32_t)>& link) {
  double top = 0;
  for (double x : v) top = std::max(top, x);
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
      const double x = L + cell * c, y = T + cell * l, t = top > 0 ? val / top : 0;
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
  o += colour_bar(L, T + cell * layers + 14, 200, "0", number(top), viridis);
  f.svg = o + "</svg>\n";
  return f;
}

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

Figure attention_map(const ReportData& d, std::size_t si, std::size_t mi, std::uint32_t h) {
  const auto& s = d.scenarios[si];
  const auto& m = s.maps[mi];
  const double cell = m.keys > 24 ? 14 : 20;
  std::size_t longest = 1;
  for (const auto& t : m.tokens) longest = std::max(longest, std::min<std::size_t>(14, t.size()));
  const double L = 30 + std::min(110.0, 7.0 * double(longest)), T = 60 + std::min(80.0, 5.0 * double(longest));
  const double W = std::max(340.0, L + cell * m.keys + 20), H = T + cell * m.queries + 56;
  Figure f;
  f.id = map_anchor(si, mi, h);
  f.section = "maps";
  f.title = head_label(h) + " · report " + m.id;
  std::string o = svg_open(f.id, "attention-map", W, H,
                           " data-head=\"" + std::to_string(h) + "\" data-report=\"" + escape(m.id) +
                               "\" data-report-index=\"" + std::to_string(m.index) + "\"");
  o += text(8, 18, escape(cut(f.title, 44)), "font-size=\"13\" font-weight=\"bold\" class=\"fig-title\"");
  std::string sub = cut(s.name, 24) + " · head_separation " + number(m.separation);
  if (m.keys < m.n || m.queries < m.all_queries) sub += " · first " + std::to_string(m.keys) + " of " + std::to_string(m.n) + " tokens";
  o += text(8, 34, escape(sub), "fill=\"#444\"");
  for (std::uint32_t k = 0; k < m.keys; ++k)
    o += "<text class=\"token key\" transform=\"translate(" + px(L + cell * (k + 0.5) + 3) + "," + px(T - 6) +
         ") rotate(-60)\">" + escape(cut(m.tokens[k], 14)) + "</text>\n";
  for (std::uint32_t q = 0; q < m.queries; ++q) {
    const std::uint32_t tok = m.first_query + q;
    const std::string name = tok < m.tokens.size() ? m.tokens[tok] : "#" + std::to_string(tok);
    o += text(L - 6, T + cell * (q + 0.5) + 4, escape(cut(name, 14)), "class=\"token query\" text-anchor=\"end\"");
    for (std::uint32_t k = 0; k < m.keys; ++k) {
      const double w = m.maps[(std::size_t(h) * m.queries + q) * m.keys + k];
      o += rect(L + cell * k, T + cell * q, cell - 1, cell - 1, "fill=\"" + blues(w) + "\"");
    }
  }
  o += colour_bar(L, T + cell * m.queries + 12, 160, "0", "1", blues);
  f.svg = o + "</svg>\n";
  return f;
}

// ---------------------------------------------------------------- sweeps

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

// ---------------------------------------------------------------- scaling

// Both scaling figures: width, plot left/right/top/bottom, height.
struct Frame {
  double W, L, R, T, B, H;
};
constexpr Frame kScalingFrame{620, 60, 440, 50, 320, 370};

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
  Figure f{"scaling-speedup", "scaling", "Speedup against " + sc.unit, ""};
  const auto& runs = sc.runs;
  const double t0 = runs.empty() ? 1 : runs[0].threads, w0 = runs.empty() ? 1 : runs[0].wall_s;
  auto speedup = [&](double wall) { return wall > 0 ? w0 / wall : 0.0; };
  double tmax = t0, smax = 1;
  for (const auto& r : runs) {
    tmax = std::max(tmax, double(r.threads));
    smax = std::max({smax, speedup(r.min_s), speedup(r.wall_s), scaling_ceiling(sc, r), double(r.threads) / t0});
  }
  const Ticks tx = nice_ticks(0, tmax, 6), ty = nice_ticks(0, smax, 5);
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
  Figure f{"scaling-stages", "scaling", "Busy thread-seconds per stage", ""};
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

// ---------------------------------------------------------------- HTML

constexpr const char* kCss = R"(body{font-family:'DejaVu Sans','Noto Sans','Noto Sans CJK KR','Nanum Gothic',sans-serif;margin:24px;color:#222;max-width:1600px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px;word-break:break-all}
.figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}svg.fig{border:1px solid #eee}p.note{color:#555;font-size:13px;max-width:900px}
p.warn{color:#a00;font-size:13px})";

std::string stats_row(const std::vector<std::string>& names, const Stats& st) {
  std::string r = "<tr>";
  for (const auto& n : names) r += "<td>" + escape(n) + "</td>";
  r += "<td class=\"num\">" + count(st.count) + "</td>";
  for (double v : {st.mean, st.std, st.p01, st.p10, st.p50, st.p90, st.p99}) r += "<td class=\"num\">" + number(v, 4) + "</td>";
  return r + "</tr>\n";
}

}  // namespace

std::vector<Figure> figures(const ReportData& d) {
  std::vector<Figure> out;
  if (!d.scenarios.empty()) {
    const PlaneDomain dom = plane_domain(d);
    for (std::size_t i = 0; i < shown(d); ++i) out.push_back(seed_plot(d, i, dom));
  }
  if (!d.grids.empty()) {
    // Model runs: the top report's maps of every (scenario, layer) first, so each grid cell links
    // to one, then the next reports while the report holds fewer than Limits::map_cells cells.
    std::set<std::string> drawn;
    std::vector<Figure> maps;
    std::size_t cells = 0, most = 0;
    for (std::size_t i = 0; i < shown(d); ++i) most = std::max(most, d.scenarios[i].maps.size());
    for (std::size_t m = 0; m < most; ++m)
      for (std::size_t i = 0; i < shown(d); ++i) {
        const auto& s = d.scenarios[i];
        if (m >= s.maps.size()) continue;
        const std::size_t need = std::size_t(s.maps[m].queries) * s.maps[m].keys * (d.heads + 1);
        if (m > 0 && cells + need > d.limits.map_cells) continue;
        cells += need;
        for (std::uint32_t h = 0; h <= d.heads; ++h) {
          maps.push_back(attention_map(d, i, m, h));
          drawn.insert(maps.back().id);
        }
      }
    for (const auto& g : d.grids)
      out.push_back(grid_figure(g.id, "model", g.title, cut(g.subtitle, 64),
                                drawn.empty() ? "means over the reports" : "means over the reports; a head links to its map in the top report",
                                g.layers, g.heads, g.values, [&](std::uint32_t l, std::uint32_t c) {
                                  const std::string a = map_anchor(g.maps_of + l, 0, c + 1);
                                  return drawn.count(a) ? a : std::string();
                                }));
    double ent_hi = 1e-3, sep_hi = 1e-3;
    for (const auto& s : d.scenarios) {
      for (const auto& st : s.entropy) ent_hi = std::max(ent_hi, st.max);
      for (const auto& st : s.head_separation) sep_hi = std::max(sep_hi, st.max);
    }
    for (std::size_t i = 0; i < shown(d); ++i) {
      const auto& s = d.scenarios[i];
      if (!s.entropy.empty()) out.push_back(strips(d, i, "entropy", s.entropy, 0, ent_hi, 0, "model-dist"));
      if (!s.head_separation.empty()) out.push_back(strips(d, i, "separation", s.head_separation, 0, sep_hi, 1, "model-dist"));
    }
    for (auto& f : maps) out.push_back(std::move(f));
  }
  if (!d.scenarios.empty() && d.distributions) {
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
  if (d.attention) {
    double ent_hi = 0;
    for (const auto& s : d.scenarios)
      for (const auto& st : s.entropy) ent_hi = std::max(ent_hi, st.max);
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
  if (d.sweep) out.push_back(sweep_figure(*d.sweep));
  if (d.scaling) out.push_back(scaling_speedup(*d.scaling)), out.push_back(scaling_stages(*d.scaling));
  return out;
}

std::string html(const ReportData& d, const std::vector<Figure>& figs) {
  const auto& h = d.header;
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>headsep report";
  if (!h.scenario_plugin.empty()) o += " — " + escape(h.scenario_plugin);
  o += "</title>\n<style>\n" + std::string(kCss) + "\n</style>\n</head>\n<body>\n";
  o += "<header id=\"run-header\">\n<h1>headsep report</h1>\n<table class=\"header\">\n";
  auto row = [&](const std::string& k, const std::string& v_escaped, const std::string& id) {
    o += "<tr id=\"hdr-" + id + "\"><th>" + escape(k) + "</th><td>" + v_escaped + "</td></tr>\n";
  };
  row("command", "<code>" + escape(h.command_line) + "</code>", "command");
  row("version", escape(h.version), "version");
  row("scenario generator", escape(h.scenario_plugin), "scenario");
  row("weighting scheme", escape(h.weighting_plugin), "weighting");
  std::string params;
  for (const auto& p : h.params) params += (params.empty() ? "" : "<br>") + ("<code>" + escape(p) + "</code>");
  row("parameters", params.empty() ? "(defaults)" : params, "params");
  if (!d.axes.empty() || !d.scaling)  // a scaling page of a model's run knows neither
    row("context axes", escape([&] {
          std::string a;
          for (const auto& x : d.axes) a += (a.empty() ? "" : ", ") + x;
          return a;
        }()),
        "axes");
  if (d.heads || !d.scaling)
    row("heads", std::to_string(d.heads) + (d.layers > 1 ? " (" + std::to_string(d.layers) + " layers)" : ""), "heads");
  row("reports", count(h.reports) + " (" + count(h.groups) + " report × scenario groups)", "reports");
  std::string threads = std::to_string(h.threads);
  if (d.scaling) {  // one run per count
    threads.clear();
    for (const auto& r : d.scaling->runs) threads += (threads.empty() ? "" : ", ") + std::to_string(r.threads);
    threads += sc_unit_note(*d.scaling);
  }
  row("threads", escape(threads), "threads");
  row("SIMD level", escape(h.simd), "simd");
  row("precision", escape(h.precision), "precision");
  row("wall time", escape(number(h.seconds, 3) + " s"), "time");
  o += "</table>\n</header>\n";

  auto section_figs = [&](const std::string& section) {
    std::string s = "<div class=\"figs\">\n";
    for (const auto& f : figs)
      if (f.section == section) s += f.svg;
    return s + "</div>\n";
  };
  if (!d.scenarios.empty() && !d.distributions) {
    o += "<section id=\"summary\">\n<h2>head_separation per scenario and layer (means)</h2>\n<table class=\"summary\">\n"
         "<tr><th>scenario · layer</th><th>reports</th><th>mean head_separation</th></tr>\n";
    for (const auto& s : d.scenarios)
      o += "<tr><td>" + escape(s.name) + "</td><td class=\"num\">" + count(s.count) + "</td><td class=\"num\">" +
           number(s.separation.stats.mean, 4) + "</td></tr>\n";
    o += "</table>\n</section>\n";
    o += "<section id=\"model\">\n<h2>Layer × head</h2>\n<p class=\"note\">Per scenario, every head of every layer: "
         "its mean context distance to the other heads of its layer (the seed's separation), its mean Jensen–Shannon "
         "divergence to them, and its attention entropy (means over the reports). A cell links to the head's map in the "
         "scenario's top report (below).</p>\n" +
         section_figs("model") + "</section>\n";
    o += "<section id=\"model-distributions\">\n<h2>Per head, over the reports</h2>\n<p class=\"note\">Per scenario and "
         "layer, each head's attention entropy (baseline included) and separation (mean context distance to the other "
         "heads of its layer) over the reports: line p01–p99, box p10–p90, tick p50, dot mean.</p>\n" +
         section_figs("model-dist") + "</section>\n";
    std::size_t kept = 0, drawn = 0;
    for (std::size_t i = 0; i < shown(d); ++i) kept += d.scenarios[i].maps.size();
    for (const auto& f : figs) drawn += f.section == "maps";
    o += "<section id=\"model-maps\">\n<h2 id=\"maps\">Attention maps of the top reports</h2>\n<p class=\"note\">Per "
         "scenario, the reports with the largest separation (the mean over layers and head pairs of the pair's context "
         "distance; the summary's <code>top</code> list, in its order), every layer and head, the first " +
         std::to_string(d.limits.map_tokens) + " tokens; rows are queries, columns keys.</p>\n";
    if (kept == 0) o += "<p class=\"note\">No maps were kept in this run.</p>\n";
    if (drawn < kept * (d.heads + 1))
      o += "<p class=\"warn\">Maps beyond each scenario's top report are drawn only while the report holds fewer than " +
           count(d.limits.map_cells) + " map cells; some are not drawn.</p>\n";
    o += section_figs("maps") + "</section>\n";
    o += "<section id=\"seed-plots\">\n<h2>The seed's plot, per layer</h2>\n<p class=\"note\">The mean contexts of each "
         "layer's baseline (grey) and heads on the first two context axes.</p>\n";
    if (d.scenarios.size() > shown(d))
      o += "<p class=\"warn\">" + count(d.scenarios.size() - shown(d)) + " more layers are in the table above, not drawn.</p>\n";
    o += section_figs("seed") + "</section>\n";
  }
  if (!d.scenarios.empty() && d.distributions) {
    o += "<section id=\"summary\">\n<h2>head_separation per scenario</h2>\n<table class=\"summary\">\n<tr><th>scenario</th>"
         "<th>reports</th><th>mean</th><th>std</th><th>p01</th><th>p10</th><th>p50</th><th>p90</th><th>p99</th></tr>\n";
    for (const auto& s : d.scenarios) o += stats_row({s.name}, s.separation.stats);
    o += "</table>\n";
    bool sketch = false;
    for (const auto& s : d.scenarios) sketch = sketch || !s.separation.stats.exact;
    if (sketch) o += "<p class=\"note\">Quantiles from a relative-error sketch (0.5 %) where a scenario has more than 4,096 reports.</p>\n";
    o += "</section>\n";
    o += "<section id=\"seed-plots\">\n<h2>The seed's plot</h2>\n<p class=\"note\">Per scenario, the contexts on the two "
         "context axes: the grey point is the single-head baseline, the blue triangle head 1, the orange square head 2 "
         "(further heads: further colour and shape pairs). The farther apart the heads, the more clearly they read "
         "different relations; the dashed line is that distance, head_separation. All plots share their axes.</p>\n";
    if (d.scenarios.size() > shown(d))
      o += "<p class=\"warn\">" + count(d.scenarios.size() - shown(d)) + " more scenarios are in the table above, not drawn.</p>\n";
    o += section_figs("seed") + "</section>\n";
    o += "<section id=\"distributions\">\n<h2>Distributions</h2>\n" + section_figs("dist") + "</section>\n";
  }
  if (d.attention) {
    o += "<section id=\"attention\">\n<h2>Attention</h2>\n<p class=\"note\">Per head entropy and confidence over "
         "all reports, the Jensen–Shannon divergence between heads, and the layer × head grid of mean separation "
         "(each head's mean distance to the other heads in the context plane).</p>\n" +
         section_figs("attention");
    std::size_t drawn = 0, kept = 0;
    for (const auto& f : figs) drawn += f.section == "maps";
    for (std::size_t i = 0; i < shown(d); ++i) kept += d.scenarios[i].maps.size();
    o += "<h3 id=\"maps\">Attention maps of the top reports</h3>\n<p class=\"note\">Per scenario, the " +
         std::to_string(d.limits.map_reports) +
         " reports with the largest head_separation over the whole run (the summary's top list, <code>--top</code>), in "
         "that order; rows are queries, columns keys.</p>\n";
    if (kept == 0) o += "<p class=\"note\">No maps were kept in this run (<code>--top 0</code>).</p>\n";
    if (drawn < kept * (d.heads + 1))
      o += "<p class=\"warn\">Some kept maps are not drawn: the report holds at most " + count(d.limits.map_cells) +
           " map cells.</p>\n";
    o += section_figs("maps") + "</section>\n";
  }
  if (d.sweep) {
    const auto& sw = *d.sweep;
    o += "<section id=\"sweep-section\">\n<h2>Sweep of " + escape(sw.parameter) + "</h2>\n" + section_figs("sweep");
    o += "<table class=\"sweep\">\n<tr><th>" + escape(sw.parameter) + "</th><th>scenario</th><th>reports</th><th>mean</th>"
         "<th>std</th><th>p01</th><th>p10</th><th>p50</th><th>p90</th><th>p99</th></tr>\n";
    for (std::size_t i = 0; i < sw.values.size(); ++i)
      for (std::size_t j = 0; j < sw.scenarios.size(); ++j)
        if (sw.stats[i][j]) o += stats_row({sw.values[i], sw.scenarios[j]}, *sw.stats[i][j]);
    o += "</table>\n</section>\n";
  }
  if (d.scaling) {
    const auto& sc = *d.scaling;
    o += "<section id=\"scaling\">\n<h2>Scaling</h2>\n<p class=\"note\">The same job at each " +
         std::string(sc.unit == "ranks" ? "MPI rank count (busy seconds: rank 0's stages)" : "thread count") + ". Speedup and "
         "efficiency are against the first count; with <code>--ceiling</code>, the speedup that as many independent "
         "1-thread copies of the job got at once on this machine, and the engine's share of it (near 100 %: what is "
         "left to linear is the machine's).</p>\n";
    if (!sc.identical) o += "<p class=\"warn\">The outputs differed between counts.</p>\n";
    o += section_figs("scaling");
    o += "<table class=\"scaling\">\n<tr><th>" + sc.unit + "</th><th>wall s</th><th>min s</th><th>max s</th><th>speedup</th>"
         "<th>efficiency</th><th>ceiling</th><th>share of ceiling</th></tr>\n";
    const double w0 = sc.runs.empty() ? 0 : sc.runs[0].wall_s, t0 = sc.runs.empty() ? 1 : sc.runs[0].threads;
    for (const auto& r : sc.runs) {
      const double s = r.wall_s > 0 ? w0 / r.wall_s : 0;
      auto cell = [](const std::string& v) { return "<td class=\"num\">" + v + "</td>"; };
      o += "<tr>" + cell(std::to_string(r.threads)) + cell(number(r.wall_s, 4)) + cell(number(r.min_s, 4)) +
           cell(number(r.max_s, 4)) + cell(number(s, 3) + "×") + cell(number(100 * s * t0 / r.threads, 3) + " %") +
           cell(r.copies_wall_s ? number(scaling_ceiling(sc, r), 3) + "×" : "—") +
           cell(r.copies_wall_s && r.wall_s > 0 ? number(100 * *r.copies_wall_s / (r.threads * r.wall_s), 3) + " %" : "—") +
           "</tr>\n";
    }
    o += "</table>\n</section>\n";
  }
  o += "<footer><p class=\"note\">Written by headsep " + escape(h.version) +
       "; offline: no scripts, no external resources. Every figure is also available as SVG with --plot-svg.</p></footer>\n";
  return o + "</body>\n</html>\n";
}

std::string standalone_svg(const Figure& f) { return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + f.svg; }

void write(const ReportData& d, const std::string& html_path, const std::string& svg_dir) {
  const auto figs = figures(d);
  // Every file goes through OutputFile: nothing half-written is left if anything fails.
  std::vector<std::unique_ptr<OutputFile>> files;
  if (!svg_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(svg_dir, ec);
    if (ec) throw Error("--plot-svg " + svg_dir + ": cannot create the folder: " + ec.message());
    for (const auto& f : figs) {
      files.push_back(std::make_unique<OutputFile>((std::filesystem::path(svg_dir) / (f.id + ".svg")).string()));
      files.back()->write(standalone_svg(f));
    }
  }
  if (!html_path.empty()) {
    files.push_back(std::make_unique<OutputFile>(html_path));
    files.back()->write(html(d, figs));
  }
  for (auto& f : files) f->commit();
}

}  // namespace headsep::report
