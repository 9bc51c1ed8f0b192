// precompiled_charsmap (precompiled.hpp). The double array is searched as Darts-clone lays it out:
// a unit's low byte is its label, bit 8 says a leaf hangs below it, its offset is the upper bits
// shifted by 8 more when bit 9 is set; a child is found at base ^ byte. Every index is checked, and
// the load walks every reachable node once so that a value pointing nowhere is refused up front.
#include "model/precompiled.hpp"

#include <utf8proc.h>

#include "headsep/error.hpp"
#include "model/bpe.hpp"
#include "support/text_util.hpp"

namespace headsep::bpe {
namespace {

std::uint32_t label(std::uint32_t u) { return u & ((1u << 31) | 0xFFu); }
bool has_leaf(std::uint32_t u) { return (u >> 8) & 1u; }
std::uint32_t value(std::uint32_t u) { return u & ((1u << 31) - 1); }
std::uint32_t offset(std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

}  // namespace

bool decode_base64(std::string_view in, std::string& out) {
  if (in.size() % 4 != 0) return false;
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  out.clear();
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=') : 0;
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = k >= 4 - pad ? 0 : val(in[i + k]);
      if (d < 0) return false;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (pad < 2) out.push_back(static_cast<char>(v >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
  }
  return true;
}

Precompiled::Precompiled(std::string_view base64, const std::string& where) {
  std::string blob;
  if (!decode_base64(base64, blob)) throw Error(where + " is not base64");
  if (blob.size() < 4) throw Error(where + " is " + std::to_string(blob.size()) + " bytes, shorter than its trie size");
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  const std::uint32_t trie_bytes = p[0] | p[1] << 8 | p[2] << 16 | std::uint32_t(p[3]) << 24;
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4)
    throw Error(where + ": a trie of " + std::to_string(trie_bytes) + " bytes does not fit the " + std::to_string(blob.size() - 4) +
                " after its size (truncated, or not a precompiled_charsmap)");
  units_.resize(trie_bytes / 4);
  for (std::size_t i = 0; i < units_.size(); ++i) {
    const unsigned char* u = p + 4 + 4 * i;
    units_[i] = u[0] | u[1] << 8 | u[2] << 16 | std::uint32_t(u[3]) << 24;
  }
  normalized_.assign(blob, 4 + trie_bytes, std::string::npos);
  // Every reachable leaf: its value must start a NUL-terminated UTF-8 string inside the blob.
  std::vector<char> seen(units_.size(), 0);
  std::vector<std::uint32_t> todo{offset(units_[0])};
  while (!todo.empty()) {
    const std::uint32_t base = todo.back();
    todo.pop_back();
    for (std::uint32_t c = 1; c < 256; ++c) {
      const std::uint32_t at = base ^ c;
      if (at >= units_.size() || label(units_[at]) != c || seen[at]) continue;
      seen[at] = 1;
      const std::uint32_t next = at ^ offset(units_[at]);
      if (has_leaf(units_[at])) {
        const std::uint32_t v = next < units_.size() ? value(units_[next]) : ~0u;
        const std::size_t end = v < normalized_.size() ? normalized_.find('\0', v) : std::string::npos;
        if (end == std::string::npos || find_invalid_utf8(std::string_view(normalized_).substr(v, end - v)))
          throw Error(where + ": the trie points at replacement byte " + std::to_string(v) + ", which is not NUL-terminated UTF-8 inside its " +
                      std::to_string(normalized_.size()) + " bytes of replacements");
      }
      todo.push_back(next);
    }
  }
}

const char* Precompiled::lookup(std::string_view key, std::size_t& len) const noexcept {
  std::uint32_t pos = offset(units_[0]);
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= units_.size() || label(units_[pos]) != c) return nullptr;
    const std::uint32_t unit = units_[pos];
    pos ^= offset(unit);
    if (has_leaf(unit) && pos < units_.size()) {  // the first (shortest) match is the one used
      const char* r = normalized_.data() + value(units_[pos]);
      len = normalized_.find('\0', value(units_[pos])) - value(units_[pos]);
      return r;
    }
  }
  return nullptr;
}

std::string Precompiled::apply(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  auto each_char = [&](std::size_t s, std::size_t e) {  // a cluster character by character
    for (std::size_t i = s; i < e;) {
      const std::size_t l = std::min(utf8_len(b[i]), e - i);
      std::size_t n = 0;
      if (const char* r = lookup(text.substr(i, l), n)) out.append(r, n);
      else out.append(text, i, l);
      i += l;
    }
  };
  utf8proc_int32_t state = 0;
  std::size_t start = 0;
  std::uint32_t prev = 0;
  for (std::size_t i = 0; i <= text.size();) {
    std::uint32_t c = 0;
    std::size_t l = 0;
    if (i < text.size()) l = std::min(utf8_len(b[i]), text.size() - i), c = decode_at(b + i, l);
    if (i == text.size() || (i > start && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev),
                                                                           static_cast<utf8proc_int32_t>(c), &state))) {
      std::size_t n = 0;
      const char* r = i - start < 6 ? lookup(text.substr(start, i - start), n) : nullptr;
      if (r) out.append(r, n);
      else each_char(start, i);
      start = i;
      if (i == text.size()) break;
    }
    prev = c;
    i += l;
  }
  return out;
}

}  // namespace headsep::bpe
