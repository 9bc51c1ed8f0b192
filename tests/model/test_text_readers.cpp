// The text readers hand the tokenizer the text as written: the `text` generator's CSV keeps what
// Python's csv module keeps (a CR before an LF inside quotes included) and drops a leading BOM, as
// its JSON-lines reader and `headsep tokenize` do. Seen through a byte-level BPE (tok_gpt2), where
// a CR or a BOM is a token of its own (the per-report rows name each report's tokens).
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "headsep/tokenizer.hpp"
#include "test_util.hpp"

using json = nlohmann::json;
using testutil::run_cli;
using testutil::shell_quote;
namespace fs = std::filesystem;

namespace {

const fs::path kGpt2 = fs::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures/tok_gpt2";

using Tokens = std::vector<std::string>;

Tokens tokens_of(const std::string& text) {
  static const auto tok = headsep::tokenizer_from_json_file(kGpt2 / "tokenizer.json", 1024);
  headsep::Encoding e;
  tok->encode(text, e);
  Tokens t;
  for (auto id : e.ids) t.push_back(tok->token(id));
  return t;
}

/// The tokens of each report of a `text` run over `file` (names=true, per-report rows).
std::vector<Tokens> run_tokens(const std::string& file) {
  testutil::TempDir tmp;
  const std::string rows = tmp.file("rows.jsonl");
  const auto r = run_cli("run -q -s text -p path=" + shell_quote(file) + " -p names=true -p model=" + shell_quote(kGpt2.string()) +
                         " -w uniform -p uniform.heads=2 --per-report " + shell_quote(rows));
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::vector<Tokens> out;
  std::istringstream in(testutil::read_file(rows));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line)["tokens"].get<Tokens>());
  return out;
}

}  // namespace

TEST_CASE("text generator CSV: quoted fields keep CR LF, CR and LF as written, a leading BOM is not text", "[model][cli]") {
  REQUIRE(tokens_of("a\r\nb") != tokens_of("a\nb"));  // the CR is a token here: dropping it shows
  testutil::TempDir tmp;
  const std::string csv = tmp.file("r.csv");
  // Python: csv.reader(open(f, newline='')) gives 'a\r\nb', 'c\rd', 'e\nf' and 'g' (CRLF records).
  testutil::write_file(csv, "\xEF\xBB\xBFreport_id,text\r\n1,\"a\r\nb\"\r\n2,\"c\rd\"\r\n3,\"e\nf\"\r\n4,g\r\n");
  CHECK(run_tokens(csv) == std::vector<Tokens>{tokens_of("a\r\nb"), tokens_of("c\rd"), tokens_of("e\nf"), tokens_of("g")});
  // Records end at a lone CR too; blank lines between records are skipped.
  testutil::write_file(csv, "report_id,text\r1,x y\r\r\n2,\"\"\"q\"\" \r\"\n");
  CHECK(run_tokens(csv) == std::vector<Tokens>{tokens_of("x y"), tokens_of("\"q\" \r")});
  // A BOM inside the text (not at the file's start) is text.
  testutil::write_file(csv, "report_id,text\n1,\"\xEF\xBB\xBFz\"\n");
  CHECK(run_tokens(csv) == std::vector<Tokens>{tokens_of("\xEF\xBB\xBFz")});
  // Errors still name the line the record starts on, CRs counted as line ends.
  testutil::write_file(csv, "report_id,text\r\n1,\"a\r\nb\"\r\n2,c\"d\r\n");
  const auto r = run_cli("run -q -s text -p path=" + shell_quote(csv) + " -p model=" + shell_quote(kGpt2.string()) +
                         " -w uniform -p uniform.heads=2");
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains(csv + ":4: a quote inside an unquoted field"));
}

TEST_CASE("text generator JSON lines and headsep tokenize: a leading BOM is dropped like the CSV reader's", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string jl = tmp.file("r.jsonl");
  testutil::write_file(jl, "\xEF\xBB\xBF{\"report_id\": 1, \"text\": \"Stop x\"}\n");
  CHECK(run_tokens(jl) == std::vector<Tokens>{tokens_of("Stop x")});
  // tokenize, line mode: the first line's BOM is not part of its text; a later line's is.
  const std::string lines = tmp.file("t.txt");
  testutil::write_file(lines, "\xEF\xBB\xBFStop x\r\n\xEF\xBB\xBFy\n");
  auto r = run_cli("tokenize --model " + shell_quote(kGpt2.string()) + " " + shell_quote(lines));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto first = json::parse(r.out.substr(0, r.out.find('\n')));
  const auto second = json::parse(r.out.substr(r.out.find('\n') + 1));
  CHECK(first["tokens"].get<Tokens>() == tokens_of("Stop x"));
  CHECK(second["tokens"].get<Tokens>() == tokens_of("\xEF\xBB\xBFy"));
  // JSON-lines mode: the same text with and without the BOM.
  r = run_cli("tokenize --model " + shell_quote(kGpt2.string()) + " " + shell_quote(jl));
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out)["tokens"].get<Tokens>() == tokens_of("Stop x"));
}
