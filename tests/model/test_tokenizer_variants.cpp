// tokenizer.json variants against Hugging Face `tokenizers` (tests/model/fixtures/tok_variants,
// made by make_tokenizer_variants.py; no `tokenizers` needed here): every variant of the three
// small bases (byte-level BPE, byte-fallback BPE + Metaspace, WordPiece) that `tokenizers` reads
// gives its ids on every text, and every one it refuses is refused. Then the classes one by one,
// each with cases of its own: repeated merges, byte-level unk / byte fallback, the empty Replace
// pattern, max_input_chars_per_word 0, Metaspace's replacement, and added tokens matched in one pass.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "headsep/error.hpp"
#include "headsep/tokenizer.hpp"
#include "model/added_match.hpp"
#include "test_util.hpp"

using namespace headsep;
using json = nlohmann::json;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures/tok_variants";

json load(const std::string& file) { return json::parse(testutil::read_file((kDir / file).string())); }

using testutil::error_of;

std::vector<std::uint32_t> ids(const TextTokenizer& t, std::string_view text) {
  Encoding e;
  t.encode(text, e);
  return e.ids;
}

/// A tiny BPE tokenizer.json: `vocab` by id, `merges` in rank order, extra fields merged in.
json tiny_bpe(const std::vector<std::string>& vocab, const std::vector<std::string>& merges) {
  json v = json::object();
  for (std::size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  return {{"version", "1.0"}, {"model", {{"type", "BPE"}, {"vocab", v}, {"merges", merges}}}};
}

std::vector<std::string> tokens(const TextTokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (auto id : ids(t, text)) out.push_back(t.token(id));
  return out;
}

}  // namespace

TEST_CASE("tokenizer.json variants: tokenizers' ids on every text, its refusals refused", "[model][tokenizer][variants]") {
  const json texts = load("texts.json");
  const json bases = {{"bl", load("base_bl.json")}, {"fb", load("base_fb.json")}, {"wp", load("base_wp.json")}};
  std::istringstream in(testutil::read_file((kDir / "variants.jsonl").string()));
  std::size_t variants = 0, compared = 0, refused = 0;
  for (std::string line; std::getline(in, line);) {
    const json v = json::parse(line);
    const std::string name = v["name"].get<std::string>();
    INFO(name);
    const json doc = bases[v["base"].get<std::string>()].patch(v["patch"]);
    ++variants;
    if (v.contains("headsep_refuses")) {  // tokenizers would read other ids than the file's
      CHECK_THAT(error_of([&] { tokenizer_from_json(doc.dump(), name + ".json", 4096); }),
                 Contains(v["headsep_refuses"].get<std::string>()));
      continue;
    }
    if (v.value("refused", false)) {
      CHECK_THROWS_AS(tokenizer_from_json(doc.dump(), name + ".json", 4096), Error);
      ++refused;
      continue;
    }
    std::unique_ptr<TextTokenizer> tok;  // (the truncation length: ModelTokenizer reads it from the file)
    const json tr = doc.value("truncation", json());
    const std::uint32_t max_length = tr.is_object() ? tr["max_length"].get<std::uint32_t>() : 4096;
    REQUIRE_NOTHROW(tok = tokenizer_from_json(doc.dump(), name + ".json", max_length));
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (v["ids"][i].is_null()) continue;  // tokenizers fails on it (a panic: docs/MODEL.md)
      INFO("text " << i << ": " << texts[i].dump());
      CHECK(ids(*tok, texts[i].get<std::string>()) == v["ids"][i].get<std::vector<std::uint32_t>>());
      ++compared;
    }
  }
  CHECK(variants >= 60);
  CHECK(refused >= 3);
  CHECK(compared >= 3000);
}

TEST_CASE("BPE: a merge listed twice takes the rank of its last occurrence", "[model][tokenizer][variants]") {
  const std::vector<std::string> vocab{"a", "b", "c", "d", "ab", "bc", "cd", "abc"};
  // ab before bc: "abc" -> ab c; ab listed again after bc: bc first -> a bc.
  CHECK(tokens(*tokenizer_from_json(tiny_bpe(vocab, {"a b", "b c"}).dump(), "t", 64), "abc") == std::vector<std::string>{"ab", "c"});
  CHECK(tokens(*tokenizer_from_json(tiny_bpe(vocab, {"a b", "b c", "a b"}).dump(), "t", 64), "abc") ==
        std::vector<std::string>{"a", "bc"});
  // Listed again with nothing between: the same order. Listed three times around cd: the last counts.
  CHECK(tokens(*tokenizer_from_json(tiny_bpe(vocab, {"a b", "a b", "b c"}).dump(), "t", 64), "abc") == std::vector<std::string>{"ab", "c"});
  CHECK(tokens(*tokenizer_from_json(tiny_bpe(vocab, {"c d", "b c", "c d", "ab c", "a b", "b c"}).dump(), "t", 64), "abcd") ==
        std::vector<std::string>{"ab", "cd"});  // cd (rank 2), then ab (rank 4; bc moved to 5)
}

TEST_CASE("BPE: unknown characters with a ByteLevel pre-tokenizer: unk, fused, byte fallback", "[model][tokenizer][variants]") {
  // Byte-level vocabulary without 'x', 'y', 'z' (and without the bytes of é): each unknown
  // byte's character is unk, consecutive ones one unk with fuse_unk, <0xXX> with byte_fallback.
  json j = tiny_bpe({"<unk>", "a", "\xc4\xa0"}, {});  // "Ġ" = the space
  j["model"]["unk_token"] = "<unk>";
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  CHECK(ids(*tokenizer_from_json(j.dump(), "t", 64), "axyz a") == std::vector<std::uint32_t>{1, 0, 0, 0, 2, 1});
  j["model"]["fuse_unk"] = true;
  CHECK(ids(*tokenizer_from_json(j.dump(), "t", 64), "axyz a") == std::vector<std::uint32_t>{1, 0, 2, 1});
  CHECK(ids(*tokenizer_from_json(j.dump(), "t", 64), "\xc3\xa9xa") == std::vector<std::uint32_t>{0, 1});
  // Byte fallback over the byte-level alphabet: 'x' is its own byte; é's bytes are the characters
  // Ã and © of GPT-2's alphabet, whose UTF-8 (C3 83, C2 A9) are the fallback tokens.
  j["model"]["fuse_unk"] = false;
  j["model"]["byte_fallback"] = true;
  for (const char* hex : {"<0x78>", "<0xC3>", "<0x83>", "<0xC2>", "<0xA9>"}) j["model"]["vocab"][hex] = j["model"]["vocab"].size();
  CHECK(tokens(*tokenizer_from_json(j.dump(), "t", 64), "ax\xc3\xa9y") ==
        std::vector<std::string>{"a", "<0x78>", "<0xC3>", "<0x83>", "<0xC2>", "<0xA9>", "<unk>"});
}

TEST_CASE("Replace with an empty pattern writes its content at every character boundary", "[model][tokenizer][variants]") {
  json j = tiny_bpe({"a", "b", "-", "\xea\xb0\x80"}, {});  // 가
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", "-"}};
  const auto tok = tokenizer_from_json(j.dump(), "t", 64);
  CHECK(tokens(*tok, "ab") == std::vector<std::string>{"-", "a", "-", "b", "-"});
  CHECK(tokens(*tok, "\xea\xb0\x80" "a") == std::vector<std::string>{"-", "\xea\xb0\x80", "-", "a", "-"});
  CHECK(ids(*tok, "").empty());
  // An empty content with an empty pattern changes nothing.
  j["normalizer"]["content"] = "";
  CHECK(tokens(*tokenizer_from_json(j.dump(), "t", 64), "ab") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("WordPiece max_input_chars_per_word 0: every word is [UNK]", "[model][tokenizer][variants]") {
  json j = load("base_wp.json");
  j["model"]["max_input_chars_per_word"] = 0;
  const auto tok = tokenizer_from_json(j.dump(), "wp.json", 64);
  CHECK(tokens(*tok, "the pump, stop") == std::vector<std::string>{"[CLS]", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[SEP]"});
  CHECK(tokens(*tok, "[SEP]") == std::vector<std::string>{"[CLS]", "[SEP]", "[SEP]"});  // added tokens stay whole
  j["model"]["max_input_chars_per_word"] = 2;
  CHECK(tokens(*tokenizer_from_json(j.dump(), "wp.json", 64), "a the") == std::vector<std::string>{"[CLS]", "a", "[UNK]", "[SEP]"});
}

TEST_CASE("Metaspace: a replacement of one character, add_prefix_space must agree with prepend_scheme",
          "[model][tokenizer][variants]") {
  json j = load("base_fb.json");
  auto meta = [&](json p) {
    json k = j;
    k["pre_tokenizer"] = p;
    return error_of([&] { tokenizer_from_json(k.dump(), "tok.json", 64); });
  };
  auto with = [](json x, const json& change) {
    x.update(change);
    return x;
  };
  const json m = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  CHECK(meta(m) == "(no error)");
  CHECK(meta(with(m, {{"replacement", "_"}})) == "(no error)");
  CHECK(meta(with(m, {{"replacement", "\xe2\x96\x81\xe2\x96\x81"}})) ==
        "tok.json: pre_tokenizer.replacement \"\xe2\x96\x81\xe2\x96\x81\" must be one character");
  CHECK(meta(with(m, {{"replacement", "ab"}})) == "tok.json: pre_tokenizer.replacement \"ab\" must be one character");
  CHECK(meta(with(m, {{"replacement", ""}})) == "tok.json: pre_tokenizer.replacement \"\" must be one character");
  CHECK(meta(with(m, {{"add_prefix_space", false}})) ==
        "tok.json: pre_tokenizer.add_prefix_space false does not match prepend_scheme 'always' (give prepend_scheme never)");
  CHECK(meta({{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}}).rfind("tok.json: pre_tokenizer.add_prefix_space", 0) == 0);
  CHECK(meta(with(m, {{"add_prefix_space", false}, {"prepend_scheme", "never"}})) == "(no error)");
}

TEST_CASE("AddedMatcher: leftmost-longest as a scan of every position, on random patterns and texts",
          "[model][tokenizer][variants]") {
  // The reference: at each position from `from`, the longest pattern starting there (the first of
  // equal ones); the first position with any. Small alphabets make overlaps, shared prefixes and
  // patterns inside patterns common.
  std::mt19937 rng(48);
  auto word = [&](int max_len, int letters) {
    std::string w;
    for (int k = 1 + int(rng() % max_len); k > 0; --k) w += char('a' + rng() % letters);
    return w;
  };
  for (int round = 0; round < 300; ++round) {
    const int letters = 2 + int(rng() % 3);
    std::vector<std::string> patterns;
    for (int p = 1 + int(rng() % 12); p > 0; --p) patterns.push_back(word(6, letters));
    if (round % 7 == 0) patterns.push_back("");  // skipped, never matches
    const AddedMatcher m(patterns);
    const std::string text = word(60, letters);
    for (std::size_t from = 0; from <= text.size(); ++from) {
      std::optional<AddedMatcher::Match> want;
      for (std::size_t at = from; at < text.size() && !want; ++at)
        for (std::uint32_t p = 0; p < patterns.size(); ++p)
          if (!patterns[p].empty() && text.compare(at, patterns[p].size(), patterns[p]) == 0 &&
              (!want || patterns[p].size() > want->end - want->start))
            want = AddedMatcher::Match{at, at + patterns[p].size(), p};
      const auto got = m.find(text, from);
      INFO("round " << round << " text " << text << " from " << from);
      REQUIRE(got.has_value() == want.has_value());
      if (want) CHECK((got->start == want->start && got->end == want->end && got->pattern == want->pattern));
    }
  }
  CHECK(AddedMatcher(std::vector<std::string>{}).empty());
  CHECK_FALSE(AddedMatcher(std::vector<std::string>{""}).find("abc", 0));
}
