// Unigram tokenizer.json (XLM-RoBERTa's form) against Hugging Face `tokenizers`: every id of the
// committed fixture's texts (tests/model/fixtures/make_unigram_fixtures.py: a SentencePiece
// unigram model with nmt_nfkc's precompiled_charsmap, Korean / Japanese / Arabic / English), the
// Precompiled normalizer on hand cases (a hand-built double array and the fixture's charsmap,
// expected strings from tokenizers' normalizer), refusals by JSON path, and a tiny random-init
// XLMRobertaModel reading it (decoder/xlm-roberta: hidden states and maps against transformers,
// `run --model` on Korean text).
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/tokenizer.hpp"
#include "model/decoder_fixture.hpp"
#include "model/precompiled.hpp"
#include "test_util.hpp"

using namespace headsep;
using json = nlohmann::json;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures/tok_xlmr";

using testutil::error_of;

json fixture_json() { return json::parse(testutil::read_file((kDir / "tokenizer.json").string())); }

std::string base64(const std::string& bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += a[v >> 18], out += a[v >> 12 & 63];
    out += i + 1 < bytes.size() ? a[v >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? a[v & 63] : '=';
  }
  return out;
}

/// A double array holding one key, "a" -> "b": the root's base 0, 'a' at 0 ^ 0x61 = 97 with a
/// leaf below (offset 3 -> unit 98, value 0), replacements "b\0".
std::string one_key_charsmap(std::uint32_t trie_size_field = 0) {
  std::vector<std::uint32_t> units(128, 0);
  units[97] = 3u << 10 | 1u << 8 | 0x61;
  units[98] = 0;
  std::string blob;
  const std::uint32_t size = trie_size_field ? trie_size_field : static_cast<std::uint32_t>(units.size() * 4);
  for (int k = 0; k < 4; ++k) blob += static_cast<char>(size >> (8 * k) & 0xFF);
  for (const std::uint32_t u : units)
    for (int k = 0; k < 4; ++k) blob += static_cast<char>(u >> (8 * k) & 0xFF);
  return blob + std::string("b\0", 2);
}

}  // namespace

TEST_CASE("Unigram tokenizer.json: the ids of tokenizers on every fixture text", "[model][tokenizer][unigram]") {
  const ModelTokenizer mt = ModelTokenizer::load(kDir);
  REQUIRE(mt.tokenizer);
  CHECK(std::string(mt.tokenizer->kind()) == "unigram");
  std::istringstream in(testutil::read_file((kDir / "expected.jsonl").string()));
  std::string line, report;
  std::size_t n = 0, bad = 0;
  Encoding e;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    const std::string text = c["text"].get<std::string>();
    mt.tokenizer->encode(text, e);
    CHECK(e.word.size() == e.ids.size());
    // tokenizers shows an unk token as the text it stands for ("낯선글"), <mask> with the spaces its
    // lstrip took (" <mask>"); the others as the piece.
    std::vector<std::string> tokens, want = c["tokens"].get<std::vector<std::string>>();
    for (auto& t : want)
      if (mt.tokenizer->find(t) < 0 && t.find_first_not_of(' ') != std::string::npos) t.erase(0, t.find_first_not_of(' '));
    for (std::size_t k = 0; k < e.ids.size(); ++k)
      tokens.push_back(e.ids[k] == 3 && k < want.size() ? want[k] : mt.tokenizer->token(e.ids[k]));
    if (e.ids != c["ids"].get<std::vector<std::uint32_t>>() || tokens != want) {
      if (++bad <= 5) report += "text: " + json(text).dump() + "\n got:  " + json(tokens).dump() + "\n want: " + c["tokens"].dump() + "\n";
    }
    ++n;
  }
  INFO(report);
  CHECK(bad == 0);
  CHECK(n >= 60);
  // Words for the lexicon: Metaspace's pieces, marker stripped.
  mt.tokenizer->encode("한국어 문장을 읽었다", e);
  REQUIRE(e.words.size() == 3);
  CHECK(e.words[0] == "한국어");
  CHECK(e.words[2] == "읽었다");
}

TEST_CASE("Unigram: ties keep the earlier candidate, unk fusing, byte fallback, no unk_id", "[model][tokenizer][unigram]") {
  // Ids from tokenizers 0.23.3 on this model (scores chosen for ties: ▁ab + ab = ▁ab + a + b).
  json t = {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"byte_fallback", true},
                       {"vocab", json::parse(R"([["<unk>",0],["▁",-1],["a",-1],["b",-1],["ab",-2],["▁ab",-2.5],
                                                ["<0xE2>",-5],["<0x98>",-5],["<0x83>",-5],["c",-3],["cc",-7]])")}}},
            {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}}};
  auto ids = [&](const std::string& text) {
    Encoding e;
    tokenizer_from_json(t.dump(), "t.json", 64)->encode(text, e);
    return e.ids;
  };
  using V = std::vector<std::uint32_t>;
  CHECK(ids("ab") == V{5});
  CHECK(ids("ab ab") == V{5, 5});
  CHECK(ids("abab") == V{5, 4});
  CHECK(ids("cc") == V{1, 9, 9});
  CHECK(ids("\u2603\u2603 a") == V{1, 6, 7, 8, 6, 7, 8, 1, 2});  // two unknown snowmen fused, then their bytes
  CHECK(ids("c\u2603c") == V{1, 9, 6, 7, 8, 9});
  CHECK(ids("\u1e9e") == V{1, 0});  // a byte missing: unk
  CHECK(ids("\u2603\u1e9e") == V{1, 0});
  t["model"]["byte_fallback"] = false;
  CHECK(ids("\u2603\u2603 a") == V{1, 0, 1, 2});
  CHECK(ids("c\u2603c") == V{1, 9, 0, 9});
  t["model"]["unk_id"] = nullptr;
  CHECK(ids("ab") == V{5});
  CHECK_THAT(error_of([&] { ids("\u1e9e"); }), Contains("not in the Unigram vocabulary, and the model has no unk_id"));
}

TEST_CASE("Precompiled charsmap: the double array and tokenizers' grapheme rule", "[model][tokenizer][unigram]") {
  const bpe::Precompiled one(base64(one_key_charsmap()), "t");
  std::size_t len = 0;
  const char* r = one.lookup("ab", len);
  REQUIRE(r);
  CHECK(std::string(r, len) == "b");
  CHECK(one.lookup("ba", len) == nullptr);
  CHECK(one.apply("banana") == "bbnbnb");
  CHECK(one.apply("") == "");
  // The fixture's nmt_nfkc map, expected strings from tokenizers' normalizers.Precompiled.
  const json t = fixture_json();
  const bpe::Precompiled nfkc(t["normalizer"]["normalizers"][0]["precompiled_charsmap"].get<std::string>(), "t");
  CHECK(nfkc.apply("\uff21") == "A");
  CHECK(nfkc.apply("\ufb01ne") == "fine");
  CHECK(nfkc.apply("\u2460\u2461") == "12");
  CHECK(nfkc.apply("abc 한국어") == "abc 한국어");
  CHECK(nfkc.apply("e\u0301") == "\u00e9");
  CHECK(nfkc.apply("\uff21\u0301") == "A");  // a cluster under 6 bytes: replaced whole by its first match
  CHECK(nfkc.apply("\uff76\uff9e") == "\u30ab\u3099");  // 6 bytes: character by character
  CHECK(nfkc.apply("\u00a0x\u200b") == " x ");
  CHECK(nfkc.apply("\u337b") == "\u5e73\u6210");
  CHECK(nfkc.apply("\U0001F468\u200d\U0001F469\u200d\U0001F467") == "\U0001F468\u200d\U0001F469\u200d\U0001F467");
}

TEST_CASE("Unigram tokenizer.json: bad files refused by JSON path", "[model][tokenizer][unigram]") {
  auto refused = [](const std::function<void(json&)>& edit) {
    json t = fixture_json();
    edit(t);
    return error_of([&] { tokenizer_from_json(t.dump(), "x.json", 64); });
  };
  CHECK_THAT(refused([](json& t) { t["model"]["vocab"][5] = json::array({1, 2}); }), Contains("x.json: model.vocab[5] must be [piece, score]"));
  CHECK_THAT(refused([](json& t) { t["model"]["vocab"][5] = json::array({"x"}); }), Contains("x.json: model.vocab[5] must be [piece, score]"));
  CHECK_THAT(refused([](json& t) { t["model"]["vocab"][6][0] = t["model"]["vocab"][5][0]; }), Contains("x.json: model.vocab[6]: piece"));
  CHECK_THAT(refused([](json& t) { t["model"]["vocab"] = json::array(); }), Contains("x.json: model.vocab must be a non-empty array"));
  CHECK_THAT(refused([](json& t) { t["model"]["unk_id"] = 100000; }), Contains("x.json: model.unk_id 100000 is past the vocabulary"));
  CHECK_THAT(refused([](json& t) { t["model"]["unk_id"] = -1; }), Contains("x.json: model.unk_id must be a token id"));
  const std::string cm = "normalizer.normalizers[0].precompiled_charsmap";
  CHECK_THAT(refused([](json& t) { t["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "not base64!"; }),
             Contains("x.json: " + cm + " is not base64"));
  CHECK_THAT(refused([](json& t) {
    std::string& s = t["normalizer"]["normalizers"][0]["precompiled_charsmap"].get_ref<std::string&>();
    s.resize(400);  // the trie cut short
  }), Contains("x.json: " + cm + ": a trie of"));
  CHECK_THAT(error_of([] { bpe::Precompiled(base64(one_key_charsmap(4096)), "m"); }), Contains("m: a trie of 4096 bytes does not fit"));
  std::string bad_value = one_key_charsmap();
  bad_value[4 + 98 * 4] = 9;  // the leaf's value points past the replacements
  CHECK_THAT(error_of([&] { bpe::Precompiled(base64(bad_value), "m"); }), Contains("m: the trie points at replacement byte 9"));
  CHECK_THAT(refused([](json& t) { t["normalizer"]["normalizers"][1]["pattern"]["Regex"] = "\\s+"; }),
             Contains("x.json: normalizer.normalizers[1].pattern.Regex"));
  CHECK_THAT(refused([](json& t) { t["pre_tokenizer"]["type"] = "Whitespace"; }), Contains("x.json: pre_tokenizer.type 'Whitespace' is not supported"));
}

TEST_CASE("XLM-R with its Unigram tokenizer: the forward against transformers, run --model on Korean text",
          "[model][tokenizer][unigram][cli]") {
  decoder_test::check_fixture("xlm-roberta");
  CHECK(decoder_test::load_model(decoder_test::fixture("xlm-roberta"))->shape().model_type == "xlm-roberta");
  const std::string dir = testutil::shell_quote(decoder_test::fixture("xlm-roberta").string());
  const auto r = testutil::run_cli("tokenize --model " + dir + " --text '한국어 문장을 읽었다'");
  INFO(r.err);
  REQUIRE(r.status == 0);
  Encoding e;
  ModelTokenizer::load(kDir).tokenizer->encode("한국어 문장을 읽었다", e);  // tok_xlmr's, the same file
  CHECK(json::parse(r.out.substr(0, r.out.find('\n')))["ids"].get<std::vector<std::uint32_t>>() == e.ids);
  testutil::TempDir tmp;
  const std::string csv = tmp.file("r.csv"), summary = tmp.file("s.json");
  const std::string korean = "우리는 오늘 아침 커피를 마시고 도서관에서 책을 읽었다.";
  testutil::write_file(csv, "report_id,scenario,text\na,ko," + korean + "\n");
  const auto run = testutil::run_cli("run -q -s text -p path=" + testutil::shell_quote(csv) + " --model " + dir + " --summary " +
                                     testutil::shell_quote(summary));
  INFO(run.err);
  REQUIRE(run.status == 0);
  const json s = json::parse(testutil::read_file(summary));
  ModelTokenizer::load(kDir).tokenizer->encode(korean, e);
  REQUIRE(s["scenarios"].size() == 1);
  CHECK(s["scenarios"][0]["tokens"] == e.ids.size());
  CHECK(s.dump().find("xlm-roberta") != std::string::npos);
}
