// Building blocks of the report's SVG: escaping, numbers for people, scales and ticks, markers.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/report.hpp"

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

}  // namespace headsep::report
