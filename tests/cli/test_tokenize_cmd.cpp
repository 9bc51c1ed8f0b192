// headsep tokenize --model DIR against Hugging Face `tokenizers`: every line of
// tests/model/fixtures/tokenize_fixture.jsonl (made by make_tokenize_fixture.py with the
// `tokenizers` package; this test does not need it) — ids, tokens and the truncation flag — read
// as JSON lines, as plain lines and as --text; plus the command's errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_dir.hpp"
#include "test_util.hpp"

using json = nlohmann::json;
using Catch::Contains;
using testutil::run_cli;
using testutil::shell_quote;

namespace {

const std::string kFixture = testutil::source_path("tests/model/fixtures/tokenize_fixture.jsonl");

std::string model() { return " --model " + shell_quote(testutil::model_dir().string()); }

std::vector<json> lines(const std::string& text) {
  std::vector<json> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(json::parse(l));
  return v;
}

}  // namespace

TEST_CASE("tokenize: the ids, tokens and truncation of Hugging Face tokenizers on every fixture text", "[tokenize][cli][model]") {
  const auto want = lines(testutil::read_file(kFixture));
  REQUIRE(want.size() >= 150);
  auto r = run_cli("tokenize" + model() + " --format jsonl " + shell_quote(kFixture));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto got = lines(r.out);
  REQUIRE(got.size() == want.size());
  std::size_t mismatches = 0, truncated = 0, empty = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i]["index"] == i);
    CHECK_FALSE(got[i].contains("report_id"));
    if (got[i]["ids"] != want[i]["ids"] || got[i]["tokens"] != want[i]["tokens"] || got[i]["truncated"] != want[i]["truncated"]) {
      ++mismatches;
      UNSCOPED_INFO("text " << want[i]["text"].dump() << "\n got:  " << got[i].dump() << "\n want: " << want[i].dump());
    }
    truncated += want[i]["truncated"].get<bool>();
    empty += want[i]["ids"].size() == 2;
  }
  CHECK(mismatches == 0);
  CHECK(truncated >= 4);  // the fixture covers both sides of the 128-token boundary
  CHECK(empty >= 10);

  // The same texts as plain lines on stdin (those without a line break), and one by --text.
  std::string plain;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::string t = want[i]["text"];
    if (t.find_first_of("\r\n") == std::string::npos) plain += t + "\n", which.push_back(i);
  }
  testutil::TempDir tmp;
  const std::string txt = tmp.file("texts.txt");
  testutil::write_file(txt, plain);
  r = testutil::run_shell("(" + shell_quote(HEADSEP_CLI) + " tokenize" + model() + " < " + shell_quote(txt) + ")");  // stdin
  REQUIRE(r.status == 0);
  const auto got_plain = lines(r.out);
  REQUIRE(got_plain.size() == which.size());
  for (std::size_t k = 0; k < which.size(); ++k) CHECK(got_plain[k]["ids"] == want[which[k]]["ids"]);
  r = run_cli("tokenize" + model() + " --text 'a [SEP] b' --text ''");
  REQUIRE(r.status == 0);
  CHECK(r.out == "{\"index\":0,\"ids\":[101,1037,102,1038,102],\"tokens\":[\"[CLS]\",\"a\",\"[SEP]\",\"b\",\"[SEP]\"],\"truncated\":false}\n"
                 "{\"index\":1,\"ids\":[101,102],\"tokens\":[\"[CLS]\",\"[SEP]\"],\"truncated\":false}\n");
}

TEST_CASE("tokenize: report ids, --max-tokens, --output, and errors by name", "[tokenize][cli][model]") {
  testutil::TempDir tmp;
  const std::string in = tmp.file("in.jsonl"), out = tmp.file("out.jsonl");
  testutil::write_file(in, "{\"report_id\": \"r1\", \"text\": \"stop stop stop\"}\n\n{\"report_id\": 7, \"text\": \"\"}\n");
  auto r = run_cli("tokenize" + model() + " --max-tokens 4 -o " + shell_quote(out) + " " + shell_quote(in));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());
  const auto got = lines(testutil::read_file(out));
  REQUIRE(got.size() == 2);
  CHECK(got[0]["report_id"] == "r1");
  CHECK(got[0]["ids"] == json({101, 2644, 2644, 102}));
  CHECK(got[0]["truncated"] == true);
  CHECK(got[1]["report_id"] == "7");
  CHECK(got[1]["ids"] == json({101, 102}));

  std::filesystem::remove(out);
  r = run_cli("tokenize" + model() + " --max-tokens 513 --text x -o " + shell_quote(out));
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("--max-tokens must be 0") && Contains("max_position_embeddings (512"));
  const std::string bad = tmp.file("bad.txt");
  testutil::write_file(bad, "fine\nbad \xff byte\n");
  r = run_cli("tokenize" + model() + " -o " + shell_quote(out) + " " + shell_quote(bad));
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains(bad + ":2: invalid UTF-8 at byte 5"));
  CHECK_FALSE(std::filesystem::exists(out));  // nothing left behind
  testutil::write_file(bad, "{\"text\": 3}\n");
  r = run_cli("tokenize" + model() + " --format jsonl " + shell_quote(bad));
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains(bad + ":1: expected an object with a string \"text\""));
  r = run_cli("tokenize --text x");
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("--model"));
  r = run_cli("tokenize --model " + shell_quote(tmp.file("nothing")) + " --text x");
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("config.json: cannot open"));
}
