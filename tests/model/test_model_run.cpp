// The real model end to end through the CLI: `headsep run --model DIR` on ops-text and text
// reports (the per layer x head summary; the same numbers for any thread count and chunk size),
// the text generator's formats, and every bad input a clear error (file and line), exit 1, no
// summary written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "headsep/wordpiece.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using json = nlohmann::json;
using testutil::run_cli;
using testutil::shell_quote;

namespace {

std::string model_arg() { return " --model " + shell_quote(testutil::model_dir().string()); }

}  // namespace

TEST_CASE("headsep run --model: ops-text through MiniLM, per layer x head, thread- and chunk-independent", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string s1 = tmp.file("s1.json"), s2 = tmp.file("s2.json");
  auto r1 = run_cli("run -s ops-text -p reports=12 -p seed=5" + model_arg() + " --threads 1 --chunk 12 --summary " + s1);
  INFO(r1.err);
  REQUIRE(r1.status == 0);
  CHECK_THAT(r1.out, Catch::Contains("mean attention entropy") && Catch::Contains("layer separation") &&
                         Catch::Contains("decision over condition"));
  auto r2 = run_cli("run -q -s ops-text -p reports=12 -p seed=5" + model_arg() + " --threads 2 --chunk 5 --summary " + s2);
  INFO(r2.err);
  REQUIRE(r2.status == 0);
  CHECK(r2.out.empty());
  const json a = json::parse(testutil::read_file(s1)), b = json::parse(testutil::read_file(s2));
  REQUIRE(a["scenarios"].size() == 1);
  const json& sc = a["scenarios"][0];
  CHECK(sc["reports"] == 12);
  CHECK(sc["layers"].size() == 6);
  CHECK(sc["layers"][0]["heads"].size() == 12);
  CHECK(sc["layers"][0]["pairs"].size() == 66);
  CHECK(a["axes"] == json({"decision", "evidence", "condition"}));
  // Sums are merged per batch, so a different chunk size may round differently in the last bits.
  const json& o = b["scenarios"][0];
  CHECK(o["tokens"] == sc["tokens"]);
  for (std::size_t l = 0; l < 6; ++l)
    for (std::size_t h = 0; h < 12; ++h) {
      const double x = sc["layers"][l]["heads"][h]["entropy"], y = o["layers"][l]["heads"][h]["entropy"];
      CHECK(std::abs(x - y) <= 1e-12 * std::max(1.0, std::abs(x)));
      const double e = sc["layers"][l]["heads"][h]["entropy"];
      CHECK(e >= 0.0);
    }
  // Same chunk, other thread count: identical.
  const std::string s3 = tmp.file("s3.json");
  auto r3 = run_cli("run -q -s ops-text -p reports=12 -p seed=5" + model_arg() + " --threads 2 --chunk 12 --summary " + s3);
  REQUIRE(r3.status == 0);
  CHECK(json::parse(testutil::read_file(s3))["scenarios"] == a["scenarios"]);
}

TEST_CASE("text generator: CSV and JSON lines, scenarios, through the model", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string csv = tmp.file("r.csv"), jl = tmp.file("r.jsonl"), s = tmp.file("s.json");
  testutil::write_file(csv,
                       "report_id,scenario,text\n"
                       "a,night,\"Stop decision: pressure anomaly, restart when stable.\"\n"
                       "b,night,\"Hold decision.\nReturn when the seal is replaced.\"\n"
                       "c,day,정지결정 압력이상 복귀조건\n");
  auto r = run_cli("run -q -s text -p path=" + shell_quote(csv) + model_arg() + " --summary " + s);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = json::parse(testutil::read_file(s));
  REQUIRE(j["scenarios"].size() == 2);
  CHECK(j["scenarios"][0]["name"] == "night");
  CHECK(j["scenarios"][0]["reports"] == 2);
  CHECK(j["scenarios"][1]["name"] == "day");
  const headsep::WordPiece wp = headsep::WordPiece::from_file(testutil::model_dir() / "vocab.txt");
  headsep::Encoding e;
  wp.encode("정지결정 압력이상 복귀조건", e);
  CHECK(j["scenarios"][1]["tokens"] == e.ids.size());

  testutil::write_file(jl, "{\"report_id\": 1, \"text\": \"Stop decision issued.\"}\n\n{\"report_id\": \"x\", \"text\": \"Pump P-3 vibration reached 9 mm/s.\"}\n");
  r = run_cli("run -q -s text -p path=" + shell_quote(jl) + model_arg() + " --summary " + s);
  INFO(r.err);
  REQUIRE(r.status == 0);
  j = json::parse(testutil::read_file(s));
  CHECK(j["scenarios"][0]["name"] == "all");
  CHECK(j["scenarios"][0]["reports"] == 2);
}

TEST_CASE("text and model errors name the file and line, exit 1, nothing written", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string s = tmp.file("s.json");
  auto expect_error = [&](const std::string& args, const std::string& what) {
    auto r = run_cli("run -q " + args + " --summary " + s);
    INFO(args);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains(what));
    CHECK_FALSE(std::filesystem::exists(s));
  };
  const std::string bad = tmp.file("bad.csv");
  testutil::write_file(bad, "report_id,text\na,fine text\nb,bad \xff byte\n");
  expect_error("-s text -p path=" + shell_quote(bad) + model_arg(), bad + ":3: report 'b': text is not valid UTF-8");
  testutil::write_file(bad, "id,text\na,x\n");
  expect_error("-s text -p path=" + shell_quote(bad) + model_arg(), bad + ":1: the header needs the columns report_id and text");
  testutil::write_file(bad, "report_id,text\na,\"never closed\n");
  expect_error("-s text -p path=" + shell_quote(bad) + model_arg(), bad + ":2: unterminated quoted field");
  const std::string badj = tmp.file("bad.jsonl");
  testutil::write_file(badj, "{\"report_id\": \"a\", \"text\": \"ok\"}\n{\"report_id\": \"b\", text}\n");
  expect_error("-s text -p path=" + shell_quote(badj) + model_arg(), badj + ":2: column 21: not valid JSON (invalid literal");
  testutil::write_file(badj, "{\"report_id\": \"a\"}\n");
  expect_error("-s text -p path=" + shell_quote(badj) + model_arg(), badj + ":1: \"text\" is missing");
  expect_error("-s ops-text --model " + shell_quote(tmp.file("nomodel")), "config.json: cannot open");
  const std::string lex = tmp.file("lex.csv");
  testutil::write_file(lex, "word,decision_axis\nstop,abc\n");
  expect_error("-s ops-text -p lexicon=" + shell_quote(lex) + model_arg() + " --axes d=decision_axis",
               lex + ":2: column 'decision_axis': 'abc' is not a finite number");
  // --model takes no weighting; the generator must give token ids.
  auto r = run_cli("run -s ops-text -w uniform" + model_arg());
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model and --weighting exclude each other"));
  r = run_cli("run -s ops-reports" + model_arg() + " --axes d=decision_axis --summary " + s);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("no 'token_id' feature"));
  CHECK_FALSE(std::filesystem::exists(s));
}

TEST_CASE("empty and whitespace-only texts in the middle of a batch: [CLS] [SEP] reports, counted, none lost", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string with = tmp.file("with.csv"), without = tmp.file("without.csv");
  const std::string a = "a,Stop decision: pressure anomaly on pump P-3.\n", e = "e,Return when the seal is replaced.\n";
  // b: empty, c: spaces and a tab, d: an ideographic space and a zero-width space (both dropped
  // or spaces to the normalizer), as Hugging Face gives [CLS] [SEP] for each.
  testutil::write_file(with, "report_id,text\n" + a + "b,\"\"\nc,\"  \t \"\nd,\"\u3000\u200b\"\n" + e);
  testutil::write_file(without, "report_id,text\n" + a + e);
  auto run = [&](const std::string& csv, const std::string& args, const std::string& out) {
    // The lexicon's axes (not the text generator's default token classes): an empty text's tokens have no value.
    auto r = run_cli("run -q -s text -p path=" + shell_quote(csv) + model_arg() +
                     " --axes 'decision=decision_axis;evidence=evidence_axis;condition=condition_axis' --top 5 " + args +
                     " --summary " + out);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return std::make_pair(json::parse(testutil::read_file(out)), r.err);
  };
  const auto [j, err] = run(with, "--chunk 5 --threads 1", tmp.file("s1.json"));
  const json& sc = j["scenarios"][0];
  CHECK(sc["reports"] == 5);
  CHECK(sc["empty_reports"] == 3);
  CHECK(sc["truncated_reports"] == 0);
  CHECK_THAT(err, Catch::Contains("headsep: note: 3 of 5 reports have an empty or whitespace-only text"));
  const auto [k, err2] = run(without, "--chunk 5", tmp.file("s2.json"));
  CHECK(sc["tokens"] == k["scenarios"][0]["tokens"].get<std::uint64_t>() + 3 * 2);
  CHECK_THAT(err2, !Catch::Contains("note:"));  // (the lexicon leaves most tokens 0: the axes' warning only)
  // Every report is listed in the top; the empty ones have no context on any axis, so separation 0.
  std::map<std::string, double> top;
  for (const auto& t : sc["top"]) top[t["report_id"]] = t["separation"];
  REQUIRE(top.size() == 5);
  CHECK(top["b"] == 0.0);
  CHECK(top["c"] == 0.0);
  CHECK(top["d"] == 0.0);
  std::map<std::string, double> top2;
  for (const auto& t : k["scenarios"][0]["top"]) top2[t["report_id"]] = t["separation"];
  CHECK(top["a"] == top2["a"]);  // the other reports' own numbers do not change
  CHECK(top["e"] == top2["e"]);
  // A batch of empty reports alone (chunk 1), any thread count: the same summary.
  const auto [l, err3] = run(with, "--chunk 1 --threads 2", tmp.file("s3.json"));
  CHECK(l["scenarios"][0]["empty_reports"] == 3);
  CHECK(l["scenarios"][0]["top"] == sc["top"]);
  for (std::size_t h = 0; h < 12; ++h) {
    const double x = sc["layers"][5]["heads"][h]["entropy"], y = l["scenarios"][0]["layers"][5]["heads"][h]["entropy"];
    CHECK(std::abs(x - y) <= 1e-12 * std::max(1.0, std::abs(x)));
  }
}

TEST_CASE("a token id past the embedding table names vocab.txt", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string csv = tmp.file("ids.csv"), s = tmp.file("s.json");
  testutil::write_file(csv, "report_id,scenario,token,token_id,decision_axis\nr1,x,a,101,0.1\nr1,x,b,40000,0.2\nr1,x,c,102,0\n");
  auto r = run_cli("run -q -s csv -p path=" + shell_quote(csv) + " -p features=token_id,decision_axis -p weights=false" +
                   model_arg() + " --axes d=decision_axis --summary " + s);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("report 'r1': token 2: token_id 40000 is not an id of the model's vocabulary: vocab.txt") &&
                        Catch::Contains("0..30521"));
  CHECK_FALSE(std::filesystem::exists(s));
}

TEST_CASE("ops-text is deterministic per seed and report index through the ordinary engine too", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string a = tmp.file("a.jsonl"), b = tmp.file("b.jsonl");
  const std::string base = "run -q -s ops-text -p reports=50 -p names=true -p model=" +
                           shell_quote(testutil::model_dir().string()) + " -w uniform -p uniform.heads=2 --per-report ";
  auto r1 = run_cli(base + a + " --chunk 50");
  INFO(r1.err);
  REQUIRE(r1.status == 0);
  auto r2 = run_cli(base + b + " --chunk 7 --threads 2");
  REQUIRE(r2.status == 0);
  const std::string x = testutil::read_file(a);
  CHECK(x == testutil::read_file(b));
  CHECK_THAT(x, Catch::Contains("ops-text-49"));
}
