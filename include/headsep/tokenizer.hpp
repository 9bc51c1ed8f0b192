// headsep — the tokenizer interface every model's tokenizer implements (BERT WordPiece, byte-level
// BPE, byte-fallback BPE), and the reader of Hugging Face `tokenizer.json` files that builds one.
//
//   auto tok = headsep::tokenizer_from_json_file("model/tokenizer.json", 1024);
//   headsep::Encoding e;
//   tok->encode("Stop decision.", e);     // e.ids, tok->token(e.ids[i]), e.word / e.words
//
// What is read and what is refused by name: docs/MODEL.md, "Tokenizers".
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headsep {

/// One text's tokens. `word[i]` is the index in `words` of the word token i came from, or kNoWord
/// (special tokens, BOS/EOS, whitespace-only pieces). `words` are the words as the tokenizer sees
/// them: WordPiece's normalised words (lower-cased, accents stripped); for BPE the pre-tokenized
/// word without its marker (a leading space or '▁'), decoded to text, case kept. The lexicon of
/// `run --model` matches these (docs/MODEL.md, "Lexicon and BPE pieces").
struct Encoding {
  static constexpr std::uint32_t kNoWord = 0xffffffffu;
  std::vector<std::uint32_t> ids;
  std::vector<std::uint32_t> word;
  std::vector<std::string> words;
  bool truncated = false;  ///< tokens were dropped at the truncation length
  void clear() {
    ids.clear();
    word.clear();
    words.clear();
    truncated = false;
  }
};

/// A text -> ids tokenizer. encode() is const and thread-safe.
class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  /// Tokenizes one text into `out` (cleared first), post-processor tokens (e.g. [CLS]/[SEP], <s>)
  /// included, at most max_length() tokens. Throws Error "invalid UTF-8 at byte N".
  virtual void encode(std::string_view text, Encoding& out) const = 0;
  /// Ids are 0 .. size()-1 (the vocabulary and the added tokens).
  virtual std::size_t size() const noexcept = 0;
  /// The token string of an id (BPE: as the vocabulary writes it, e.g. "Ġstop", "▁stop", "<0xE2>").
  virtual const std::string& token(std::uint32_t id) const = 0;
  /// The id of an exact vocabulary entry, or -1.
  virtual std::int64_t find(std::string_view token) const noexcept = 0;
  /// Tokens per text, the post-processor's included.
  virtual std::uint32_t max_length() const noexcept = 0;
  /// "wordpiece", "bpe-byte-level", "bpe-byte-fallback" or "unigram".
  virtual const char* kind() const noexcept = 0;
};

/// Whether a word (Encoding::words) is punctuation only: non-empty, every character Unicode
/// punctuation (P*) or an ASCII symbol BERT counts as punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
/// The token-class axis `punctuation` (docs/METRICS.md); false for text that is not valid UTF-8.
bool punctuation_word(std::string_view utf8) noexcept;

/// Reads a Hugging Face tokenizer.json (its text: `bytes`; `name` names it in messages) into a
/// tokenizer cutting texts at `max_length` tokens. Throws Error naming the file and the JSON path
/// of a component headsep does not implement (`tok.json: normalizer.type 'StripAccents' is not
/// supported`), or the file:line:column of malformed JSON.
std::unique_ptr<TextTokenizer> tokenizer_from_json(std::string_view bytes, const std::string& name,
                                                   std::uint32_t max_length);
std::unique_ptr<TextTokenizer> tokenizer_from_json_file(const std::filesystem::path& file, std::uint32_t max_length);

}  // namespace headsep
