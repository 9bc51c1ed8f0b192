// SentencePiece's precompiled_charsmap as Hugging Face `tokenizers` applies it (normalizers
// Precompiled, the spm_precompiled crate): a little-endian u32 trie size, a Darts-clone double
// array of that many bytes, then NUL-terminated UTF-8 replacements the trie's values point at.
// Text is cut into extended grapheme clusters (utf8proc); a cluster under 6 bytes is looked up
// whole, and replaced whole by its FIRST (shortest) trie prefix's replacement; otherwise, or with
// no match, each character alone is replaced or kept.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headsep::bpe {

class Precompiled {
 public:
  /// From the JSON's base64 text; Error "`where` ..." when it is not base64, the trie is
  /// truncated or empty, or a value points outside the replacements or at text that is not UTF-8.
  Precompiled(std::string_view base64, const std::string& where);

  /// `text` (valid UTF-8) normalized.
  std::string apply(std::string_view text) const;
  /// The replacement of the shortest prefix of `key` in the trie, or nullptr (a NUL in `key` ends it).
  const char* lookup(std::string_view key, std::size_t& len) const noexcept;

 private:
  std::vector<std::uint32_t> units_;
  std::string normalized_;
};

/// Base64 (standard alphabet, padded) -> bytes; false on anything else.
bool decode_base64(std::string_view in, std::string& out);

}  // namespace headsep::bpe
