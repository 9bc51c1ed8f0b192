// The BPE tokenizer pipeline (bpe_tokenizer.hpp), step for step as `tokenizers` runs it:
// added tokens (leftmost-longest, single_word / lstrip / rstrip), normalizer, normalized added
// tokens, pre-tokenizer, BPE per word, truncation, template. Words for the lexicon: the
// pre-tokenizer's pieces (byte-level) or the text between markers ('▁'), marker stripped.
#include "model/bpe_tokenizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "headsep/error.hpp"
#include "model/added_match.hpp"
#include "model/bpe_split.hpp"
#include "model/hf_lowercase.hpp"
#include "support/text_util.hpp"

namespace headsep::bpe {
namespace {

/// NFC, NFD, NFKC or NFKD of `t` (valid UTF-8) in place, by utf8proc (docs/MODEL.md: where its
/// Unicode version differs from tokenizers').
void unicode_form(NormStep::Kind k, std::string& t) {
  if (std::all_of(t.begin(), t.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return;  // ASCII: every form is itself
  int flags = UTF8PROC_STABLE | (k == NormStep::kNfc || k == NormStep::kNfkc ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE);
  if (k == NormStep::kNfkc || k == NormStep::kNfkd) flags |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* r = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(t.data()), static_cast<utf8proc_ssize_t>(t.size()),
                                          &r, static_cast<utf8proc_option_t>(flags));
  if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  t.assign(reinterpret_cast<const char*>(r), static_cast<std::size_t>(n));
  std::free(r);
}

class BpeTokenizer final : public TextTokenizer {
 public:
  explicit BpeTokenizer(BpeSpec spec) : spec_(std::move(spec)) {
    if (spec_.model) model_ = spec_.model;
    else model_ = std::make_shared<Model>(spec_.vocab, spec_.merges, spec_.options, spec_.name + ": model.merges");
    std::vector<std::string> raw, norm;
    for (std::uint32_t i = 0; i < spec_.added.size(); ++i) {
      const AddedToken& a = spec_.added[i];
      (a.normalized ? norm_added_ : raw_added_).tokens.push_back(i);
      (a.normalized ? norm : raw).push_back(a.normalized ? normalize(a.content) : a.content);
      // tokenizers would match the empty pattern at every position (and fail on non-ASCII text).
      if ((a.normalized ? norm : raw).back().empty())
        throw Error(spec_.name + ": added_tokens[" + std::to_string(i) + "] '" + a.content.substr(0, 40) +
                    "' is empty after the normalizer (it would match everywhere); give it normalized false");
    }
    raw_added_.ac = AddedMatcher(raw);
    norm_added_.ac = AddedMatcher(norm);
    if (spec_.pre.kind == PreTokenizer::kMetaspace) marker_ = spec_.pre.replacement;
    for (const NormStep& s : spec_.normalizer)
      if (s.kind == NormStep::kReplace && s.pattern == " ") marker_ = s.content;
    split_words_ = !marker_.empty() && !model_->merges_cross(marker_);
    for (const auto& t : spec_.tokens) index_.emplace(t, static_cast<std::uint32_t>(&t - spec_.tokens.data()));
  }
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  std::size_t size() const noexcept override { return spec_.tokens.size(); }
  const std::string& token(std::uint32_t id) const override { return spec_.tokens.at(id); }
  std::int64_t find(std::string_view t) const noexcept override {
    const auto it = index_.find(t);
    return it == index_.end() ? -1 : std::int64_t(it->second);
  }
  std::uint32_t max_length() const noexcept override { return spec_.max_length; }
  const char* kind() const noexcept override {
    if (spec_.kind) return spec_.kind;
    return spec_.options.byte_level ? "bpe-byte-level" : "bpe-byte-fallback";
  }

  void encode(std::string_view text, Encoding& out) const override {
    out.clear();
    if (const auto bad = find_invalid_utf8(text)) throw Error("invalid UTF-8 at byte " + std::to_string(*bad + 1));
    split_added(text, raw_added_, [&](std::size_t start, std::string_view seg) {
      if (spec_.normalizer.empty()) return normalized_segment(seg, start == 0, out);
      normalized_segment(normalize(seg), start == 0, out);
    }, out);
    const std::size_t extra = spec_.prefix.size() + spec_.suffix.size();
    const std::size_t keep = spec_.max_length > extra ? spec_.max_length - extra : 0;
    if (out.ids.size() > keep) out.ids.resize(keep), out.word.resize(keep), out.truncated = true;
    out.ids.insert(out.ids.begin(), spec_.prefix.begin(), spec_.prefix.end());
    out.word.insert(out.word.begin(), spec_.prefix.size(), Encoding::kNoWord);
    out.ids.insert(out.ids.end(), spec_.suffix.begin(), spec_.suffix.end());
    out.word.insert(out.word.end(), spec_.suffix.size(), Encoding::kNoWord);
  }

 private:
  struct Matcher {
    AddedMatcher ac;
    std::vector<std::uint32_t> tokens;  // pattern -> index in spec_.added
  };

  std::string normalize(std::string_view s) const {
    std::string t(s);
    for (const NormStep& st : spec_.normalizer) {
      if (st.kind == NormStep::kPrepend) {
        if (!t.empty()) t.insert(0, st.content);
      } else if (st.kind == NormStep::kLowercase) {
        hf::lowercase_utf8(t);
      } else if (st.kind == NormStep::kPrecompiled) {
        t = st.charsmap->apply(t);
      } else if (st.kind == NormStep::kReplaceSpaceRuns) {
        std::string r;
        for (std::size_t i = 0; i < t.size();) {
          std::size_t j = i;
          while (j < t.size() && t[j] == ' ') ++j;
          if (j - i >= 2) r += st.content, i = j;
          else r += t[i++];
        }
        t.swap(r);
      } else if (st.kind != NormStep::kReplace) {
        unicode_form(st.kind, t);
      } else if (st.pattern.empty()) {  // the empty pattern matches at every character boundary
        if (t.empty()) continue;
        std::string r = st.content;
        for (std::size_t i = 0; i < t.size();) {
          const std::size_t len = std::min(utf8_len(static_cast<unsigned char>(t[i])), t.size() - i);
          r.append(t, i, len).append(st.content), i += len;
        }
        t.swap(r);
      } else {
        std::string r;
        for (std::size_t i = 0; i < t.size();) {
          if (t.compare(i, st.pattern.size(), st.pattern) == 0) r += st.content, i += st.pattern.size();
          else r += t[i++];
        }
        t.swap(r);
      }
    }
    return t;
  }

  /// tokenizers' AddedVocabulary::find_matches: the text cut around the tokens of `m`; each
  /// token's id goes to `out`, each text between them to `text(start, piece)`. As there, the next
  /// search starts at a match's end even when rstrip took the spaces after it, and a match that
  /// single_word rejects is skipped whole.
  template <class F>
  void split_added(std::string_view s, const Matcher& m, F&& text, Encoding& out) const {
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    auto char_at = [&](std::size_t i) { return decode_at(b + i, std::min(utf8_len(b[i]), s.size() - i)); };
    auto char_before = [&](std::size_t i) {
      std::size_t k = i - 1;
      while (k > 0 && (b[k] & 0xC0) == 0x80) --k;
      return decode_at(b + k, i - k);
    };
    auto space_before = [&](std::size_t i) {  // start of the whitespace run ending at i
      while (i > 0) {
        std::size_t k = i - 1;
        while (k > 0 && (b[k] & 0xC0) == 0x80) --k;
        if (!is_space(decode_at(b + k, i - k))) break;
        i = k;
      }
      return i;
    };
    std::size_t done = 0;  // tokenizers' start_offset: the end of the last token
    for (std::size_t from = 0; from < s.size();) {
      const auto hit = m.ac.find(s, from);
      if (!hit) break;
      from = hit->end;
      const AddedToken& a = spec_.added[m.tokens[hit->pattern]];
      std::size_t start = hit->start, stop = hit->end;
      if (a.single_word && ((start > 0 && is_word_char(char_before(start))) || (stop < s.size() && is_word_char(char_at(stop)))))
        continue;
      if (a.lstrip) start = std::max(space_before(start), done);
      if (a.rstrip)
        while (stop < s.size() && is_space(char_at(stop))) stop += std::min(utf8_len(b[stop]), s.size() - stop);
      if (done < start) text(done, s.substr(done, start - done));
      out.ids.push_back(a.id), out.word.push_back(Encoding::kNoWord);
      done = stop;
    }
    if (done != s.size() || s.empty()) text(done, s.substr(done));
  }

  void normalized_segment(std::string_view s, bool at_start, Encoding& out) const {
    split_added(s, norm_added_, [&](std::size_t start, std::string_view piece) {
      pre_tokenize(piece, at_start && start == 0, out);
    }, out);
  }

  void pre_tokenize(std::string_view s, bool at_start, Encoding& out) const {
    if (s.empty()) return;
    const PreTokenizer& p = spec_.pre;
    if (p.kind == PreTokenizer::kByteLevel) {
      thread_local std::string buf;
      if (p.add_prefix_space && s[0] != ' ') buf.assign(" ").append(s), s = buf;
      thread_local std::vector<std::size_t> ends;
      regex_split(p.regex, s, ends);
      std::size_t start = 0;
      for (const std::size_t e : ends) unit(s.substr(start, e - start), out), start = e;
      return;
    }
    if (p.kind == PreTokenizer::kNone) return marked(s, out);
    thread_local std::string buf;  // Metaspace: spaces -> the replacement, maybe prepended, maybe split
    buf.clear();
    for (const char c : s)
      if (c == ' ') buf.append(p.replacement);
      else buf.push_back(c);
    if ((p.prepend == PreTokenizer::kAlways || (p.prepend == PreTokenizer::kFirst && at_start)) &&
        buf.compare(0, p.replacement.size(), p.replacement) != 0)
      buf.insert(0, p.replacement);
    const std::string_view v = buf;
    if (!p.split) return marked(v, out);
    std::size_t start = 0;
    for (std::size_t i = v.find(p.replacement, 1); i != std::string_view::npos; i = v.find(p.replacement, i + 1))
      marked(v.substr(start, i - start), out), start = i;
    marked(v.substr(start), out);
  }

  /// A word's text for the lexicon: markers as spaces, surrounding whitespace trimmed (empty -> no
  /// word), then surrounding punctuation unless the word is only punctuation.
  std::uint32_t add_word(std::string_view w, Encoding& out) const {
    std::string t;
    for (std::size_t i = 0; i < w.size();) {
      if (!marker_.empty() && w.compare(i, marker_.size(), marker_) == 0) t += ' ', i += marker_.size();
      else t += w[i++];
    }
    const auto* b = reinterpret_cast<const unsigned char*>(t.data());
    std::size_t lo = 0, hi = t.size();
    while (lo < hi) { const std::size_t l = utf8_len(b[lo]); if (!is_space(decode_at(b + lo, std::min(l, hi - lo)))) break; lo += l; }
    while (hi > lo) { std::size_t k = hi - 1; while (k > lo && (b[k] & 0xC0) == 0x80) --k; if (!is_space(decode_at(b + k, hi - k))) break; hi = k; }
    if (lo == hi) return Encoding::kNoWord;
    std::size_t plo = lo, phi = hi;  // then punctuation ("reset." -> "reset"), unless that is all
    while (plo < phi) { const std::size_t l = utf8_len(b[plo]); if (!is_punct(decode_at(b + plo, std::min(l, phi - plo)))) break; plo += l; }
    while (phi > plo) { std::size_t k = phi - 1; while (k > plo && (b[k] & 0xC0) == 0x80) --k; if (!is_punct(decode_at(b + k, phi - k))) break; phi = k; }
    if (plo < phi) lo = plo, hi = phi;
    out.words.emplace_back(t, lo, hi - lo);
    return static_cast<std::uint32_t>(out.words.size() - 1);
  }

  /// One BPE word (a pre-tokenizer piece): its tokens, all of one lexicon word.
  void unit(std::string_view w, Encoding& out) const {
    if (w.empty()) return;
    thread_local std::vector<Piece> pieces;
    pieces.clear();
    model_->tokenize(w, pieces);
    const std::uint32_t word = add_word(w, out);
    for (const Piece& p : pieces) out.ids.push_back(p.id), out.word.push_back(word);
  }

  /// Text whose words begin at a marker ('▁') after a non-marker: cut there before BPE when no merge
  /// crosses such a boundary (the same tokens, and the cache works per word); else BPE over the
  /// whole text, each token assigned to the word its first byte is in.
  void marked(std::string_view s, Encoding& out) const {
    if (s.empty()) return;
    if (marker_.empty()) return unit(s, out);
    thread_local std::vector<std::size_t> cuts;
    cuts.assign(1, 0);
    const std::size_t m = marker_.size();
    for (std::size_t i = s.find(marker_, 1); i != std::string_view::npos; i = s.find(marker_, i + 1))
      if (i < m || s.compare(i - m, m, marker_) != 0) cuts.push_back(i);  // i < m: no marker fits before it
    cuts.push_back(s.size());
    if (split_words_) {
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k) unit(s.substr(cuts[k], cuts[k + 1] - cuts[k]), out);
      return;
    }
    thread_local std::vector<Piece> pieces;
    thread_local std::vector<std::uint32_t> words;
    pieces.clear(), words.clear();
    model_->tokenize(s, pieces);
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) words.push_back(add_word(s.substr(cuts[k], cuts[k + 1] - cuts[k]), out));
    for (const Piece& p : pieces) {
      const auto k = std::upper_bound(cuts.begin(), cuts.end(), std::size_t(p.start)) - cuts.begin() - 1;
      out.ids.push_back(p.id), out.word.push_back(words[static_cast<std::size_t>(k)]);
    }
  }

  BpeSpec spec_;
  std::shared_ptr<const WordModel> model_;
  Matcher raw_added_, norm_added_;
  std::string marker_;
  bool split_words_ = false;
  Vocab index_;  // token -> id over spec_.tokens
};

}  // namespace

std::unique_ptr<TextTokenizer> make_bpe_tokenizer(BpeSpec spec) { return std::make_unique<BpeTokenizer>(std::move(spec)); }

}  // namespace headsep::bpe
