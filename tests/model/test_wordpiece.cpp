// WordPiece against the reference tokenizer (Hugging Face `tokenizers`, tests/data/
// make_wordpiece_fixture.py): every id of every fixture text, with all-MiniLM-L6-v2's vocab.txt;
// plus the rules the fixture cannot show alone (invalid UTF-8, truncation flag, vocab errors).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "headsep/error.hpp"
#include "headsep/wordpiece.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using namespace headsep;

namespace {
std::string ids_text(const std::vector<std::uint32_t>& v, const WordPiece& wp) {
  std::string s;
  for (auto id : v) s += (s.empty() ? "" : " ") + (id < wp.size() ? wp.token(id) : "?") + "(" + std::to_string(id) + ")";
  return s;
}
}  // namespace

TEST_CASE("WordPiece gives the reference tokenizer's ids on every fixture text", "[wordpiece][model]") {
  const auto fixture = nlohmann::json::parse(testutil::read_file(HEADSEP_SOURCE_DIR "/tests/data/wordpiece_fixture.json"));
  const auto dir = testutil::model_dir();
  WordPieceOptions opt;
  opt.max_length = fixture["max_length"].get<std::uint32_t>();
  const WordPiece wp = WordPiece::from_file(dir / "vocab.txt", opt);
  REQUIRE(wp.size() == 30522);
  REQUIRE(fixture["cases"].size() >= 200);
  Encoding e;
  std::size_t mismatches = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<std::uint32_t>>();
    wp.encode(text, e);
    if (e.ids != want) {
      ++mismatches;
      UNSCOPED_INFO("text: " << text << "\n got:  " << ids_text(e.ids, wp) << "\n want: " << ids_text(want, wp));
    }
    CHECK(e.word.size() == e.ids.size());
  }
  CHECK(mismatches == 0);
}

TEST_CASE("WordPiece: words, truncation, invalid UTF-8, vocabulary errors", "[wordpiece][model]") {
  const WordPiece wp = WordPiece::from_bytes("[PAD]\n[UNK]\n[CLS]\n[SEP]\nstop\n##ped\npress\n##ure\n.\nca\n##fe\n", "mini");
  Encoding e;
  wp.encode("Stopped PRESSURE. Café xyz", e);
  CHECK(e.ids == std::vector<std::uint32_t>{2, 4, 5, 6, 7, 8, 9, 10, 1, 3});
  CHECK(e.words == std::vector<std::string>{"stopped", "pressure", ".", "cafe", "xyz"});
  CHECK(e.word == std::vector<std::uint32_t>{Encoding::kNoWord, 0, 0, 1, 1, 2, 3, 3, 4, Encoding::kNoWord});
  CHECK_FALSE(e.truncated);

  const WordPiece small = WordPiece::from_bytes("[PAD]\n[UNK]\n[CLS]\n[SEP]\nstop\n", "mini", {.max_length = 4});
  small.encode("stop stop stop", e);
  CHECK(e.ids == std::vector<std::uint32_t>{2, 4, 4, 3});
  CHECK(e.truncated);
  small.encode("stop stop   ", e);
  CHECK_FALSE(e.truncated);
  small.encode("", e);
  CHECK(e.ids == std::vector<std::uint32_t>{2, 3});

  CHECK_THROWS_WITH(wp.encode("ok \xff bad", e), Catch::Contains("invalid UTF-8 at byte 4"));
  CHECK_THROWS_WITH(wp.encode("\xc0\xaf", e), Catch::Contains("invalid UTF-8 at byte 1"));       // overlong
  CHECK_THROWS_WITH(wp.encode("a\xed\xa0\x80", e), Catch::Contains("invalid UTF-8 at byte 2"));  // surrogate
  CHECK_THROWS_WITH(wp.encode("ab\xe2\x82", e), Catch::Contains("invalid UTF-8 at byte 3"));     // cut short
  CHECK_THROWS_WITH(WordPiece::from_bytes("[UNK]\n[CLS]\n", "v.txt"), Catch::Contains("v.txt: the vocabulary has no [SEP]"));
  CHECK_THROWS_WITH(WordPiece::from_file("/nonexistent/vocab.txt"), Catch::Contains("/nonexistent/vocab.txt: cannot open"));
  CHECK_THROWS_WITH(WordPiece::from_bytes("[UNK]\n[CLS]\n[SEP]\n", "v", {.max_length = 1}), Catch::Contains("max_length"));
}
