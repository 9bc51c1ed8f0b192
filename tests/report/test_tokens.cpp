// Tokens as text (runtime/report/tokens.cpp): what the maps and the head view show for each
// tokenizer's pieces, against hand-decoded strings.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "report/figures.hpp"

using headsep::report::display_tokens;
using V = std::vector<std::string>;

TEST_CASE("display_tokens: byte-level BPE pieces decode to text, spaces visible", "[report][tokens]") {
  // GPT-2: 'Ġ' = space, 'Ċ' = newline; "ìķĪ" = the UTF-8 bytes EC 95 88 of '안'.
  CHECK(display_tokens(V{"Ġthe", "Ġpump", "Ċ", "ìķĪ"}) == V{"␣the", "␣pump", "↵", "안"});
  // A character split over tokens: the run's first token shows it, the others in parentheses.
  CHECK(display_tokens(V{"Ġì", "ķ", "Ī", "Ġok"}) == V{"␣안", "(␣안)", "(␣안)", "␣ok"});
  // Bytes that never form a character show as ⟨NN⟩ (an EC lead byte with nothing after it).
  CHECK(display_tokens(V{"Ġthe", "ì"}) == V{"␣the", "⟨EC⟩"});
}

TEST_CASE("display_tokens: SentencePiece's space and byte fallback", "[report][tokens]") {
  CHECK(display_tokens(V{"<s>", "▁the", "▁", "<0xEB>", "<0x85>", "<0x95>", "하"}) ==
        V{"<s>", "␣the", "␣", "녕", "(녕)", "(녕)", "하"});
  CHECK(display_tokens(V{"<0x0A>", "<0x41>"}) == V{"↵", "A"});
}

TEST_CASE("display_tokens: Hangul split into jamo by BERT's uncased normalizer shows its syllables", "[report][tokens]") {
  // all-MiniLM-L6-v2's tokens of "압력이 정지" (headsep tokenize --model): NFD jamo, one per token.
  CHECK(display_tokens(V{"[CLS]", "ᄋ", "##ᅡ", "##ᆸ", "##ᄅ", "##ᅧ", "##ᆨ", "##ᄋ", "##ᅵ", "ᄌ", "##ᅥ", "##ᆼ", "##ᄌ", "##ᅵ", "[SEP]"}) ==
        V{"[CLS]", "압", "(압)", "(압)", "##력", "(력)", "(력)", "##이", "(이)", "정", "(정)", "(정)", "##지", "(지)", "[SEP]"});
  // A lone consonant or vowel has no syllable to show: it stays as it is.
  CHECK(display_tokens(V{"ᄋ", "pump", "##ᅡ"}) == V{"ᄋ", "pump", "##ᅡ"});
}

TEST_CASE("display_tokens: text pieces stay as they are", "[report][tokens]") {
  // WordPiece, Korean, Latin-1 letters that are also byte-level code points: no 'Ġ'-range code
  // point, so no byte-level reading.
  CHECK(display_tokens(V{"[CLS]", "pump", "##ing", "정지결정", "é", "[SEP]"}) ==
        V{"[CLS]", "pump", "##ing", "정지결정", "é", "[SEP]"});
  // One token outside the byte-level alphabet (Hangul) keeps the whole report as text.
  CHECK(display_tokens(V{"Ġthe", "정지"}) == V{"Ġthe", "정지"});
  CHECK(display_tokens(V{}).empty());
}
