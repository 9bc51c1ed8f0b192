// BERT WordPiece (see wordpiece.hpp for the rules). One pass over the text: each code point is
// cleaned, normalised and classified as it is decoded, words are cut at whitespace and
// punctuation, and each word is split into pieces at once (no intermediate normalised string).
// ASCII goes through a 128-entry table; other code points through the classes of Hugging Face
// tokenizers itself (hf_unicode_tables.hpp) and utf8proc's NFD and lowercase.
#include "headsep/wordpiece.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <fstream>
#include <sstream>

#include "headsep/error.hpp"
#include "model/added_match.hpp"
#include "model/hf_lowercase.hpp"
#include "model/hf_unicode_tables.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

// ASCII classes, as the Unicode rules give them (HF's clean_text drops the control characters
// before it maps whitespace, so \v \f and 0x1c..0x1f are dropped, not spaces).
enum : std::uint8_t { kDrop, kSpace, kPunct, kChar };
constexpr std::array<std::uint8_t, 128> make_ascii() {
  std::array<std::uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c == '\t' || c == '\n' || c == '\r' || c == ' ') t[c] = kSpace;
    else if (c < 0x20 || c == 0x7f) t[c] = kDrop;
    else if ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~'))
      t[c] = kPunct;
    else t[c] = kChar;
  }
  return t;
}
constexpr std::array<std::uint8_t, 128> kAscii = make_ascii();

bool is_cjk(std::int32_t c) noexcept {  // BERT's _is_chinese_char blocks
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// tokenizers' class of a code point (hf_unicode_tables.hpp: its tables, not utf8proc's Unicode):
/// one load for the Basic Multilingual Plane (a 64 KiB table expanded once from the runs), a
/// binary search over the runs beyond it.
hf::CharClass class_by_runs(std::uint32_t c) noexcept {
  const auto* it = std::upper_bound(std::begin(hf::kClassRuns), std::end(hf::kClassRuns), c,
                                    [](std::uint32_t v, const hf::ClassRun& r) { return v < r.first; });
  return (it - 1)->cls;  // kClassRuns[0].first == 0
}
struct BmpClasses {
  std::array<hf::CharClass, 0x10000> cls;
  BmpClasses() noexcept {
    for (std::uint32_t c = 0; c < 0x10000; ++c) cls[c] = class_by_runs(c);
  }
};
const BmpClasses kBmp;  // (static init: 64 K binary searches, well under a millisecond)
hf::CharClass char_class(std::int32_t c) noexcept {
  return c < 0x10000 ? kBmp.cls[static_cast<std::uint32_t>(c)] : class_by_runs(static_cast<std::uint32_t>(c));
}
bool is_punct(std::int32_t c) noexcept { return c < 128 ? kAscii[c] == kPunct : char_class(c) == hf::kPunct; }

/// tokenizers' result where it differs from utf8proc's (hf::kNfd), else null.
const hf::Mapping* mapped(const hf::Mapping* first, const hf::Mapping* last, std::int32_t c) noexcept {
  const auto* it = std::lower_bound(first, last, c, [](const hf::Mapping& m, std::int32_t v) { return m.cp < v; });
  return it != last && it->cp == c ? it : nullptr;
}

/// NFD of one code point into d (at most 4), as tokenizers decomposes it; returns the count.
std::int32_t decompose(std::int32_t cp, std::int32_t (&d)[8]) noexcept {
  if (const auto* m = mapped(std::begin(hf::kNfd), std::end(hf::kNfd), cp)) {
    std::int32_t n = 0;
    while (n < 3 && m->to[n]) d[n] = m->to[n], ++n;
    return n;
  }
  int boundclass = UTF8PROC_BOUNDCLASS_START;
  const auto n = static_cast<std::int32_t>(
      utf8proc_decompose_char(cp, d, 8, static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE), &boundclass));
  if (n < 0 || n > 8) return d[0] = cp, 1;  // (cannot happen for a valid code point: at most 4 for NFD)
  return n;
}

void put_utf8(std::string& s, std::int32_t c) { append_utf8(s, static_cast<std::uint32_t>(c)); }

/// Decodes one code point at s[i] (s[i] >= 0x80), strict UTF-8 (no overlongs, surrogates or
/// values past U+10FFFF). Returns -1 when invalid.
std::int32_t decode(const unsigned char* s, std::size_t n, std::size_t& i) noexcept {
  const unsigned c = s[i];
  std::size_t len;
  std::int32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
  else return -1;
  if (i + len > n) return -1;
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned b = s[i + k];
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | std::int32_t(b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  i += len;
  return cp;
}

constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;
std::uint64_t hash_key(const char* s, std::size_t n, bool continuation) noexcept {
  std::uint64_t h = kFnvBasis ^ (continuation ? 0x9e3779b97f4a7c15ull : 0);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * kFnvPrime;
  return h ^ (h >> 29);
}

/// A vocabulary entry as a message shows it: Python's repr (escaped), at most 60 bytes of it.
std::string shown(std::string_view t) {
  std::size_t n = std::min<std::size_t>(t.size(), 60);
  while (n < t.size() && n > 0 && (static_cast<unsigned char>(t[n]) & 0xC0) == 0x80) --n;
  std::string s;
  append_py_str(s, t.substr(0, n));
  if (n < t.size()) s += "...";
  return s;
}

constexpr const char* kBertSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

}  // namespace

WordPiece WordPiece::from_file(const std::filesystem::path& vocab, WordPieceOptions options) {
  std::ifstream in(vocab, std::ios::binary);
  if (!in) throw Error(vocab.string() + ": cannot open the vocabulary (vocab.txt)");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(vocab.string() + ": cannot read the vocabulary");
  return from_bytes(ss.str(), vocab.string(), options);
}

WordPiece WordPiece::from_bytes(std::string_view bytes, const std::string& name, WordPieceOptions options) {
  std::vector<std::string> tokens;
  // Lines as HF reads them: split at '\n', trailing whitespace trimmed. HF would let a repeated
  // token keep its last id, leaving an id no text can reach: a vocabulary that does not match
  // its model (issue 23), so refused here, as a line that is not UTF-8 is.
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (const auto bad = find_invalid_utf8(line))
      throw Error(name + ":" + std::to_string(tokens.size() + 1) + ": not valid UTF-8 (byte " +
                  std::to_string(*bad + 1) + " of the line)");
    tokens.emplace_back(line);
    pos = end + 1;
  }
  return from_tokens(std::move(tokens), name, options);
}

WordPiece WordPiece::from_tokens(std::vector<std::string> tokens, const std::string& name, WordPieceOptions options) {
  if (options.max_length < 2) throw Error(name + ": max_length must be >= 2 ([CLS] and [SEP]), got " +
                                          std::to_string(options.max_length));
  WordPiece wp;
  wp.options_ = options;
  wp.tokens_ = std::move(tokens);
  if (wp.tokens_.empty()) throw Error(name + ": the vocabulary is empty");
  if (wp.tokens_.size() > 0x7fffffff) throw Error(name + ": too many tokens");
  std::size_t cap = 16;
  while (cap < wp.tokens_.size() * 2) cap <<= 1;
  wp.table_.assign(cap, Slot{});
  wp.mask_ = cap - 1;
  for (std::size_t id = 0; id < wp.tokens_.size(); ++id) {
    const std::string& t = wp.tokens_[id];
    const bool cont = t.size() >= 2 && t[0] == '#' && t[1] == '#';
    wp.insert(cont ? std::string_view(t).substr(2) : std::string_view(t), cont, static_cast<std::uint32_t>(id), name);
  }
  auto special = [&](const char* s) {
    const std::int64_t id = wp.find(s);
    if (id < 0) throw Error(name + ": the vocabulary has no " + s + " token");
    return static_cast<std::uint32_t>(id);
  };
  wp.cls_ = special("[CLS]");
  wp.sep_ = special("[SEP]");
  wp.unk_ = special("[UNK]");
  std::vector<std::string> specials;  // BertTokenizer's own, where the vocabulary has them
  for (const char* t : kBertSpecials)
    if (wp.find(t) >= 0) specials.emplace_back(t);
  wp.set_special_tokens(specials, name);
  return wp;
}

void WordPiece::set_special_tokens(const std::vector<std::string>& tokens, const std::string& name) {
  specials_.clear();
  for (const auto& t : tokens) {
    const std::int64_t id = t.empty() ? -1 : find(t);
    if (id < 0) throw Error(name + ": the special token " + shown(t) + " is not an entry of the vocabulary");
    specials_.push_back({t, static_cast<std::uint32_t>(id)});
  }
  special_match_ = std::make_shared<const AddedMatcher>(tokens);
  special_names_ = tokens;
}

void WordPiece::insert(std::string_view key, bool continuation, std::uint32_t id, const std::string& name) {
  const std::uint64_t h = hash_key(key.data(), key.size(), continuation);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = table_[i];
    if (s.id < 0) {
      s.hash = h;
      s.offset = static_cast<std::uint32_t>(pool_.size());
      s.length = static_cast<std::uint32_t>(key.size());
      s.id = static_cast<std::int32_t>(id);
      pool_.append(key);
      // The continuation flag is part of the key: kept in the pool as one trailing byte.
      pool_.push_back(continuation ? '\1' : '\0');
      return;
    }
    if (s.hash == h && s.length == key.size() && pool_[s.offset + s.length] == (continuation ? '\1' : '\0') &&
        pool_.compare(s.offset, s.length, key) == 0) {
      throw Error(name + ":" + std::to_string(id + 1) + ": the token " + shown(tokens_[id]) + " repeats line " +
                  std::to_string(s.id + 1) + " (each line of vocab.txt is one id: a repeated or extra line shifts the ids)");
    }
  }
}

std::int64_t WordPiece::lookup(const char* k, std::size_t n, bool continuation) const noexcept {
  const std::uint64_t h = hash_key(k, n, continuation);
  const char flag = continuation ? '\1' : '\0';
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = table_[i];
    if (s.id < 0) return -1;
    if (s.hash == h && s.length == n && pool_[s.offset + n] == flag &&
        (n == 0 || std::char_traits<char>::compare(pool_.data() + s.offset, k, n) == 0))
      return s.id;
  }
}

std::int64_t WordPiece::find(std::string_view token) const noexcept {
  if (token.size() >= 2 && token[0] == '#' && token[1] == '#') {
    const std::int64_t id = lookup(token.data() + 2, token.size() - 2, true);
    if (id >= 0) return id;
  }
  return lookup(token.data(), token.size(), false);
}

void WordPiece::word_pieces(const std::string& word, std::uint32_t n_chars, std::uint32_t word_index,
                            Encoding& out) const {
  const std::size_t limit = options_.max_length - 1;  // ids holds [CLS]; room for [SEP]
  if (out.ids.size() >= limit) {
    out.truncated = true;
    return;
  }
  if (n_chars > options_.max_chars) {
    out.ids.push_back(unk_);
    out.word.push_back(word_index);
    return;
  }
  const std::size_t first = out.ids.size(), n = word.size();
  const char* s = word.data();
  std::size_t start = 0;
  while (start < n) {
    std::size_t end = n;
    std::int64_t id = -1;
    while (end > start) {
      id = lookup(s + start, end - start, start > 0);
      if (id >= 0) break;
      do --end;  // back to the previous character boundary
      while (end > start && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80);
    }
    if (id < 0) {  // no piece matches: the whole word is [UNK]
      out.ids.resize(first);
      out.word.resize(first);
      out.ids.push_back(unk_);
      out.word.push_back(word_index);
      return;
    }
    out.ids.push_back(static_cast<std::uint32_t>(id));
    out.word.push_back(word_index);
    start = end;
  }
  if (out.ids.size() > limit) {  // pieces past max_length - 2 are dropped
    out.ids.resize(limit);
    out.word.resize(limit);
    out.truncated = true;
  }
}

void WordPiece::encode(std::string_view text, Encoding& out) const {
  out.clear();
  out.ids.push_back(cls_);
  out.word.push_back(Encoding::kNoWord);
  std::string word;
  std::uint32_t chars = 0;
  const bool lower = options_.lowercase;
  const bool strip = options_.strip_accents < 0 ? lower : options_.strip_accents > 0;
  auto flush = [&] {
    if (chars == 0) return;
    const auto wi = static_cast<std::uint32_t>(out.words.size());
    word_pieces(word, chars, wi, out);
    out.words.push_back(word);
    word.clear();
    chars = 0;
  };
  auto single = [&](std::int32_t c) {  // punctuation or a CJK ideograph: a word of its own
    flush();
    put_utf8(word, c);
    chars = 1;
    flush();
  };
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::int32_t dec[8];
  // The next special token (leftmost-longest, in one pass over the text); specials start on a
  // character boundary, where the loop below stops.
  const AddedMatcher* specials = special_match_ && !special_match_->empty() ? special_match_.get() : nullptr;
  auto next_special = [&](std::size_t from) { return specials ? specials->find(text, from) : std::nullopt; };
  auto special = next_special(0);
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (special && special->start < i) special = next_special(i);  // (never: specials start on a character)
    if (special && special->start == i) {  // kept whole: a word of its own
      flush();
      const Special& sp = specials_[special->pattern];
      if (out.ids.size() >= options_.max_length - 1) {
        out.truncated = true;
      } else {
        out.ids.push_back(sp.id);
        out.word.push_back(static_cast<std::uint32_t>(out.words.size()));
        out.words.push_back(sp.text);
      }
      i = special->end;
      special = next_special(i);
      continue;
    }
    if (c < 0x80) {
      ++i;
      switch (kAscii[c]) {
        case kDrop: break;
        case kSpace: flush(); break;
        case kPunct: single(static_cast<std::int32_t>(c)); break;
        default:
          word.push_back(static_cast<char>(lower && c >= 'A' && c <= 'Z' ? c + 32 : c));
          ++chars;
      }
      continue;
    }
    const std::size_t at = i;
    const std::int32_t cp = decode(s, n, i);
    if (cp < 0) throw Error("invalid UTF-8 at byte " + std::to_string(at + 1));
    const hf::CharClass cc = char_class(cp);  // U+FFFD and U+0000 included in kDrop
    if (cc == hf::kDrop) continue;
    if (cc == hf::kSpace) {
      flush();
      continue;
    }
    const bool cjk = is_cjk(cp);
    if (cjk) flush();
    std::int32_t nd = 1;
    dec[0] = cp;
    if (strip) nd = decompose(cp, dec);
    for (std::int32_t k = 0; k < nd; ++k) {
      if (strip && char_class(dec[k]) == hf::kMark) continue;
      std::int32_t low[3] = {dec[k], 0, 0}, nl = 1;
      if (lower) nl = hf::lowercase(dec[k], low);
      for (std::int32_t j = 0; j < nl; ++j) {
        if (!cjk && is_punct(low[j])) {
          single(low[j]);
        } else {
          put_utf8(word, low[j]);
          ++chars;
        }
      }
    }
    if (cjk) flush();
  }
  flush();
  out.ids.push_back(sep_);
  out.word.push_back(Encoding::kNoWord);
}

}  // namespace headsep
