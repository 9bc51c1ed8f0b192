// Lowercasing as Hugging Face tokenizers does it (Rust's char::to_lowercase): BertNormalizer's
// `lowercase` (wordpiece.cpp) and the `Lowercase` normalizer of a tokenizer.json (bpe_tokenizer.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace headsep::hf {

/// Lowercase of code point c into l (1..3 code points; İ becomes i + U+0307): utf8proc's simple
/// mapping, except where tokenizers' differs (kLower, hf_unicode_tables.hpp). Returns the count.
std::int32_t lowercase(std::int32_t c, std::int32_t (&l)[3]) noexcept;

/// s (valid UTF-8) lowercased code point by code point; ASCII-only text in place, quickly.
void lowercase_utf8(std::string& s);

}  // namespace headsep::hf
