// Building blocks of the report's SVG: escaping, numbers for people, scales and ticks, markers,
// and the drawing helpers of svg.hpp (elements, glyphs, axes, colour scales) every figure uses.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/report.hpp"
#include "report/svg.hpp"

namespace headsep::report {

std::string escape(std::string_view s) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        case '\t': case '\n': out += char(c); break;
        default: c < 0x20 || c == 0x7F ? out += kReplacement : out += char(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates, at most U+10FFFF) is copied.
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    bool ok = len > 0 && c <= 0xF4 && i + len <= n && !(c == 0xC0 || c == 0xC1);
    std::uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) ok = (len == 2 || (len == 3 && cp >= 0x800) || (len == 4 && cp >= 0x10000)) &&
                 !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF && cp != 0xFFFE && cp != 0xFFFF &&
                 !(cp >= 0x80 && cp < 0xA0);  // C1 controls
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

std::string number(double v, int significant) {
  if (!std::isfinite(v)) return v != v ? "NaN" : v > 0 ? "∞" : "−∞";
  if (v == 0) return "0";
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.*e", significant - 1, v);
    // 1.50e+06 -> 1.5e6
    std::string s = buf;
    auto e = s.find('e');
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
      if (mant.back() == '.') mant.pop_back();
    }
    int exponent = std::stoi(ex);
    return mant + "e" + std::to_string(exponent);
  }
  const int magnitude = int(std::floor(std::log10(a)));
  const int decimals = std::max(0, significant - 1 - magnitude);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string count(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Ticks nice_ticks(double lo, double hi, int target) {
  Ticks t;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(lo))) {
    const double pad = lo == 0 ? 0.5 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  t.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  // Ticks as integer multiples of the step, so labels carry no rounding noise.
  const double first = std::floor(lo / t.step + 1e-9), last = std::ceil(hi / t.step - 1e-9);
  for (double k = first; k <= last + 0.5; k += 1) t.values.push_back(k * t.step);
  t.lo = t.values.front(), t.hi = t.values.back();
  return t;
}

std::string Ticks::label(double v) const {
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  if (std::fabs(v) < step * 1e-6) v = 0;
  char buf[64];
  if (step >= 1e6 || step < 1e-4) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

Marker marker(std::uint32_t h) {
  // Okabe & Ito (2008) colours, each paired with its own shape so that no head depends on
  // colour alone. Head 1 = the seed's blue triangle, head 2 = its orange square.
  static constexpr const char* colours[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                            "#CC79A7", "#56B4E9", "#000000", "#F0E442"};
  static constexpr const char* shapes[] = {"triangle", "square", "diamond", "triangle-down",
                                           "plus", "star", "cross", "hexagon"};
  if (h == 0) return {"#808080", "circle"};
  const std::uint32_t i = h - 1;
  // Beyond 8 heads the shape cycle shifts against the colour cycle: pairs stay distinct up to 64.
  return {colours[(i + i / 8) % 8], shapes[i % 8]};
}

// ---------------------------------------------------------------- drawing (svg.hpp)

namespace {


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

}  // namespace

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

std::string svg_open(const std::string& id, const std::string& cls, double w, double h, const std::string& extra) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + id + "\" class=\"fig " + cls + "\" width=\"" + px(w) +
         "\" height=\"" + px(h) + "\" viewBox=\"0 0 " + px(w) + " " + px(h) + "\" font-family=\"" + font_stack() +
         "\" font-size=\"11\"" + extra + ">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

const char* font_stack() {
  return "'DejaVu Sans','Noto Sans','Noto Sans CJK KR','Nanum Gothic','Malgun Gothic','Apple SD Gothic Neo',sans-serif";
}

std::string text(double x, double y, const std::string& escaped, const std::string& attrs) {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + escaped + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" " + attrs + "/>\n";
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(0.0, w)) + "\" height=\"" +
         px(std::max(0.0, h)) + "\" " + attrs + "/>\n";
}

std::string head_label(std::uint32_t h) { return h ? "head " + std::to_string(h) : std::string("single-head baseline"); }
std::string head_short(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("single"); }

std::string marker_path(std::uint32_t h, double r) { return shape_path(marker(h).shape, r); }

const char* head_dash(std::uint32_t h) {
  static constexpr const char* dashes[] = {"", "6 3", "1.5 2.5", "7 3 1.5 3"};
  return h == 0 ? "" : dashes[((h - 1) / 8) % 4];
}

// A marker glyph; `attrs` adds classes and data. Yellow and light colours get a dark outline.
std::string glyph(std::uint32_t h, double x, double y, double r, const std::string& attrs, double opacity,
                  bool outlined) {
  const Marker m = marker(h);
  std::string stroke = outlined ? "#000000" : std::string(m.colour) == "#F0E442" ? "#7a6f00" : "none";
  return "<path " + attrs + " d=\"" + shape_path(m.shape, r) + "\" transform=\"translate(" + px(x) + "," + px(y) +
         ")\" fill=\"" + m.colour + "\"" + (opacity < 1 ? " fill-opacity=\"" + px(opacity) + "\"" : "") +
         (stroke != "none" ? " stroke=\"" + stroke + "\" stroke-width=\"1.2\"" : "") + ">";
}

// The baseline as a ring: its stroke in the baseline's colour, a light fill of it inside.
std::string baseline_ring(double x, double y, double r, const std::string& attrs, double opacity) {
  const std::string c = marker(0).colour;
  return "<path " + attrs + " d=\"" + shape_path(marker(0).shape, r) + "\" transform=\"translate(" + px(x) + "," + px(y) +
         ")\" fill=\"" + c + "\" fill-opacity=\"" + px(0.3 * opacity) + "\" stroke=\"" + c + "\" stroke-width=\"2.5\"" +
         (opacity < 1 ? " stroke-opacity=\"" + px(opacity) + "\"" : "") + ">";
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

std::string colour_bar(double x, double y, double w, const std::string& lo, const std::string& hi,
                       const std::function<std::string(double)>& colour, bool stretched) {
  std::string o;
  for (int i = 0; i < 20; ++i) o += rect(x + w * i / 20, y, w / 20 + 0.5, 10, "fill=\"" + colour((i + 0.5) / 20) + "\"");
  o += text(x, y + 22, escape(lo), "text-anchor=\"start\"") + text(x + w, y + 22, escape(hi), "text-anchor=\"end\"");
  if (stretched)
    o += text(x, y + 36, escape(lo == hi ? "one colour: every value is " + lo : "colours stretched to the data's range, " + lo + " to " + hi),
              "fill=\"#a04000\" class=\"scale-note\"");
  return o;
}

}  // namespace headsep::report
