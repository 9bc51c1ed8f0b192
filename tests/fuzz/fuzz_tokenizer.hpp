// Fuzz harness: the tokenizer.json reader and the BPE / WordPiece encoders (runtime/model/
// tokenizer_json.cpp, bpe_tokenizer.cpp, bpe_split.cpp, bpe.cpp). Byte 0 chooses: 6 (mod 7) = the rest
// is a tokenizer.json, read and then run on a few fixed texts and on its own text; otherwise the rest is a text for the
// committed tokenizer fixture byte 0 mod 7 picks (tests/model/fixtures/tok_*). Besides crashes:
// ids inside the vocabulary, one word index per id, at most max_length ids, the same encoding twice
// (the per-thread word cache never changes a result), and for byte-level BPE without stripping
// tokens the tokens' bytes are the text's (nothing lost or invented).
#pragma once
#include <array>
#include <iterator>
#include <memory>
#include <string>

#include "fuzz_common.hpp"
#include "headsep/tokenizer.hpp"

namespace headsep::fuzz::tokenizer {

inline void check_encoding(const TextTokenizer& tok, std::string_view text) {
  Encoding e, again;
  if (!accepted([&] { tok.encode(text, e); })) return;  // invalid UTF-8, refused by byte offset
  expect(e.word.size() == e.ids.size(), "one word index per id");
  expect(e.ids.size() <= tok.max_length(), "more ids than max_length");
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    expect(e.ids[i] < tok.size(), "an id past the vocabulary");
    expect(e.word[i] == Encoding::kNoWord || e.word[i] < e.words.size(), "a word index past the words");
    tok.token(e.ids[i]);
  }
  tok.encode(text, again);
  expect(again.ids == e.ids && again.word == e.word && again.words == e.words, "a second encode differs");
}

/// GPT-2's byte alphabet backwards: the byte each code point of a byte-level token stands for.
inline std::array<int, 512> byte_of_char() {
  std::array<int, 512> back{};
  back.fill(-1);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool same = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    back[same ? b : 256 + extra++] = b;
  }
  return back;
}

/// The bytes a byte-level token stands for (its UTF-8 decoded to code points < 512, each one byte).
inline std::string token_bytes(const std::string& token) {
  static const auto back = byte_of_char();
  std::string out;
  for (std::size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    unsigned cp = c;
    std::size_t len = 1;
    if (c >= 0xC0 && c < 0xE0 && i + 1 < token.size()) cp = (c & 0x1Fu) << 6 | (token[i + 1] & 0x3F), len = 2;
    expect(cp < 512 && back[cp] >= 0, "a byte-level token outside the byte alphabet: " + token);
    out += static_cast<char>(back[cp]);
    i += len;
  }
  return out;
}

inline const TextTokenizer& fixture(std::size_t k) {
  static constexpr const char* kNames[] = {"tok_gpt2",      "tok_gpt2_prefix", "tok_llama",
                                           "tok_metaspace", "tok_llama3",      "tok_qwen2"};
  static std::array<std::unique_ptr<TextTokenizer>, std::size(kNames)> loaded;
  if (!loaded[k])
    loaded[k] = tokenizer_from_json_file(
        std::string(HEADSEP_SOURCE_DIR) + "/tests/model/fixtures/" + kNames[k] + "/tokenizer.json", 1u << 20);
  return *loaded[k];
}

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 7 == 6) {
    accepted([&] {
      const auto tok = tokenizer_from_json(rest, "fuzz.json", 64);
      expect(tok->size() > 0, "an accepted tokenizer with no token");
      for (const char* text : {"", "Hello, world! 123", "  a\tb\n\n", "<s> [CLS] <|endoftext|> x",
                               "\xec\x95\x88\xeb\x85\x95 \xf0\x9f\x98\x80 e\xcc\x81"})
        check_encoding(*tok, text);
      // The file's own text holds every added token's content (and is long): the added-token
      // matcher on many tokens and matches at once (corpus/tokenizer/json_many_added: 3 000).
      check_encoding(*tok, rest);
    });
    return 0;
  }
  const std::size_t k = data[0] % 7;
  const TextTokenizer& tok = fixture(k);
  check_encoding(tok, rest);
  // tok_gpt2: no normalizer, no prefix space; only `<mask>` strips (the space before it).
  Encoding e;
  if (k != 0 || rest.find("<mask>") != std::string_view::npos || !accepted([&] { tok.encode(rest, e); })) return 0;
  std::string bytes;
  for (const std::uint32_t id : e.ids) bytes += token_bytes(tok.token(id));
  expect(bytes == rest, "byte-level tokens do not spell the text");
  return 0;
}

}  // namespace headsep::fuzz::tokenizer
