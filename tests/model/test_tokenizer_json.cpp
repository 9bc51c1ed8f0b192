// tokenizer.json (headsep/tokenizer.hpp) against Hugging Face `tokenizers`: every id of every text
// of the committed fixtures (tests/model/fixtures/make_tokenizer_json_fixtures.py: byte-level BPEs
// as GPT-2, Llama 3 and Qwen2 write them, two byte-fallback BPEs, MiniLM's WordPiece), the words the
// lexicon sees, and the refusals —
// unsupported components by JSON path, malformed JSON by line and column, missing merges.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <random>
#include <string>
#include <thread>

#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/tokenizer.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using namespace headsep;
using json = nlohmann::json;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures";

std::string shown(const std::vector<std::uint32_t>& v, const TextTokenizer& t) {
  std::string s;
  for (auto id : v) s += (s.empty() ? "" : " ") + (id < t.size() ? t.token(id) : "?") + "(" + std::to_string(id) + ")";
  return s;
}

/// Every line of `lines` (JSON: text, ids, tokens): the same ids and token strings. Returns the count.
std::size_t check_lines(const TextTokenizer& tok, const std::string& lines) {
  std::istringstream in(lines);
  std::string line;
  std::size_t n = 0, mismatches = 0;
  std::string report;
  Encoding e;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    const std::string text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<std::uint32_t>>();
    tok.encode(text, e);
    CHECK(e.word.size() == e.ids.size());
    // Token strings are the vocabulary's; HF shows an lstrip/rstrip added token with the spaces it
    // absorbed ("   <mask>"), the same id.
    auto hf_tokens = c["tokens"].get<std::vector<std::string>>();
    for (auto& t : hf_tokens)
      if (tok.find(t) < 0) t.erase(0, t.find_first_not_of(' ')), t.erase(t.find_last_not_of(' ') + 1);
    std::vector<std::string> tokens;
    for (auto id : e.ids) tokens.push_back(tok.token(id));
    if (e.ids != want || tokens != hf_tokens) {
      ++mismatches;
      if (mismatches <= 5) report += "text: " + json(text).dump() + "\n got:  " + shown(e.ids, tok) + "\n want: " + shown(want, tok) + "\n";
    }
    ++n;
  }
  INFO(report);
  CHECK(mismatches == 0);
  return n;
}
std::size_t check_all(const TextTokenizer& tok, const fs::path& expected) { return check_lines(tok, testutil::read_file(expected.string())); }

using testutil::error_of;

}  // namespace

TEST_CASE("tokenizer.json BPE: the ids of tokenizers on every fixture text", "[model][tokenizer][bpe]") {
  for (const char* name : {"tok_gpt2", "tok_gpt2_prefix", "tok_llama", "tok_metaspace", "tok_llama3", "tok_qwen2"}) {
    INFO(name);
    const fs::path dir = kFixtures / name;
    const ModelTokenizer mt = ModelTokenizer::load(dir);  // the factory: tokenizer.json, config.json's sizes
    REQUIRE(mt.tokenizer);
    const bool fallback = std::string(name) == "tok_llama" || std::string(name) == "tok_metaspace";
    CHECK(std::string(mt.tokenizer->kind()) == (fallback ? "bpe-byte-fallback" : "bpe-byte-level"));
    CHECK(check_all(*mt.tokenizer, dir / "expected.jsonl") >= 150);
  }
  CHECK(ModelTokenizer::load(kFixtures / "tok_metaspace").truncation.tokens == 48);
  CHECK(ModelTokenizer::load(kFixtures / "tok_llama").truncation.tokens == 2048);
  CHECK(ModelTokenizer::load(kFixtures / "tok_llama3").truncation.tokens == 8192);
}

TEST_CASE("Llama 3 / Qwen2 Split pieces: the words the lexicon sees, NFC before them", "[model][tokenizer][bpe]") {
  // tokenizers' pieces of this text (Llama 3): Stop|Ġ(|decision|)|Ġat|Ġ|123|456|7|ĠSHE|'LL|čĊĊ|Ġ|Ġreset|.
  // (Qwen2: each digit a piece); words drop surrounding whitespace, then punctuation unless all of it.
  const std::string text = "Stop (decision) at 1234567 SHE'LL\r\n\n  reset.";
  Encoding e;
  const auto llama3 = tokenizer_from_json_file(kFixtures / "tok_llama3/tokenizer.json", 8192);
  llama3->encode(text, e);
  CHECK(e.words == std::vector<std::string>{"Stop", "(", "decision", ")", "at", "123", "456", "7", "SHE", "LL", "reset", "."});
  CHECK(llama3->token(e.ids[0]) == "<|begin_of_text|>");
  CHECK(e.word[0] == Encoding::kNoWord);
  const auto qwen2 = tokenizer_from_json_file(kFixtures / "tok_qwen2/tokenizer.json", 8192);
  qwen2->encode(text, e);
  CHECK(e.words == std::vector<std::string>{"Stop", "(", "decision", ")", "at", "1", "2", "3", "4", "5", "6", "7", "SHE", "LL", "reset", "."});
  // NFC: the decomposed and the composed text are the same ids, and the word is composed.
  Encoding composed;
  qwen2->encode("caf\u00e9", composed);
  qwen2->encode("cafe\u0301", e);
  CHECK(e.ids == composed.ids);
  CHECK(e.words == std::vector<std::string>{"caf\u00e9"});
  llama3->encode("cafe\u0301", e);  // no normalizer: the mark (not a letter) is a piece of its own
  CHECK(e.words == std::vector<std::string>{"cafe", "\u0301"});
}

TEST_CASE("NFD, NFKC, NFKD and Lowercase normalizers: tokenizers' ids on Qwen2's model", "[model][tokenizer][bpe]") {
  // expected_forms.jsonl: per form, the fixture texts whose ids differ from NFC's, and compatibility
  // characters (ligatures, circled and half-width forms, ㍿, Ⅻ, superscripts); for Lowercase also
  // İ (two code points), ΣΟΦΟΣ (σ, no final ς), ǅ, full-width and letters utf8proc maps otherwise.
  const json base = json::parse(testutil::read_file((kFixtures / "tok_qwen2/tokenizer.json").string()));
  std::istringstream in(testutil::read_file((kFixtures / "tok_qwen2/expected_forms.jsonl").string()));
  std::map<std::string, std::string> lines;
  for (std::string line; std::getline(in, line);) lines[json::parse(line)["normalizer"].get<std::string>()] += line + "\n";
  REQUIRE(lines.size() == 4);
  for (const auto& [form, want] : lines) {
    INFO(form);
    json j = base;
    j["normalizer"] = {{"type", form}};
    CHECK(check_lines(*tokenizer_from_json(j.dump(), form + ".json", 4096), want) >= 10);
  }
}

TEST_CASE("byte-fallback BPE: a merge across the word marker turns off the cut at markers, same ids",
          "[model][tokenizer][bpe]") {
  // "Q▁" (Q before a space never occurs in the fixture texts) as the last merge: words can no longer
  // be cut apart at '▁' before BPE, so whole texts go through the merge loop; every id stays.
  json j = json::parse(testutil::read_file((kFixtures / "tok_llama/tokenizer.json").string()));
  j["model"]["vocab"]["Q▁"] = 1000;
  j["model"]["merges"].push_back({"Q", "▁"});
  const auto tok = tokenizer_from_json(j.dump(), "crossing.json", 2048);
  CHECK(check_all(*tok, kFixtures / "tok_llama/expected.jsonl") >= 150);
  Encoding e;
  tok->encode("Stop decision", e);
  CHECK(e.words == std::vector<std::string>{"Stop", "decision"});
  tok->encode("Q Q", e);
  REQUIRE(e.ids.size() == 4);  // <s> ▁ Q▁ Q: the merge fired across the words, each token in its word
  CHECK(tok->token(e.ids[2]) == "Q▁");
  CHECK(e.words == std::vector<std::string>{"Q", "Q"});
  CHECK(e.word == std::vector<std::uint32_t>{Encoding::kNoWord, 0, 0, 1});
}

TEST_CASE("BPE: random texts give the same ids on every thread, cached or not", "[model][tokenizer][bpe]") {
  // Random code points (ASCII, Latin, Hangul, emoji, marks, spaces) through each BPE fixture: four
  // threads at once, each text twice (the second from the per-thread word cache), and a second
  // tokenizer (another cache): every result the same as the first thread's first pass.
  std::mt19937 rng(26);
  const std::uint32_t ranges[][2] = {{0x20, 0x7e}, {0xc0, 0x17f}, {0xac00, 0xac40}, {0x1f600, 0x1f610}, {0x300, 0x30f}, {0x2000, 0x200b}};
  std::vector<std::string> texts(200);
  for (auto& t : texts)
    for (int k = int(rng() % 60); k > 0; --k) {
      const auto& r = ranges[rng() % 6];
      std::uint32_t c = r[0] + rng() % (r[1] - r[0] + 1);
      if (rng() % 4 == 0) c = ' ';
      if (c < 0x80) t += char(c);
      else if (c < 0x800) t += char(0xC0 | (c >> 6)), t += char(0x80 | (c & 0x3F));
      else if (c < 0x10000) t += char(0xE0 | (c >> 12)), t += char(0x80 | ((c >> 6) & 0x3F)), t += char(0x80 | (c & 0x3F));
      else t += char(0xF0 | (c >> 18)), t += char(0x80 | ((c >> 12) & 0x3F)), t += char(0x80 | ((c >> 6) & 0x3F)), t += char(0x80 | (c & 0x3F));
    }
  for (const char* name : {"tok_gpt2", "tok_llama", "tok_metaspace", "tok_llama3", "tok_qwen2"}) {
    INFO(name);
    const auto file = kFixtures / name / "tokenizer.json";
    const auto a = tokenizer_from_json_file(file, 4096), b = tokenizer_from_json_file(file, 4096);
    std::vector<std::vector<std::uint32_t>> want(texts.size());
    Encoding e;
    for (std::size_t i = 0; i < texts.size(); ++i) a->encode(texts[i], e), want[i] = e.ids;
    std::vector<int> bad(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        Encoding x;
        for (int pass = 0; pass < 2; ++pass)
          for (std::size_t i = 0; i < texts.size(); ++i) {
            (t % 2 ? *a : *b).encode(texts[i], x);
            bad[t] += x.ids != want[i];
          }
      });
    for (auto& th : threads) th.join();
    CHECK(bad == std::vector<int>(4, 0));
  }
}

TEST_CASE("tokenizer.json WordPiece: MiniLM's ids, the same as its vocab.txt", "[model][tokenizer]") {
  const fs::path dir = testutil::model_dir();
  const auto tok = tokenizer_from_json_file(dir / "tokenizer.json", 128);
  CHECK(std::string(tok->kind()) == "wordpiece");
  CHECK(check_all(*tok, kFixtures / "tok_bert_expected.jsonl") >= 150);
  const ModelTokenizer mt = ModelTokenizer::load(dir);  // vocab.txt + tokenizer.json, checked against each other
  std::istringstream in(testutil::read_file((kFixtures / "tok_bert_expected.jsonl").string()));
  std::string line;
  Encoding a, b;
  while (std::getline(in, line)) {
    const std::string text = json::parse(line)["text"].get<std::string>();
    tok->encode(text, a);
    mt.tokenizer->encode(text, b);
    CHECK(a.ids == b.ids);
    CHECK(a.words == b.words);
  }
}

TEST_CASE("BPE words for the lexicon: pieces without their marker, case kept", "[model][tokenizer][bpe]") {
  Encoding e;
  const auto gpt2 = tokenizer_from_json_file(kFixtures / "tok_gpt2/tokenizer.json", 1024);
  gpt2->encode("Stop decision:  pressure anomaly", e);
  CHECK(e.words == std::vector<std::string>{"Stop", "decision", ":", "pressure", "anomaly"});
  REQUIRE(e.word.size() == e.ids.size());
  for (std::size_t i = 0; i < e.ids.size(); ++i)  // each token's word holds the token's text (after Ġ)
    if (e.word[i] != Encoding::kNoWord) CHECK(e.words[e.word[i]].size() > 0);
  const auto llama = tokenizer_from_json_file(kFixtures / "tok_llama/tokenizer.json", 2048);
  llama->encode("Stop decision <s> 정지결정", e);
  CHECK(e.words == std::vector<std::string>{"Stop", "decision", "정지결정"});
  CHECK(e.ids[0] == 1);             // <s> of the template
  CHECK(e.word[0] == Encoding::kNoWord);
  CHECK(llama->token(e.ids[1]).rfind("▁", 0) == 0);
  CHECK(e.word[1] == 0);
  // No pre-tokenizer split at punctuation: the word is trimmed of it, unless it is only punctuation.
  llama->encode("alarm reset. (P-7) :", e);
  CHECK(e.words == std::vector<std::string>{"alarm", "reset", "P-7", ":"});
  // A lexicon entry is one word: the same text alone gives one word.
  llama->encode("stop", e);
  CHECK(e.words == std::vector<std::string>{"stop"});
  llama->encode("", e);
  CHECK(e.ids == std::vector<std::uint32_t>{1});
  CHECK(e.words.empty());
  // Truncation keeps the template's tokens: tok_metaspace cuts at 48 with <s> ... </s>.
  const ModelTokenizer meta = ModelTokenizer::load(kFixtures / "tok_metaspace");
  std::string longer;
  for (int i = 0; i < 60; ++i) longer += "stop ";
  meta.tokenizer->encode(longer, e);
  CHECK(e.ids.size() == 48);
  CHECK(e.truncated);
  CHECK(e.ids.back() == 2);
  CHECK_THROWS_WITH(llama->encode("a\xff", e), Contains("invalid UTF-8 at byte 2"));
}

TEST_CASE("tokenizer.json: unsupported components refused by JSON path, malformed JSON by line and column",
          "[model][tokenizer][bpe]") {
  const json llama = json::parse(testutil::read_file((kFixtures / "tok_llama/tokenizer.json").string()));
  const json gpt2 = json::parse(testutil::read_file((kFixtures / "tok_gpt2/tokenizer.json").string()));
  auto with = [](json j, const std::function<void(json&)>& edit) {
    edit(j);
    return error_of([&] { tokenizer_from_json(j.dump(), "tok.json", 512); });
  };
  CHECK(with(llama, [](json& j) { j["normalizer"]["normalizers"][1] = {{"type", "StripAccents"}}; }) ==
        "tok.json: normalizer.normalizers[1].type 'StripAccents' is not supported");
  CHECK(with(llama, [](json& j) { j["normalizer"] = {{"type", "Strip"}}; }) == "tok.json: normalizer.type 'Strip' is not supported");
  CHECK_THAT(with(llama, [](json& j) { j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}}; }),
             Contains("tok.json: normalizer.normalizers[1].pattern.Regex \" +\" is not supported (\" {2,}\" is)"));
  // Split: only Llama 3's and Qwen2's exact patterns, Isolated, not inverted, before ByteLevel(use_regex false).
  const json llama3 = json::parse(testutil::read_file((kFixtures / "tok_llama3/tokenizer.json").string()));
  const std::string split = "tok.json: pre_tokenizer.pretokenizers[0].";
  CHECK(with(llama3, [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+"; }) ==
        split + "pattern.Regex \"\\\\p{L}+|\\\\s+\" is not supported (Llama 3's and Qwen2's patterns are)");
  CHECK(with(llama3, [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }) == split + "invert true is not supported");
  CHECK(with(llama3, [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }) ==
        split + "behavior \"Removed\" is not supported (Isolated is)");
  CHECK_THAT(with(llama3, [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; }),
             Contains(split + "pattern must be {\"Regex\""));
  CHECK(with(llama3, [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }) ==
        "tok.json: pre_tokenizer.pretokenizers[1] after a Split must be ByteLevel with use_regex false and add_prefix_space false");
  CHECK_THAT(with(llama3, [](json& j) { j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]; }),
             Contains("tok.json: pre_tokenizer Split alone is not supported"));
  CHECK(with(gpt2, [](json& j) { j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}}}}; }) ==
        "tok.json: pre_tokenizer.pretokenizers[0].type 'Digits' is not supported");
  CHECK(with(gpt2, [](json& j) { j["model"]["type"] = "Unigram"; }) == "tok.json: model.vocab must be a non-empty array of [piece, score]");
  CHECK(with(gpt2, [](json& j) { j["post_processor"] = {{"type", "Fancy"}}; }) == "tok.json: post_processor.type 'Fancy' is not supported");
  CHECK_THAT(with(llama, [](json& j) { j["post_processor"]["special_tokens"].erase("<s>"); }),
             Contains("tok.json: post_processor.special_tokens has no entry '<s>'"));
  CHECK(with(gpt2, [](json& j) { j["model"].erase("merges"); }) == "tok.json: model.merges is missing (a BPE model needs its merges)");
  CHECK(with(gpt2, [](json& j) { j["model"]["merges"][3] = {"r", "qqq"}; }) == "tok.json: model.merges[3]: 'qqq' is not in the vocabulary");
  CHECK_THAT(with(gpt2, [](json& j) { j["model"]["merges"][2] = "re"; }), Contains("tok.json: model.merges[2] 're' is not two tokens"));
  CHECK_THAT(with(gpt2, [](json& j) { j["model"]["dropout"] = 0.1; }), Contains("tok.json: model.dropout 0.1 is not supported"));
  CHECK_THAT(with(llama, [](json& j) { j["model"]["unk_token"] = "<nope>"; }), Contains("tok.json: model.unk_token '<nope>' is not in model.vocab"));
  CHECK_THAT(with(llama, [](json& j) { j["model"]["vocab"].erase("<0x41>"); }), Contains("tok.json: model.vocab has no token with id 68"));
  CHECK_THAT(with(llama, [](json& j) { j["added_tokens"][1]["id"] = 7; }), Contains("tok.json: added_tokens[1] '<s>' has id 7"));
  CHECK_THAT(with(llama, [](json& j) { j["truncation"] = {{"max_length", 9}, {"direction", "Left"}}; }),
             Contains("tok.json: truncation.direction \"Left\" is not supported"));
  CHECK_THAT(with(llama, [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}}; }),
             Contains("tok.json: pre_tokenizer.prepend_scheme 'sometimes' is not supported"));
  // MiniLM's WordPiece with a foreign component: the same path style.
  CHECK(error_of([] { tokenizer_from_json("{\n  \"model\": {\"type\": \"WordPiece\", \"vocab\": {}},\n  \"normalizer\": {\"type\": \"Lowercase\"}\n}", "w.json", 8); }) ==
        "w.json: normalizer.type 'Lowercase' is not supported");
  // Malformed JSON: file:line:column.
  CHECK_THAT(error_of([] { tokenizer_from_json("{\n  \"model\": {\"type\": \"BPE\",\n  oops\n}", "bad.json", 8); }),
             Contains("bad.json:3:3: not valid JSON"));
  // A number past double's range is nlohmann's out_of_range, not a parse error (a fuzz finding:
  // it escaped as an uncaught exception); its text is cut short.
  const std::string huge = "{\"model\": {\"dropout\": 1e" + std::string(5000, '9') + "}}";
  CHECK(error_of([&] { tokenizer_from_json(huge, "big.json", 8); }).rfind("big.json: not valid JSON (number overflow parsing '1e999", 0) == 0);
  CHECK(error_of([&] { tokenizer_from_json(huge, "big.json", 8); }).size() < 300);
  CHECK_THAT(error_of([] { tokenizer_from_json_file("/nonexistent/tokenizer.json", 8); }), Contains("/nonexistent/tokenizer.json: cannot open"));
}

TEST_CASE("headsep tokenize --model reads tokenizer.json folders", "[model][tokenizer][bpe][cli]") {
  const auto r = testutil::run_cli("tokenize --model " + testutil::shell_quote((kFixtures / "tok_llama").string()) +
                                   " --text 'stop <s>' --text ''");
  INFO(r.err);
  REQUIRE(r.status == 0);
  Encoding e;
  const ModelTokenizer mt = ModelTokenizer::load(kFixtures / "tok_llama");
  mt.tokenizer->encode("stop <s>", e);
  const std::string first = r.out.substr(0, r.out.find('\n'));
  CHECK(json::parse(first)["ids"].get<std::vector<std::uint32_t>>() == e.ids);
  CHECK(json::parse(r.out.substr(r.out.find('\n') + 1))["tokens"] == json::array({"<s>"}));
}
