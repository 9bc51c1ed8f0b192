// Hostile command lines and inputs through the CLI (issue 48): requests that match nothing,
// --chunk out of range, JSON-lines errors and nesting, and numbers too large to write: each one
// clear line naming what is at fault, exit 1 (bad data) or 2 (usage), no output file left.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"

using Catch::Contains;
using testutil::run_cli;
using testutil::shell_quote;
using testutil::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kQkv = "run -q --scenario ops-reports --weighting qkv -p ops-reports.d_model=16 -p reports=10 -p heads=2 ";

std::string decoder(const std::string& name) {
  return testutil::source_path("tests/model/fixtures/decoder/" + name);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> v;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t j = std::min(text.find('\n', i), text.size());
    v.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return v;
}

bool one_line(const std::string& err) { return std::count(err.begin(), err.end(), '\n') == 1; }

}  // namespace

TEST_CASE("attention reports: an index or id that no report has is an error like --report's, nothing written",
          "[cli][inputs]") {
  TempDir dir;
  const std::string maps = dir.file("maps.jsonl"), sum = dir.file("s.json");
  auto with = [&](const std::string& spec) {
    return run_cli(kQkv + "--attention " + shell_quote(maps) + " --summary " + shell_quote(sum) + " --attention-reports " + spec);
  };
  for (const auto& [spec, want] :
       {std::pair{"index:99", "--attention-reports index:99: no report has index 99 (the input has 10 reports, indices from 0)"},
        {"index:3,10", "--attention-reports index:3,10: no report has index 10 (the input has 10 reports"},
        {"id:absent", "--attention-reports id:absent: no report has id 'absent'"}}) {
    auto r = with(spec);
    INFO(spec << ": " << r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains(want));
    CHECK(one_line(r.err));
    CHECK_FALSE(fs::exists(maps));
    CHECK_FALSE(fs::exists(sum));
  }
  // What matches is written: every id of a list, each index once.
  auto ok = with("index:9,2,2");
  INFO(ok.err);
  REQUIRE(ok.status == 0);
  std::vector<std::string> ids;
  for (const auto& line : split_lines(testutil::read_file(maps))) {
    const auto j = nlohmann::json::parse(line);
    ids.push_back(j["report_id"]);
  }
  REQUIRE(ids.size() == 2);
  fs::remove(maps), fs::remove(sum);
  auto by_id = with("id:" + ids[1] + "," + ids[0]);
  INFO(by_id.err);
  CHECK(by_id.status == 0);
  CHECK(split_lines(testutil::read_file(maps)).size() == 2);
  fs::remove(maps), fs::remove(sum);
  auto partly = with("id:" + ids[0] + ",absent");
  CHECK(partly.status == 1);
  CHECK_THAT(partly.err, Contains("no report has id 'absent'"));
  CHECK_FALSE(fs::exists(maps));
  // A model run: the same check, the same message.
  testutil::write_file(dir.file("t.jsonl"), "{\"report_id\": \"a\", \"text\": \"Stop the pump.\"}\n");
  auto m = run_cli("run -q -s text -p path=" + shell_quote(dir.file("t.jsonl")) + " --model " + shell_quote(decoder("gpt2")) +
                   " --attention " + shell_quote(maps) + " --attention-reports id:b --summary " + shell_quote(sum));
  CHECK(m.status == 1);
  CHECK_THAT(m.err, Contains("--attention-reports id:b: no report has id 'b'"));
  CHECK_FALSE(fs::exists(maps));
  CHECK_FALSE(fs::exists(sum));
}

TEST_CASE("a chunk size out of range: one short usage line, no 300-digit range", "[cli][inputs]") {
  for (const char* v : {"0", "-1", "abc", "1.5", "4294967297", "99999999999999999999999"}) {
    auto r = run_cli(kQkv + "--chunk " + v);
    INFO(v << ": " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--chunk") && Contains("1..4294967296") && Contains(std::string("got '") + v + "'"));
    CHECK(r.err.size() < 200);
  }
  CHECK(run_cli(kQkv + "--chunk 3").status == 0);
}

TEST_CASE("JSON lines: a syntax error is located by line and column, deep nesting refused, no crash", "[cli][inputs]") {
  TempDir dir;
  const std::string jl = dir.file("t.jsonl"), sum = dir.file("s.json");
  const std::string gpt2 = " --model " + shell_quote(decoder("gpt2"));
  auto text_run = [&] { return run_cli("run -q -s text -p path=" + shell_quote(jl) + gpt2 + " --summary " + shell_quote(sum)); };
  auto tokenize = [&] { return run_cli("tokenize" + gpt2 + " --format jsonl " + shell_quote(jl)); };
  testutil::write_file(jl, "{\"report_id\": \"a\", \"text\": \"ok\"}\n{\"report_id\": \"b\", \"text\": tru}\n");
  for (const auto& r : {text_run(), tokenize()}) {
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains(jl + ":2: column 31: not valid JSON (invalid literal; last read: '\"text\": tru}')"));
    CHECK(r.err.find("json.exception") == std::string::npos);
    CHECK(one_line(r.err));
  }
  // 300 000 levels in a field beside the text (the text plugin) and as the text (tokenize).
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  testutil::write_file(jl, "{\"report_id\": \"a\", \"text\": \"ok\", \"meta\": " + deep + "}\n");
  for (const auto& r : {text_run(), tokenize()}) {
    INFO(r.err.substr(0, 300));
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains(jl + ":1: column 297: JSON nested deeper than 256 levels"));
    CHECK(one_line(r.err));
  }
  CHECK_FALSE(fs::exists(sum));
}

TEST_CASE("numbers too large to write: a difference or a summary that overflows is refused by name", "[cli][inputs]") {
  TempDir dir;
  const std::string csv = dir.file("big.csv"), rows = dir.file("rows.jsonl"), sum = dir.file("s.json");
  // head1 reads +1.7e308, the single head -1.7e308: the contexts are finite, their difference is
  // not; one head, so no pair distance overflows with it.
  testutil::write_file(csv, "report_id,scenario,token,decision_axis,single_weight,head1_weight\n"
                            "r1,s,a,1.7e308,0,1\nr1,s,b,-1.7e308,1,0\n");
  auto r = run_cli("run -q --input " + shell_quote(csv) + " --axes d=decision_axis --per-report " + shell_quote(rows));
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("report 'r1', scenario 's': head1's difference from the single head on axis 'd' is not finite"));
  CHECK(one_line(r.err));
  CHECK_FALSE(fs::exists(rows));
  // Separations of 1.3e154 are finite (their squares just fit), the sum of three squares is not:
  // the summary's std is refused, not written as null.
  std::string text = "report_id,scenario,token,decision_axis,single_weight,head1_weight,head2_weight\nr0,s,a,1,1,1,0\nr0,s,b,0,0,0,1\n";
  for (const char* id : {"r1", "r2", "r3"})
    text += std::string(id) + ",s,a,0.65e154,1,1,0\n" + id + ",s,b,-0.65e154,0,0,1\n";
  testutil::write_file(csv, text);
  r = run_cli("run -q --input " + shell_quote(csv) + " --axes d=decision_axis --summary " + shell_quote(sum));
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("summary: scenarios[0].metrics.head_separation.std is not finite"));
  CHECK(one_line(r.err));
  CHECK_FALSE(fs::exists(sum));
}
