// `run --model`'s per-report outputs: --per-report rows (JSONL, CSV) and --attention maps against
// the NumPy float64 reference (tests/model/rows_reference.py, every layer, head and metric, from
// the rows' own token ids), byte-identical for any thread count and chunk size, and bad options.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_dir.hpp"
#include "test_util.hpp"

using json = nlohmann::json;
using testutil::run_cli;
using testutil::shell_quote;

namespace {

std::string model_arg() { return " --model " + shell_quote(testutil::model_dir().string()); }

// Reports of several lengths (1 word to a long sentence), scenarios, words of the lexicon.
struct Texts {
  std::string csv, lexicon, args;
  explicit Texts(testutil::TempDir& tmp) : csv(tmp.file("in.csv")), lexicon(tmp.file("lex.csv")) {
    testutil::write_file(lexicon, "word,a1,a2\nstop,1,0\npump,0,1\npressure,0.5,0.25\nhold,1,1\n");
    testutil::write_file(csv,
                         "report_id,scenario,text\n"
                         "r1,night,Stop the pump now.\n"
                         "r2,night,\"Pressure rose; hold the line until the pump is fixed, then stop.\"\n"
                         "r3,night,hold\n"
                         "r4,day,The pressure of the pump was stable all night and nobody asked to stop it.\n"
                         "r5,day,stop stop hold pump pressure\n");
    args = "run -q -s text -p path=" + shell_quote(csv) + " -p lexicon=" + shell_quote(lexicon) +
           " --axes 'a1=a1;a2=a2'" + model_arg();
  }
};

std::vector<json> json_lines(const std::string& path) {
  std::vector<json> v;
  std::istringstream in(testutil::read_file(path));
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("run --model --per-report and --attention match the NumPy reference, every layer and head", "[model][cli]") {
  testutil::TempDir tmp;
  const Texts t(tmp);
  const std::string rows = tmp.file("rows.jsonl"), maps = tmp.file("maps.jsonl");
  auto r = run_cli(t.args + " --chunk 2 --per-report " + rows + " --attention " + maps + " --attention-reports all");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto lines = json_lines(rows);
  REQUIRE(lines.size() == 5 * 6);  // (report, scenario, layer): one scenario per report here
  CHECK(lines[0]["report_id"] == "r1");
  CHECK(lines[0]["scenario"] == "night");
  CHECK(lines[0]["layer"] == 0);
  CHECK(lines[5]["layer"] == 5);
  CHECK(lines[6]["report_id"] == "r2");
  CHECK(lines[0]["tokens"] == json({"[CLS]", "stop", "the", "pump", "now", ".", "[SEP]"}));
  CHECK(lines[0]["token_ids"] == json({101, 2644, 1996, 10216, 2085, 1012, 102}));
  CHECK(lines[0]["n_tokens"] == 7);
  CHECK(lines[0]["head_contexts"].size() == 12);
  CHECK(lines[0]["attention"]["pairs"].size() == 66);
  CHECK(json_lines(maps).size() == 5 * 6);

  const auto ref = testutil::run_shell("/usr/bin/python3 " +
                                       shell_quote(HEADSEP_SOURCE_DIR "/tests/model/rows_reference.py") + " " +
                                       shell_quote(testutil::model_dir().string()) + " " + rows + " " + maps + " " +
                                       t.lexicon);
  INFO(ref.err);
  REQUIRE(ref.status == 0);
  const json res = json::parse(ref.out);
  INFO(res.dump());
  CHECK(res["counts"]["rows"] == 30);
  CHECK(res["counts"]["maps"] == 30);
  CHECK(res["counts"]["reports"] == 5);
  // Every metric of docs/METRICS.md (measured: all within 2.2e-6 of float64).
  for (const char* k : {"context", "difference", "separation", "entropy", "confidence", "self_weight", "prev_weight",
                        "first_weight", "js_divergence", "position_overlap", "subspace_cosine", "output_cosine",
                        "output_distance", "maps"}) {
    INFO(k);
    REQUIRE(res["max_abs"].contains(k));
    CHECK(res["max_abs"][k].get<double>() <= 1e-4);
  }
}

TEST_CASE("run --model rows and maps: the same bytes for any thread count and chunk, CSV as JSONL", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string base = "run -q -s ops-text -p reports=13 -p seed=9" + model_arg();
  auto go = [&](const std::string& name, const std::string& flags) {
    auto r = run_cli(base + flags + " --attention-reports index:1,7,12 --attention-layers 0,4 --per-report " + tmp.file(name + ".jsonl") + " --attention " +
                     tmp.file(name + ".maps") + " --summary " + tmp.file(name + ".json"));
    INFO(r.err);
    REQUIRE(r.status == 0);
  };
  go("a", " --threads 1 --chunk 13");
  go("b", " --threads 3 --chunk 4");
  go("c", " --threads 2 --chunk 1");
  for (const char* o : {"b", "c"}) {
    CHECK(testutil::read_file(tmp.file("a.jsonl")) == testutil::read_file(tmp.file(std::string(o) + ".jsonl")));
    CHECK(testutil::read_file(tmp.file("a.maps")) == testutil::read_file(tmp.file(std::string(o) + ".maps")));
  }
  const auto rows = json_lines(tmp.file("a.jsonl"));
  CHECK(rows.size() == 13 * 6);
  const auto maps = json_lines(tmp.file("a.maps"));
  REQUIRE(maps.size() == 3 * 2);  // report by report, the kept layers in order
  CHECK(maps[0]["report_index"] == 1);
  CHECK(maps[0]["layer"] == 0);
  CHECK(maps[1]["layer"] == 4);
  CHECK(maps[5]["report_index"] == 12);
  CHECK(maps[0]["heads"].size() == 12);
  CHECK(maps[0]["single"].size() == maps[0]["tokens"].size());
  CHECK(maps[0]["token_ids"] == rows[6]["token_ids"]);
  // BERT's heads each read their own keys and values: no decoder kv_head / shared_kv fields.
  CHECK(rows[0]["attention"]["heads"]["head1"].size() == 5);
  CHECK_FALSE(rows[0]["attention"]["heads"]["head1"].contains("kv_head"));
  CHECK(rows[0]["attention"]["pairs"]["head1_head2"].size() == 5);
  CHECK_FALSE(rows[0]["attention"]["pairs"]["head1_head2"].contains("shared_kv"));
  CHECK_FALSE(maps[0].contains("kv_head_of"));

  // Asking for rows changes nothing in the summary (seconds and the run's execution block aside).
  auto r = run_cli(base + " --threads 1 --chunk 13 --summary " + tmp.file("plain.json"));
  REQUIRE(r.status == 0);
  json x = json::parse(testutil::read_file(tmp.file("a.json"))), y = json::parse(testutil::read_file(tmp.file("plain.json")));
  x.erase("seconds"), y.erase("seconds");
  x["run"].erase("execution"), y["run"].erase("execution");
  CHECK(x == y);

  // CSV: the same rows, the token ids as a JSON array field after the tokens.
  r = run_cli(base + " --threads 2 --per-report " + tmp.file("a.csv"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::istringstream csv(testutil::read_file(tmp.file("a.csv")));
  std::string header, first;
  std::getline(csv, header), std::getline(csv, first);
  CHECK(header.rfind("report_id,scenario,layer,n_tokens,tokens,token_ids,single_decision,", 0) == 0);
  CHECK(header.find(",head_separation,separation_1_2,") != std::string::npos);
  CHECK(header.find(",head3_entropy,") != std::string::npos);
  CHECK(header.find(",head11_head12_output_distance\r") != std::string::npos);
  CHECK(header.find("_kv_head") == std::string::npos);
  CHECK(header.find("_shared_kv") == std::string::npos);
  CHECK(first.rfind("ops-text-0,all,0," + std::to_string(rows[0]["n_tokens"].get<int>()) + ",", 0) == 0);
  CHECK(first.find("\"" + rows[0]["token_ids"].dump() + "\"") != std::string::npos);
  std::size_t n = 1;
  for (std::string line; std::getline(csv, line);) ++n;
  CHECK(n == 13 * 6);
}

TEST_CASE("run --model per-report options: bad values are usage errors, nothing written", "[model][cli]") {
  testutil::TempDir tmp;
  const std::string out = tmp.file("rows.jsonl"), maps = tmp.file("maps.jsonl");
  const std::string base = "run -q -s ops-text -p reports=3" + model_arg();
  auto expect_usage = [&](const std::string& flags, const std::string& what) {
    auto r = run_cli(base + flags);
    INFO(flags);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains(what));
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK_FALSE(std::filesystem::exists(maps));
  };
  expect_usage(" --per-report " + tmp.file("rows.txt"), "rows as .jsonl or .csv");
  expect_usage(" --per-report " + out + " --format csv", "--format, --output and --report do not apply");
  expect_usage(" --per-report " + out + " --attention " + maps + " --attention-layers 6", "layer 6 is not a layer of the model (0..5)");
  expect_usage(" --per-report " + out + " --attention " + maps + " --attention-layers 1,x", "--attention-layers: expected all");
  expect_usage(" --per-report " + out + " --attention " + maps + " --attention-reports some", "--attention-reports: expected");
  expect_usage(" --per-report " + out + " --attention-layers 1", "give --attention");
  auto r = run_cli("run -q -s ops-reports -w uniform --attention-layers 1 --summary " + out);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--attention-layers applies to --model"));
}
