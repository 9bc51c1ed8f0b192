// headsep — BERT's WordPiece tokenizer, from a model's vocab.txt.
//
//   WordPiece wp = WordPiece::from_file("model/vocab.txt", {.max_length = 512});
//   Encoding e;
//   wp.encode("Stop decision: pressure anomaly.", e);   // e.ids = [CLS] stop decision : ... [SEP]
//
// The same ids as Hugging Face `tokenizers` (BertNormalizer + BertPreTokenizer + WordPiece +
// the [CLS] A [SEP] template), tested against it on tests/data/wordpiece_fixture.json:
//  1. clean text: drop U+0000, U+FFFD and control characters (categories Cc, Cf, Cs, Co, Cn, but
//     not \t \n \r); every White_Space character becomes a space;
//  2. CJK ideographs (the Unicode blocks BERT lists) become words of their own;
//  3. lowercase models: canonical decomposition (NFD), combining marks (Mn) removed, lowercase
//     (simple case mapping; full mapping only differs on U+0130, whose dot NFD already removed);
//  4. words split at whitespace; every punctuation character (ASCII punctuation, categories P*)
//     is a word of its own;
//  5. per word: more than max_chars characters -> [UNK]; else greedy longest-match-first pieces,
//     continuations prefixed "##"; a word with a part no piece matches is one [UNK];
//  6. at most max_length - 2 pieces are kept, then [CLS] pieces [SEP].
// Special tokens ([PAD] [UNK] [CLS] [SEP] [MASK] when in the vocabulary, or the list set by
// set_special_tokens) are matched in the raw text first, leftmost-longest, and kept whole, as
// Hugging Face's added-token split does ("a [SEP] b" -> [CLS] a [SEP] b [SEP]).
// An empty or whitespace-only text gives [CLS] [SEP], as Hugging Face does.
// Which characters are control, whitespace, punctuation or nonspacing marks is decided as
// `tokenizers` decides it: its Unicode tables are older than utf8proc's (and keep unassigned code
// points), so the classes are read from the package itself into runtime/model/hf_unicode_tables.hpp
// (scripts/make_hf_unicode_tables.py). Decomposition and case come from utf8proc, except for the
// few code points where tokenizers' differ (listed in the same file).
// Text must be valid UTF-8: anything else is an Error naming the byte offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/tokenizer.hpp"

namespace headsep {

class AddedMatcher;  // runtime/model/added_match.hpp (private)

struct WordPieceOptions {
  bool lowercase = true;            ///< uncased models (also strips accents, as BertNormalizer with strip_accents unset)
  std::uint32_t max_chars = 100;    ///< longer words become [UNK] (max_input_chars_per_word)
  std::uint32_t max_length = 512;   ///< tokens per text, [CLS] and [SEP] included (>= 2)
  /// BertNormalizer's strip_accents: -1 = as `lowercase` (unset), 0 = keep, 1 = strip (NFD, drop Mn).
  std::int8_t strip_accents = -1;
};

class WordPiece final : public TextTokenizer {
 public:
  /// Reads vocab.txt (one token per line, id = line number - 1; trailing blanks and \r trimmed).
  /// Throws Error naming the file (and line) when it cannot be read, is empty, has a line that is
  /// not valid UTF-8, repeats a token, or lacks [CLS], [SEP] or [UNK]. A model folder's
  /// vocabulary is checked against the model too: headsep/model_tokenizer.hpp.
  static WordPiece from_file(const std::filesystem::path& vocab, WordPieceOptions options = {});
  /// The same from the file's bytes; `name` names it in messages.
  static WordPiece from_bytes(std::string_view bytes, const std::string& name, WordPieceOptions options = {});
  /// The same from the entries themselves (id = index), e.g. tokenizer.json's vocabulary.
  static WordPiece from_tokens(std::vector<std::string> tokens, const std::string& name, WordPieceOptions options = {});

  /// Tokenizes one text into `out` (cleared first). Thread-safe (const). Throws Error
  /// "invalid UTF-8 at byte N" on malformed input.
  void encode(std::string_view text, Encoding& out) const override;

  /// The tokens matched whole in raw text (replaces the default BERT five); each must be an entry
  /// of the vocabulary and non-empty, else Error naming `name`.
  void set_special_tokens(const std::vector<std::string>& tokens, const std::string& name);
  const std::vector<std::string>& special_tokens() const noexcept { return special_names_; }

  std::size_t size() const noexcept override { return tokens_.size(); }
  const std::string& token(std::uint32_t id) const override { return tokens_.at(id); }
  /// The id of an exact vocabulary entry ("##ing" included), or -1.
  std::int64_t find(std::string_view token) const noexcept override;
  std::uint32_t cls_id() const noexcept { return cls_; }
  std::uint32_t sep_id() const noexcept { return sep_; }
  std::uint32_t unk_id() const noexcept { return unk_; }
  const WordPieceOptions& options() const noexcept { return options_; }
  std::uint32_t max_length() const noexcept override { return options_.max_length; }
  const char* kind() const noexcept override { return "wordpiece"; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0, length = 0;  // in pool_
    std::int32_t id = -1;                  // -1 = empty
  };
  /// Open addressing over two key sets: word-initial pieces and "##" continuations (stored
  /// without the prefix, a flag mixed into the hash), so no prefixed copy is built per lookup.
  std::int64_t lookup(const char* s, std::size_t n, bool continuation) const noexcept;
  void insert(std::string_view key, bool continuation, std::uint32_t id, const std::string& name);
  void word_pieces(const std::string& word, std::uint32_t n_chars, std::uint32_t word_index, Encoding& out) const;

  WordPieceOptions options_;
  std::vector<std::string> tokens_;
  std::string pool_;
  std::vector<Slot> table_;
  std::size_t mask_ = 0;
  std::uint32_t cls_ = 0, sep_ = 0, unk_ = 0;
  struct Special {
    std::string text;
    std::uint32_t id;
  };
  std::vector<Special> specials_;           // as given
  std::vector<std::string> special_names_;  // as given
  std::shared_ptr<const AddedMatcher> special_match_;  // leftmost-longest over specials_ (immutable, shared by copies)
};

}  // namespace headsep
