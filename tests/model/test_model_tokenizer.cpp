// ModelTokenizer (headsep/model_tokenizer.hpp) on copies of all-MiniLM-L6-v2's folder with one
// file edited: the truncation length each file gives, a vocab.txt that does not match its model
// (extra, missing, moved, repeated, non-UTF-8 lines) refused by name, tokenizers headsep would
// read differently refused; and `run --model` truncating at the folder's length.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using headsep::ModelTokenizer;
using json = nlohmann::json;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

/// A copy of the MiniLM folder (the weights linked, not copied) in a temporary folder.
struct ModelCopy {
  testutil::TempDir tmp;
  fs::path dir = tmp.path / "m";
  ModelCopy() {
    const fs::path src = testutil::model_dir();
    fs::create_directory(dir);
    for (const char* f : {"config.json", "vocab.txt", "tokenizer.json"}) fs::copy_file(src / f, dir / f);
    fs::create_symlink(src / "model.safetensors", dir / "model.safetensors");
  }
  std::string path(const char* f) const { return (dir / f).string(); }
  json tokenizer() const { return json::parse(testutil::read_file(path("tokenizer.json"))); }
  void write(const char* f, const std::string& bytes) const { testutil::write_file(path(f), bytes); }
  void write(const char* f, const json& j) const { write(f, j.dump()); }
  std::string vocab() const { return testutil::read_file(path("vocab.txt")); }
};

std::string load_error(const ModelCopy& m, std::int64_t max_tokens = 0) {
  try {
    ModelTokenizer::load(m.dir, max_tokens);
  } catch (const headsep::Error& e) {
    return e.what();
  }
  return "(loaded)";
}

/// Line n (1-based) of vocab.txt's text.
std::string line_of(const std::string& vocab, std::size_t n) {
  std::size_t start = 0;
  for (std::size_t i = 1; i < n; ++i) start = vocab.find('\n', start) + 1;
  return vocab.substr(start, vocab.find('\n', start) - start);
}

/// vocab.txt's text with line `n` (1-based) replaced by `with` lines (none: removed).
std::string edit_line(const std::string& vocab, std::size_t n, const std::vector<std::string>& with) {
  std::size_t start = 0;
  for (std::size_t i = 1; i < n; ++i) start = vocab.find('\n', start) + 1;
  const std::size_t end = vocab.find('\n', start) + 1;
  std::string mid;
  for (const auto& w : with) mid += w + "\n";
  return vocab.substr(0, start) + mid + vocab.substr(end);
}

}  // namespace

TEST_CASE("ModelTokenizer: the truncation length as the folder's files say", "[model][tokenizer]") {
  ModelCopy m;
  auto t = ModelTokenizer::load(m.dir);
  CHECK(t.truncation.tokens == 128);
  CHECK(t.truncation.source == "tokenizer.json truncation.max_length");
  CHECK(t.wordpiece.options().max_length == 128);
  CHECK(t.max_positions == 512);
  CHECK(t.vocab_size == 30522);
  CHECK(t.wordpiece.special_tokens() == std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"});
  // -p max_tokens overrides, within the model's positions.
  CHECK(ModelTokenizer::truncation_of(m.dir, 300).tokens == 300);
  CHECK(ModelTokenizer::truncation_of(m.dir, 300).source == "max_tokens");
  CHECK_THROWS_AS(ModelTokenizer::truncation_of(m.dir, 513), headsep::UsageError);
  CHECK_THAT(load_error(m, 513), Contains("parameter 'max_tokens' must be 0") && Contains("2..512") &&
                                     Contains("max_position_embeddings (512"));
  CHECK_THAT(load_error(m, 1), Contains("parameter 'max_tokens'"));

  json tj = m.tokenizer();
  tj["truncation"] = nullptr;  // no truncation in tokenizer.json: tokenizer_config.json, else config.json
  m.write("tokenizer.json", tj);
  CHECK(ModelTokenizer::truncation_of(m.dir).tokens == 512);
  CHECK(ModelTokenizer::truncation_of(m.dir).source == "config.json max_position_embeddings");
  m.write("tokenizer_config.json", std::string(R"({"do_lower_case": true, "model_max_length": 64})"));
  CHECK(ModelTokenizer::load(m.dir).wordpiece.options().max_length == 64);
  CHECK(ModelTokenizer::truncation_of(m.dir).source == "tokenizer_config.json model_max_length");
  m.write("tokenizer_config.json", std::string(R"({"model_max_length": 1000000000000000019884624838656})"));  // HF's "no limit"
  CHECK(ModelTokenizer::truncation_of(m.dir).tokens == 512);
  m.write("tokenizer_config.json", std::string(R"({"model_max_length": 1024})"));
  CHECK_THAT(load_error(m), Contains("tokenizer_config.json: a truncation length of 1024 tokens is outside 2..512"));
  tj["truncation"] = {{"max_length", 16}, {"strategy", "LongestFirst"}, {"stride", 0}};
  m.write("tokenizer.json", tj);  // tokenizer.json first
  CHECK(ModelTokenizer::truncation_of(m.dir).tokens == 16);
  tj["truncation"]["max_length"] = "many";
  m.write("tokenizer.json", tj);
  CHECK_THAT(load_error(m), Contains("tokenizer.json truncation: 'max_length' must be a positive integer"));
}

TEST_CASE("ModelTokenizer: a vocab.txt that does not match its model is refused at load", "[model][tokenizer]") {
  ModelCopy m;
  const std::string vocab = m.vocab();
  const std::string tokenizer = testutil::read_file(m.path("tokenizer.json"));
  const std::string vocab_name = m.path("vocab.txt");

  // One extra line in the middle: every later id shifts. With tokenizer.json, its vocabulary
  // disagrees; without, the count exceeds the embedding table's rows.
  m.write("vocab.txt", edit_line(vocab, 2000, {"qqextraqq", "qqpressureqq"}).substr(0));
  CHECK_THAT(load_error(m), Contains(vocab_name + ": 30523 entries, but") && Contains("tokenizer.json's vocabulary has 30522"));
  fs::remove(m.path("tokenizer.json"));
  CHECK_THAT(load_error(m), Contains(vocab_name + ": 30523 entries, but the model's embedding table has 30522 rows") &&
                                Contains("config.json vocab_size") && Contains("an extra line shifts every later id"));
  // A missing line: fewer entries than rows, nothing to confirm them.
  m.write("vocab.txt", edit_line(vocab, 2000, {}));
  CHECK_THAT(load_error(m), Contains(vocab_name + ": 30521 entries, but the model's embedding table has 30522 rows") &&
                                Contains("a missing line shifts every later id"));
  // A line that is not UTF-8, a repeated token.
  m.write("vocab.txt", edit_line(vocab, 2001, {"caf\xe9"}));
  CHECK_THAT(load_error(m), Contains(vocab_name + ":2001: not valid UTF-8 (byte 4 of the line)"));
  m.write("vocab.txt", edit_line(vocab, 2001, {"the"}));
  CHECK_THAT(load_error(m), Contains(vocab_name + ":2001: the token 'the' repeats line 1997"));

  // Two lines swapped: the count is right, tokenizer.json's vocabulary is not.
  m.write("tokenizer.json", tokenizer);
  m.write("vocab.txt", edit_line(edit_line(vocab, 3000, {"the"}), 1997, {line_of(vocab, 3000)}));  // lines 1997 <-> 3000
  CHECK_THAT(load_error(m), Contains(vocab_name + ":1997: this entry has id 1996 here but id"));

  // A table padded past its vocabulary: allowed when tokenizer.json lists the same vocabulary.
  json tj = json::parse(tokenizer);
  const std::string last = "##\xef\xbd\x9e";  // vocab.txt's last line
  REQUIRE(tj["model"]["vocab"][last] == 30521);
  tj["model"]["vocab"].erase(last);
  m.write("tokenizer.json", tj);
  m.write("vocab.txt", vocab.substr(0, vocab.size() - last.size() - 1));
  CHECK(ModelTokenizer::load(m.dir).wordpiece.size() == 30521);
}

TEST_CASE("ModelTokenizer: tokenizers headsep would read differently are refused by name", "[model][tokenizer]") {
  ModelCopy m;
  const json base = m.tokenizer();
  auto with = [&](const std::function<void(json&)>& edit) {
    json j = base;
    edit(j);
    m.write("tokenizer.json", j);
    return load_error(m);
  };
  CHECK_THAT(with([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }), Contains("tokenizer.json: normalizer") && Contains("is not supported"));
  CHECK_THAT(with([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }), Contains("pre_tokenizer"));
  CHECK_THAT(with([](json& j) { j["model"]["type"] = "WordLevel"; }), Contains("tokenizer.json: model.type 'WordLevel' is not supported"));
  CHECK_THAT(with([](json& j) { j["post_processor"] = nullptr; }), Contains("is not [CLS] A [SEP]"));
  CHECK_THAT(with([](json& j) { j["added_tokens"][0]["id"] = 5; }), Contains("added token '[PAD]' has id 5, but vocab.txt gives it id 0"));
  CHECK_THAT(with([](json& j) { j["added_tokens"][1]["lstrip"] = true; }), Contains("added token '[UNK]'") && Contains("not supported"));
  CHECK_THAT(with([](json& j) { j["model"]["vocab"]["the"] = 7; }), Contains("vocab.txt:1997: this entry has id 1996 here but id 7"));
  CHECK_THAT(with([](json& j) { j["normalizer"]["handle_chinese_chars"] = false; }), Contains("handle_chinese_chars"));
  // Supported variants: strip_accents false keeps accents; lowercase false keeps case.
  with([](json& j) { j["normalizer"]["strip_accents"] = false; });
  headsep::Encoding e;
  ModelTokenizer::load(m.dir).wordpiece.encode("Café", e);
  CHECK(e.words == std::vector<std::string>{"café"});
  with([](json& j) { j["normalizer"]["lowercase"] = false; });  // strip_accents unset: as lowercase
  ModelTokenizer::load(m.dir).wordpiece.encode("Café", e);
  CHECK(e.words == std::vector<std::string>{"Café"});
  with([](json& j) { j["normalizer"]["lowercase"] = false, j["normalizer"]["strip_accents"] = true; });
  ModelTokenizer::load(m.dir).wordpiece.encode("Café", e);
  CHECK(e.words == std::vector<std::string>{"Cafe"});
  m.write("tokenizer.json", std::string("{not json"));
  CHECK_THAT(load_error(m), Contains("tokenizer.json:1:3: not valid JSON"));
  fs::remove(m.path("config.json"));
  CHECK_THAT(load_error(m), Contains("config.json: cannot open"));
}

TEST_CASE("run --model truncates at the folder's length, counts it and says so once, -p max_tokens overrides",
          "[model][tokenizer][cli]") {
  ModelCopy m;
  json tj = m.tokenizer();
  tj["truncation"]["max_length"] = 16;
  m.write("tokenizer.json", tj);
  const std::string csv = m.tmp.file("r.csv"), s = m.tmp.file("s.json");
  // a: 3 + 2 tokens; b: 30 words -> cut at 16; c: exactly 14 words = 16 tokens, not truncated.
  std::string b, c;
  for (int i = 0; i < 30; ++i) b += "stop ";
  for (int i = 0; i < 14; ++i) c += "stop ";
  testutil::write_file(csv, "report_id,text\na,stop decision issued\nb," + b + "\nc," + c + "\n");
  const std::string job = "run -q -s text -p path=" + testutil::shell_quote(csv) + " --model " + testutil::shell_quote(m.dir.string());
  auto r = testutil::run_cli(job + " --summary " + s);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = json::parse(testutil::read_file(s));
  CHECK(j["truncation"] == json({{"max_tokens", 16}, {"from", "tokenizer.json truncation.max_length"}}));
  CHECK(j["scenarios"][0]["reports"] == 3);
  CHECK(j["scenarios"][0]["truncated_reports"] == 1);
  CHECK(j["scenarios"][0]["empty_reports"] == 0);
  CHECK(j["scenarios"][0]["tokens"] == 5 + 16 + 16);
  CHECK_THAT(r.err, Contains("headsep: note: 1 of 3 reports truncated at 16 tokens (tokenizer.json truncation.max_length;"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);

  r = testutil::run_cli(job + " -p max_tokens=40 --summary " + s);
  REQUIRE(r.status == 0);
  j = json::parse(testutil::read_file(s));
  CHECK(j["truncation"] == json({{"max_tokens", 40}, {"from", "max_tokens"}}));
  CHECK(j["scenarios"][0]["truncated_reports"] == 0);
  CHECK(j["scenarios"][0]["tokens"] == 5 + 32 + 16);
  CHECK(r.err.empty());

  fs::remove(s);
  r = testutil::run_cli(job + " -p max_tokens=513 --summary " + s);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("parameter 'max_tokens' must be 0") && Contains("max_position_embeddings (512"));
  CHECK_FALSE(fs::exists(s));

  // The unedited MiniLM folder: 128 tokens, its tokenizer.json's.
  r = testutil::run_cli("run -q -s text -p path=" + testutil::shell_quote(csv) + " --model " +
                        testutil::shell_quote(testutil::model_dir().string()) + " --summary " + s);
  REQUIRE(r.status == 0);
  CHECK(json::parse(testutil::read_file(s))["truncation"]["max_tokens"] == 128);

  // A vocab.txt with one extra line: refused before anything is written.
  fs::remove(s);
  m.write("vocab.txt", m.vocab() + "qqextraqq\n");
  r = testutil::run_cli(job + " --summary " + s);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains(m.path("vocab.txt") + ": 30523 entries"));
  CHECK_FALSE(fs::exists(s));
}
