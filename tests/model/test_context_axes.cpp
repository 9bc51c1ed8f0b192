// Context axes from the model (headsep/context_axes.hpp, docs/METRICS.md): `run --model` with the
// token-class axes, two semantic axes and two direction axes against an independent reference —
// transformers' tokenizer, attention maps and hidden states, every axis value and metric in NumPy
// (tests/model/fixtures/make_axes_fixtures.py; no torch here) — on a tiny BERT and the gpt2 and
// llama decoder fixtures and all-MiniLM-L6-v2: contexts, differences and separations within 1e-5 relative (floor 1e-6)
// at 1 and 2 threads, the same bytes at any thread and chunk count. Plus every bad input refused in
// one line naming the file and axis, nothing written, and the "no silent zeros" warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_dir.hpp"
#include "safetensors_files.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using testutil::shell_quote;

namespace {

fs::path axes_dir() { return fs::path(testutil::source_path("tests/model/fixtures/axes")); }
fs::path model_dir(const std::string& name) {
  if (name == "minilm") return testutil::model_dir();  // all-MiniLM-L6-v2 (scripts/fetch_model.sh)
  return name == "bert-tiny" ? axes_dir() / "bert-tiny" : fs::path(testutil::source_path("tests/model/fixtures/decoder/" + name));
}

std::string args_for(const std::string& model, const testutil::TempDir& tmp, const std::string& extra = "") {
  return "run -s text -p path=" + shell_quote((axes_dir() / "texts.jsonl").string()) + " --model " +
         shell_quote(model_dir(model).string()) + " --token-axes all --semantic-axes " +
         shell_quote((axes_dir() / "semantic.json").string()) + " --direction-axes " +
         shell_quote((axes_dir() / (model + ".directions.safetensors")).string()) + " --quiet " + extra + " --summary " +
         shell_quote(tmp.file("s.json"));
}

/// Within 1e-5 relative (floor 1e-6) of `scale`: the value itself, or for the real model the
/// largest of its kind in the layer (below).
bool close(double got, double want, double scale = 0) {
  return std::abs(got - want) <= std::max(1e-5 * std::max(std::abs(want), scale), 1e-6);
}

/// `scales[i % scales.size()]`: each value's scale (none: its own magnitude).
void check_values(const json& got, const json& want, const std::string& what, const std::vector<double>& scales = {}) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "]: got " << got[i].get<double>() << ", want " << want[i].get<double>());
    CHECK(close(got[i].get<double>(), want[i].get<double>(), scales.empty() ? 0 : scales[i % scales.size()]));
  }
}

/// Per axis, the largest |context| of the layer (every head and the baseline). The real model's
/// direction values h·u add 384 products of f32 hidden states that transformers and headsep each
/// round their own way (~1e-7 relative per element): a small sum of large terms is off by ~1e-5 of
/// the terms' scale, not of itself, and so are the contexts and separations built on it.
std::vector<double> axis_scales(const json& layer) {
  std::vector<double> s(layer["context"][0].size(), 0.0);
  for (const auto& head : layer["context"])
    for (std::size_t c = 0; c < s.size(); ++c) s[c] = std::max(s[c], std::abs(head[c].get<double>()));
  return s;
}

json flat(const json& nested) {
  json out = json::array();
  for (const auto& row : nested)
    for (const auto& v : row) out.push_back(v);
  return out;
}

void check_model(const std::string& model) {
  const json ref = json::parse(std::ifstream(axes_dir() / (model + ".reference.json")));
  std::string rows_bytes;
  for (const char* threads : {"1", "2"}) {
    INFO(model << ", " << threads << " thread(s)");
    testutil::TempDir tmp;
    const auto r = testutil::run_cli(args_for(model, tmp, std::string("--threads ") + threads + " --per-report " +
                                                          shell_quote(tmp.file("rows.jsonl"))));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json sum = json::parse(std::ifstream(tmp.file("s.json")));
    CHECK(sum["axes"] == ref["axes"]);
    const json& sources = sum["run"]["axes"]["sources"];
    CHECK(sources["position"] == "token class");
    CHECK(sources["certainty"] == "semantic " + (axes_dir() / "semantic.json").string());
    CHECK(sources["probe"] == "direction " + (axes_dir() / (model + ".directions.safetensors")).string());
    CHECK(sum["scenarios"][0]["tokens_without_axis_value"] == 0);
    std::ifstream rows(tmp.file("rows.jsonl"));
    std::size_t seen = 0;
    for (std::string line; std::getline(rows, line); ++seen) {
      const json row = json::parse(line);
      const std::size_t report = std::stoul(row["report_id"].get<std::string>().substr(1)), layer = row["layer"];
      const json& rep = ref["reports"][report];
      REQUIRE(row["token_ids"] == rep["ids"]);
      const json& want = rep["layers"][layer];
      INFO("report " << report << " layer " << layer);
      const bool real = model == "minilm";
      const std::vector<double> axes = real ? axis_scales(want) : std::vector<double>{};
      std::vector<double> pairs;
      if (real) pairs.push_back(std::max_element(want["pairwise"].begin(), want["pairwise"].end())->get<double>());
      check_values(row["single_head_context"], want["context"][0], "single_head_context", axes);
      json heads = want["context"];
      heads.erase(0);
      check_values(flat(row["head_contexts"]), flat(heads), "head_contexts", axes);
      check_values(row["difference_from_single"], flat(want["difference"]), "difference_from_single", axes);
      check_values(row["pairwise_separation"], want["pairwise"], "pairwise_separation", pairs);
      check_values(json::array({row["head_separation"]}), json::array({want["separation"]}), "head_separation");
    }
    CHECK(seen == ref["reports"].size() * ref["reports"][0]["layers"].size());
    const std::string bytes = testutil::read_file(tmp.file("rows.jsonl"));
    if (rows_bytes.empty()) rows_bytes = bytes;
    else CHECK(bytes == rows_bytes);  // any thread count: the same bytes
  }
  // Any chunk: the same bytes.
  testutil::TempDir tmp;
  REQUIRE(testutil::run_cli(args_for(model, tmp, "--threads 2 --chunk 2 --per-report " + shell_quote(tmp.file("rows.jsonl"))))
              .status == 0);
  CHECK(testutil::read_file(tmp.file("rows.jsonl")) == rows_bytes);
}

}  // namespace

TEST_CASE("context axes: token-class, semantic and direction axes match transformers + NumPy on a tiny BERT",
          "[model][axes]") {
  check_model("bert-tiny");
}

TEST_CASE("context axes: the same on all-MiniLM-L6-v2 (the real model)", "[model][axes]") { check_model("minilm"); }

TEST_CASE("context axes: the same on GPT-2 and Llama (decoder fixtures)", "[model][axes][decoder]") {
  check_model("gpt2");
  check_model("llama");
}

namespace {

/// A run of bert-tiny (hidden 32, 2 layers) with these axis options: exit 1, one line on stderr
/// holding every `parts`, no summary written.
void refused(const std::string& options, const std::vector<std::string>& parts) {
  testutil::TempDir tmp;
  const auto r = testutil::run_cli("run -s text -p path=" + shell_quote((axes_dir() / "texts.jsonl").string()) +
                                   " --model " + shell_quote(model_dir("bert-tiny").string()) + " --quiet " + options +
                                   " --summary " + shell_quote(tmp.file("s.json")));
  INFO(options << "\n" << r.err);
  CHECK(r.status == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  for (const auto& p : parts) CHECK_THAT(r.err, Catch::Contains(p));
  CHECK_FALSE(fs::exists(tmp.file("s.json")));
}

std::string write(const testutil::TempDir& tmp, const std::string& name, const std::string& bytes) {
  std::ofstream(tmp.file(name), std::ios::binary) << bytes;
  return tmp.file(name);
}

}  // namespace

TEST_CASE("context axes: bad input is one line naming the file and axis, nothing written", "[model][axes]") {
  namespace st = safetensors_test;
  testutil::TempDir in;
  const std::string sem = (axes_dir() / "semantic.json").string();
  const std::string dirs = (axes_dir() / "bert-tiny.directions.safetensors").string();
  // One source per axis: a name from two sources is refused naming the later one's file.
  const std::string probe = write(in, "probe.json", R"({"probe": {"plus": ["good"], "minus": ["bad"]}})");
  refused("--semantic-axes " + shell_quote(probe) + " --direction-axes " + shell_quote(dirs), {dirs, "'probe'", "another source"});
  const std::string pos = write(in, "pos.json", R"({"position": {"plus": ["good"], "minus": ["bad"]}})");
  refused("--token-axes all --semantic-axes " + shell_quote(pos), {pos, "'position'", "another source"});
  // Word lists: empty, cancelling, unknown words only, not JSON.
  const std::string empty = write(in, "empty.json", R"({"tone": {"plus": [], "minus": ["bad"]}})");
  refused("--semantic-axes " + shell_quote(empty), {empty, "'tone' plus", "non-empty list"});
  const std::string cancel = write(in, "cancel.json", R"({"tone": {"plus": ["good", "bad"], "minus": ["bad", "good"]}})");
  refused("--semantic-axes " + shell_quote(cancel), {cancel, "'tone'", "|u| = 0"});
  const std::string unk = write(in, "unk.json", "{\"tone\": {\"plus\": [\"good\"], \"minus\": [\"\xE6\x97\xA5\"]}}");
  refused("--semantic-axes " + shell_quote(unk), {unk, "'tone' minus word", "unknown tokens only"});
  const std::string bad = write(in, "bad.json", R"({"tone": {"plus": ["good"]})");
  refused("--semantic-axes " + shell_quote(bad), {bad, "not valid JSON"});
  // Directions: another model's width or layer count, non-finite values, a zero vector.
  std::vector<float> d33(33, 1.0f), l3(3 * 32, 1.0f), nan(2 * 32, 1.0f), zero(32, 0.0f);
  nan[40] = std::nanf("");
  const std::string w = write(in, "w.safetensors", st::build({st::f32("wide", {33}, d33)}));
  refused("--direction-axes " + shell_quote(w), {w, "'wide'", "[33]", "[hidden] = [32]"});
  const std::string l = write(in, "l.safetensors", st::build({st::f32("deep", {3, 32}, l3)}));
  refused("--direction-axes " + shell_quote(l), {l, "'deep'", "[layers, hidden] = [2, 32]"});
  const std::string n = write(in, "n.safetensors", st::build({st::f32("nan", {2, 32}, nan)}));
  refused("--direction-axes " + shell_quote(n), {n, "'nan'", "not finite"});
  const std::string z = write(in, "z.safetensors", st::build({st::f32("zero", {32}, zero)}));
  refused("--direction-axes " + shell_quote(z), {z, "'zero'", "|u| = 0"});
  // Token classes: a name that is not one is a usage error.
  testutil::TempDir tmp;
  const auto r = testutil::run_cli("run -s text -p path=" + shell_quote((axes_dir() / "texts.jsonl").string()) +
                                   " --model " + shell_quote(model_dir("bert-tiny").string()) +
                                   " --quiet --token-axes position,colour --summary " + shell_quote(tmp.file("s.json")));
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("'colour'"));
  CHECK_FALSE(fs::exists(tmp.file("s.json")));
}

TEST_CASE("no silent zeros: a run whose tokens are mostly 0 on every axis warns once and counts them", "[model][axes]") {
  testutil::TempDir tmp;
  const std::string base = "run -s text -p path=" + shell_quote((axes_dir() / "texts.jsonl").string()) + " --model " +
                           shell_quote(model_dir("bert-tiny").string()) + " --quiet --summary " + shell_quote(tmp.file("s.json"));
  // The built-in operations lexicon has one word of these texts ("sensor"): 59 of 60 tokens are 0.
  auto r = testutil::run_cli(base + " --axes decision=decision_axis");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("warning: 98 % of the tokens (59 of 60)") && Catch::Contains("--semantic-axes"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  json sum = json::parse(std::ifstream(tmp.file("s.json")));
  CHECK(sum["scenarios"][0]["tokens"] == 60);
  CHECK(sum["scenarios"][0]["tokens_without_axis_value"] == 59);
  // The text generator without a lexicon and without axis options: the token classes by default.
  r = testutil::run_cli(base);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, !Catch::Contains("warning"));
  sum = json::parse(std::ifstream(tmp.file("s.json")));
  CHECK(sum["axes"] == json({"position", "punctuation", "word_start"}));
  CHECK(sum["run"]["axes"]["sources"]["word_start"] == "token class");
  // With the token classes only [CLS] (position 0, no word) is 0 on every axis: no warning.
  r = testutil::run_cli(base + " --token-axes all");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, !Catch::Contains("warning"));
  sum = json::parse(std::ifstream(tmp.file("s.json")));
  CHECK(sum["scenarios"][0]["tokens_without_axis_value"] == 5);  // one [CLS] per report
}
