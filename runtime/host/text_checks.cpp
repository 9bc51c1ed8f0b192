// Checks of the names and text a plugin declares, and how that text appears in messages: the one
// place that decides what a valid plugin, parameter, feature or scenario name is.
#include "host/text_checks.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "headsep/plugin_host.hpp"
#include "support/text_util.hpp"

namespace headsep::host {

namespace lim = plugin_limits;

std::string shown(std::string_view s) {
  const bool utf8 = !find_invalid_utf8(s);
  std::size_t cut = std::min<std::size_t>(s.size(), 80);
  while (utf8 && cut > 0 && cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out;
  for (std::size_t i = 0; i < cut; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut < s.size()) out += "...";
  return out;
}

std::string name_problem(const char* s, bool upper_ok) {
  if (!s) return "is NULL";
  const std::size_t n = strnlen(s, lim::max_name_bytes + 1);
  if (n == 0) return "is empty";
  if (n > lim::max_name_bytes) return "is longer than " + std::to_string(lim::max_name_bytes) + " bytes";
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    (upper_ok && c >= 'A' && c <= 'Z');
    if (!ok)
      return "'" + shown(s) + "' has the character '" + shown(std::string_view(s + i, 1)) + "' (allowed: " +
             (upper_ok ? "A-Z, " : "") + "a-z, 0-9, '_', '-')";
  }
  return {};
}

std::string text_problem(const char* s, bool empty_ok) {
  if (!s) return "is NULL";
  const std::size_t n = strnlen(s, lim::max_label_bytes + 1);
  if (n == 0 && !empty_ok) return "is empty";
  if (n > lim::max_label_bytes) return "is longer than " + std::to_string(lim::max_label_bytes) + " bytes";
  if (auto bad = find_invalid_utf8(std::string_view(s, n)))
    return "'" + shown(std::string_view(s, n)) + "' is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")";
  return {};
}

std::vector<std::string> checked_names(const std::string& prefix, const char* field, const char* count_field,
                                       const char* what, std::uint32_t n, const char* const* names,
                                       std::uint32_t limit) {
  if (n > limit)
    throw PluginError(prefix + count_field + " = " + std::to_string(n) + " is over the limit of " + std::to_string(limit));
  if (n && !names)
    throw PluginError(prefix + field + " is NULL but " + count_field + " = " + std::to_string(n));
  std::vector<std::string> out;
  out.reserve(n);
  std::map<std::string_view, std::uint32_t> seen;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (auto p = text_problem(names[i]); !p.empty())
      throw PluginError(prefix + what + " name " + std::to_string(i + 1) + " of " + std::to_string(n) + " (" + field +
                        "[" + std::to_string(i) + "]) " + p);
    out.emplace_back(names[i]);
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    auto [it, inserted] = seen.try_emplace(out[i], i);
    if (!inserted)
      throw PluginError(prefix + what + " '" + shown(out[i]) + "' is listed twice (" + what + "s " +
                        std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + "; names must be unique)");
  }
  return out;
}

}  // namespace headsep::host
