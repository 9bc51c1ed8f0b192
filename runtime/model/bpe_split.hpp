// The pre-tokenizer regexes of the byte-level BPE families, written out by hand (no regex engine):
// GPT-2's (ByteLevel use_regex) and the Split patterns of Llama 3 and Qwen2, each recognized by its
// exact pattern string, with the character classes they use (Unicode White_Space, letters, numbers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace headsep::bpe {

/// Unicode White_Space (Rust's char::is_whitespace, Oniguruma's \s).
bool is_space(std::uint32_t c) noexcept;
/// Unicode punctuation (P*), for the lexicon's word trimming.
bool is_punct(std::uint32_t c) noexcept;
/// \p{L} or \p{N}.
bool is_alnum(std::uint32_t c) noexcept;
/// Rust regex's \w (Alphabetic, marks, decimal digits, connector punctuation, Join_Control): what
/// `tokenizers` calls a word character for an added token's single_word.
bool is_word_char(std::uint32_t c) noexcept;

enum class SplitRegex : std::uint8_t {
  kNone,    ///< no split: the whole text is one piece
  kGpt2,    ///< 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  ///< kLlama3Pattern (digits in runs of up to 3)
  kQwen2,   ///< kQwen2Pattern (the same with single digits)
};
/// The Split patterns of Llama 3's and Qwen2's tokenizer.json, as the files spell them.
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
/// The regex a Split pattern string is, when it is one of those exactly.
std::optional<SplitRegex> split_regex_of(std::string_view pattern) noexcept;

/// The pieces of `s` (valid UTF-8) as `tokenizers` (Oniguruma, leftmost-first) cuts it with the
/// regex, behavior Isolated: `ends` gets each piece's end (bytes), the last one s.size().
void regex_split(SplitRegex r, std::string_view s, std::vector<std::size_t>& ends);

}  // namespace headsep::bpe
