#include "support/text_util.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace headsep {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    auto pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void append_py_float(std::string& out, double x) {
  if (std::isnan(x)) { out += "nan"; return; }
  if (std::isinf(x)) { out += x < 0 ? "-inf" : "inf"; return; }
  // Shortest digits first, then lay them out with Python's repr rules.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  bool neg = sci.front() == '-';
  if (neg) sci.remove_prefix(1);
  auto epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits += c;
  int exp10 = std::atoi(std::string(sci.substr(epos + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (neg) out += '-';
  const int n = static_cast<int>(digits.size());
  if (exp10 >= -4 && exp10 < 16) {  // Python's repr switches to exponent outside [1e-4, 1e16)
    if (exp10 < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-exp10 - 1), '0');
      out += digits;
    } else if (exp10 + 1 >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(exp10 + 1 - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(exp10 + 1));
      out += '.';
      out.append(digits, static_cast<std::size_t>(exp10 + 1));
    }
    return;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char e[16];
  std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  out += e;
}

double py_round(double x, int ndigits) {
  if (!std::isfinite(x) || x == 0.0) return x;
  // std::to_chars with a precision is exact (correctly rounded from the binary value),
  // which is what CPython's round() does via dtoa.
  char buf[400];
  auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed, ndigits);
  if (res.ec != std::errc()) return x;
  double y = 0;
  std::from_chars(buf, res.ptr, y);
  return y;
}

namespace {

// Decodes one code point; assumes valid UTF-8 (validated on input).
char32_t decode(std::string_view s, std::size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) { ++i; return b; }
  int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (0x3F >> (len - 1));
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += static_cast<std::size_t>(len);
  return cp;
}

// Python's str.isprintable() is false for categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs except
// the ASCII space. This covers Cc, Zs, Zl, Zp, private use and the format characters in common
// use; unassigned code points (Cn) would need Unicode's tables and print as themselves here.
bool py_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB))
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
  if ((c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000 || (c >= 0xD800 && c <= 0xDFFF)) return false;
  if (c == 0xFFFE || c == 0xFFFF) return false;
  return true;
}

}  // namespace

void append_py_str(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t start = i;
    char32_t c = decode(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (!py_printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += quote;
}

void append_json_number(std::string& out, double x) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, res.ptr);
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    out.append(s);
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void append_utf8(std::string& s, std::uint32_t c) {
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (c >> 12)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (c >> 18)));
    s.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::optional<std::size_t> find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    if (i + 8 <= n) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) { i += 8; continue; }
    }
    unsigned char b = p[i];
    if (b < 0x80) { ++i; continue; }
    std::size_t len;
    char32_t cp, min;
    if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F, min = 0x80;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F, min = 0x800;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07, min = 0x10000;
    else return i;
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

std::optional<double> parse_finite_double(std::string_view s) {
  auto is_blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (p != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Underflow rounds to zero as in Python; overflow would be inf, which we refuse.
    v = std::strtod(std::string(s).c_str(), nullptr);
    if (!std::isfinite(v)) return std::nullopt;
    return v;
  }
  if (ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string> canonical_double(std::string_view s) {
  auto v = parse_finite_double(s);
  if (!v) return std::nullopt;
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, *v);
  return std::string(buf, r.ptr);
}

std::string printable(std::string_view s, std::size_t limit) {
  std::string out;
  out.reserve(std::min(s.size(), limit) + 16);
  std::size_t i = 0;
  auto escape = [&](unsigned char c) {
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  while (i < s.size() && i < limit) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) escape(c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // One UTF-8 sequence: its length from the lead byte, valid only if find_invalid_utf8 agrees.
    const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    const std::string_view seq = s.substr(i, len);
    if (len == 1 || seq.size() < len || find_invalid_utf8(seq)) {
      escape(c);
      ++i;
    } else if (c == 0xC2 && static_cast<unsigned char>(seq[1]) < 0xA0) {  // C1 controls U+0080..U+009F
      escape(c), escape(static_cast<unsigned char>(seq[1]));
      i += 2;
    } else {
      out += seq;
      i += len;
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string json_error_text(const char* what) {
  std::string_view w(what);
  if (w.substr(0, 16) == "[json.exception.")
    if (const auto p = w.find("] "); p != std::string_view::npos) w.remove_prefix(p + 2);
  return printable(w, 160);
}

}  // namespace headsep
