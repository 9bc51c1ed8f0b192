// The BPE pre-tokenizer regexes (bpe_split.hpp) as hand-written matchers that give Oniguruma's
// leftmost-first matches, alternative by alternative, backtracking included (\s+(?!\S) leaves the
// last space of a run to the next word; \s*[\r\n]+ ends at the run's last line break).
#include "model/bpe_split.hpp"

#include <utf8proc.h>

#include <algorithm>

#include "model/bpe.hpp"

namespace headsep::bpe {
namespace {

enum Cls : std::uint8_t { kLetter, kNumber, kSpaceCls, kOther };
Cls class_of(std::uint32_t c) noexcept {
  if (c < 0x80) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return kLetter;
    if (c >= '0' && c <= '9') return kNumber;
    return is_space(c) ? kSpaceCls : kOther;
  }
  if (is_space(c)) return kSpaceCls;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return kLetter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: return kNumber;
    default: return kOther;
  }
}

/// The text as code points, their byte offsets (one past the end too) and classes.
struct Chars {
  std::vector<std::uint32_t> cps, at;
  std::vector<Cls> cls;
  void decode(std::string_view s) {
    cps.clear(), at.clear(), cls.clear();
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t len = std::min(utf8_len(b[i]), s.size() - i);
      cps.push_back(decode_at(b + i, len)), at.push_back(static_cast<std::uint32_t>(i)), cls.push_back(class_of(cps.back()));
      i += len;
    }
    at.push_back(static_cast<std::uint32_t>(s.size()));
  }
  std::size_t run(std::size_t j, Cls k) const noexcept {
    while (j < cls.size() && cls[j] == k) ++j;
    return j;
  }
  /// \s+(?!\S)|\s+ from i (a space): the run, less its last space when a non-space follows and
  /// the run has two or more.
  std::size_t spaces(std::size_t i) const noexcept {
    const std::size_t j = run(i, kSpaceCls);
    return j < cls.size() && j - i >= 2 ? j - 1 : j;
  }
};

/// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::size_t gpt2_match(const Chars& t, std::size_t i) noexcept {
  const std::size_t n = t.cps.size();
  const std::uint32_t c = t.cps[i];
  if (c == '\'' && i + 1 < n) {
    const std::uint32_t d = t.cps[i + 1], e = i + 2 < n ? t.cps[i + 2] : 0;
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
    if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
  }
  const bool sp = c == ' ' && i + 1 < n && t.cls[i + 1] != kSpaceCls;
  const Cls k = sp ? t.cls[i + 1] : t.cls[i];
  return k != kSpaceCls ? t.run(sp ? i + 1 : i, k) : t.spaces(i);
}

/// (?i:) folds of the contractions' letters: ASCII case, and U+017F (long s) folds to s.
std::uint32_t fold(std::uint32_t c) noexcept { return c == 0x17F ? 's' : c < 0x80 && c >= 'A' && c <= 'Z' ? c | 0x20 : c; }
bool line_break(std::uint32_t c) noexcept { return c == '\r' || c == '\n'; }

/// Llama 3 (max_digits 3) and Qwen2 (1): (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
/// \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
std::size_t llama3_match(const Chars& t, std::size_t i, std::size_t max_digits) noexcept {
  const std::size_t n = t.cps.size();
  const std::uint32_t c = t.cps[i];
  if (c == '\'' && i + 1 < n) {
    const std::uint32_t d = fold(t.cps[i + 1]), e = i + 2 < n ? fold(t.cps[i + 2]) : 0;
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
    if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
  }
  const Cls k = t.cls[i];
  if (k == kLetter) return t.run(i, kLetter);
  if (k != kNumber && !line_break(c) && i + 1 < n && t.cls[i + 1] == kLetter) return t.run(i + 1, kLetter);
  if (k == kNumber) return std::min(t.run(i, kNumber), i + max_digits);
  if (k == kOther || (c == ' ' && i + 1 < n && t.cls[i + 1] == kOther)) {
    std::size_t j = t.run(k == kOther ? i : i + 1, kOther);
    while (j < n && line_break(t.cps[j])) ++j;
    return j;
  }
  const std::size_t e = t.run(i, kSpaceCls);  // \s*[\r\n]+: up to the run's last line break
  for (std::size_t p = e; p > i; --p)
    if (line_break(t.cps[p - 1])) return p;
  return t.spaces(i);
}

}  // namespace

bool is_space(std::uint32_t c) noexcept {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_punct(std::uint32_t c) noexcept {
  const auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}
bool is_alnum(std::uint32_t c) noexcept {
  const Cls k = class_of(c);
  return k == kLetter || k == kNumber;
}
bool is_word_char(std::uint32_t c) noexcept {
  if (c < 0x80) return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  // Other_Alphabetic symbols: circled, parenthesized and squared Latin letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
    return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
  }
}

std::optional<SplitRegex> split_regex_of(std::string_view pattern) noexcept {
  if (pattern == kLlama3Pattern) return SplitRegex::kLlama3;
  if (pattern == kQwen2Pattern) return SplitRegex::kQwen2;
  return std::nullopt;
}

void regex_split(SplitRegex r, std::string_view s, std::vector<std::size_t>& ends) {
  ends.clear();
  if (r == SplitRegex::kNone) {
    if (!s.empty()) ends.push_back(s.size());
    return;
  }
  thread_local Chars t;
  t.decode(s);
  for (std::size_t i = 0; i < t.cps.size();) {
    const std::size_t j = r == SplitRegex::kGpt2 ? gpt2_match(t, i) : llama3_match(t, i, r == SplitRegex::kLlama3 ? 3 : 1);
    ends.push_back(t.at[j]);
    i = j;
  }
}

}  // namespace headsep::bpe
