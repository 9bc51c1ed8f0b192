// The BPE model of Hugging Face `tokenizers` (models/bpe): one pre-tokenized word -> token ids, by
// merges in rank order (the lowest-ranked adjacent pair first, leftmost among equals — the order
// of tokenizers' priority queue), over either the word's bytes mapped to GPT-2's byte alphabet
// (byte-level) or its characters (Llama style); a symbol not in the vocabulary becomes the <0xXX>
// tokens of its UTF-8 (byte fallback) or <unk> (fused with fuse_unk), in either mode.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace headsep::bpe {

/// Length of the UTF-8 sequence starting with byte c, and its code point (the text is valid UTF-8).
inline std::size_t utf8_len(unsigned char c) noexcept { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
inline std::uint32_t decode_at(const unsigned char* s, std::size_t len) noexcept {
  if (len == 1) return s[0];
  std::uint32_t c = s[0] & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) c = (c << 6) | (s[k] & 0x3Fu);
  return c;
}

/// One token of a word: its id and the byte offset in the word where it starts.
struct Piece {
  std::uint32_t id;
  std::uint32_t start;
};

/// GPT-2's byte -> character map (bytes_to_unicode): printable Latin-1 bytes map to themselves,
/// the others to U+0100.. in order. kByteChar[b] is the code point.
extern const std::uint32_t kByteChar[256];

struct Options {
  bool byte_level = false;     ///< words are bytes in GPT-2's alphabet (ByteLevel pre-tokenizer)
  bool byte_fallback = false;  ///< a character not in the vocabulary becomes its <0xXX> tokens
  bool fuse_unk = false;       ///< consecutive unknown characters become one unk
  bool ignore_merges = false;  ///< a word that is a vocabulary entry is that token
  std::int64_t unk = -1;       ///< unk_token's id, or -1 (unknown characters are dropped, as HF does)
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>>;

/// A word -> tokens model behind the tokenizer pipeline (bpe_tokenizer.hpp): BPE here, Unigram
/// (unigram.hpp). Thread-safe.
class WordModel {
 public:
  virtual ~WordModel() = default;
  /// Appends the pieces of `word` (non-empty UTF-8; byte-level BPE: raw bytes) to `out`.
  virtual void tokenize(std::string_view word, std::vector<Piece>& out) const = 0;
  /// True when some token holds `marker` (UTF-8) after a character other than itself: then words
  /// joined by the marker cannot be cut apart before the model.
  virtual bool merges_cross(std::string_view marker) const noexcept = 0;
};

class Model final : public WordModel {
 public:
  /// `merges` in rank order, each a pair of vocabulary entries whose concatenation is one too
  /// (else Error naming `where` and the merge's index).
  Model(const Vocab& vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
        const std::string& where);

  /// Appends the pieces of `word` (non-empty; byte-level: raw bytes; else UTF-8 text) to `out`.
  /// Thread-safe: each thread keeps its own cache of recent words.
  void tokenize(std::string_view word, std::vector<Piece>& out) const override;
  /// The same without the cache (the reference the cache is tested against).
  void tokenize_uncached(std::string_view word, std::vector<Piece>& out) const;

  const Options& options() const noexcept { return options_; }
  /// True when some merge creates a token with `marker` (UTF-8) after a character other than
  /// itself: then words joined by the marker cannot be cut apart before BPE.
  bool merges_cross(std::string_view marker) const noexcept override;

 private:
  struct MergeSlot {
    std::uint64_t key = ~0ull;
    std::uint32_t rank = 0, id = 0;
  };
  const MergeSlot* merge_of(std::uint32_t a, std::uint32_t b) const noexcept;
  void initial_symbols(std::string_view word, std::vector<Piece>& syms, std::vector<std::uint32_t>& lens) const;

  Options options_;
  const Vocab* vocab_ = nullptr;  // the owner's (outlives the model)
  std::vector<MergeSlot> merges_;
  std::uint64_t mask_ = 0;
  std::vector<std::string> merged_tokens_;  // the merges' results, for merges_cross
  std::int64_t byte_id_[256];               // the id of byte b's character in GPT-2's alphabet (byte-level)
  std::int64_t hex_id_[256];                // the id of <0xXX> (byte fallback)
  std::unordered_map<std::uint32_t, std::uint32_t> char_id_;  // single-character tokens by code point
  std::uint64_t uid_;                       // this model's cache key (never reused)
};

}  // namespace headsep::bpe
