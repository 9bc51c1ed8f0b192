// Attention schemes through the real CLI and plugins: qkv (QKV attention the host runs),
// positional (explicit per-query maps), the --attention dump, determinism across threads and
// chunk sizes, and plugins built against the saved ABI 1.0 header.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "headsep/plugin.h"
#include "test_util.hpp"

using namespace testutil;
using Catch::Contains;
using nlohmann::json;

namespace {

const std::string kQkv = "run --scenario ops-reports --weighting qkv -p ops-reports.d_model=16 ";

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("qkv: summary with head and pair statistics, identical across threads and chunk sizes", "[attention][cli]") {
  TempDir dir;
  const std::string base = kQkv + "-p reports=3000 -p heads=3 -p seed=7 --quiet ";
  auto a = run_cli(base + "--threads 1 --chunk 8192 --summary " + shell_quote(dir.file("a.json")) + " --per-report " +
                   shell_quote(dir.file("a.csv")));
  REQUIRE(a.status == 0);
  auto b = run_cli(base + "--threads 2 --chunk 97 --summary " + shell_quote(dir.file("b.json")) + " --per-report " +
                   shell_quote(dir.file("b.csv")));
  REQUIRE(b.status == 0);
  CHECK(summary_text(dir.file("a.json")) == summary_text(dir.file("b.json")));  // but for run.execution
  CHECK(read_file(dir.file("a.csv")) == read_file(dir.file("b.csv")));
  auto j = json::parse(read_file(dir.file("a.json")));
  REQUIRE(j["scenarios"].size() == 1);
  const auto& m = j["scenarios"][0]["metrics"];
  for (const char* k : {"single_entropy", "head1_confidence", "head3_first_weight", "head1_head2_js_divergence",
                        "head2_head3_subspace_cosine", "head1_head3_output_distance"})
    CHECK(m.contains(k));
  // Softmax rows over 3..6 tokens: entropy in (0, ln 6], confidence in [1/6, 1], JS in [0, ln 2].
  CHECK(m["head1_entropy"]["min"].get<double>() > 0);
  CHECK(m["head1_entropy"]["max"].get<double>() <= std::log(6.0) + 1e-6);
  CHECK(m["head2_confidence"]["min"].get<double>() >= 1.0 / 6 - 1e-6);
  CHECK(m["head1_head2_js_divergence"]["max"].get<double>() <= std::log(2.0) + 1e-6);
  CHECK(m["head1_head2_js_divergence"]["min"].get<double>() >= 0);
  CHECK(std::fabs(m["head1_head2_subspace_cosine"]["max"].get<double>()) <= 1 + 1e-6);
  CHECK(m["head_separation"]["mean"].get<double>() > 0);
}

TEST_CASE("qkv: batches of long reports split across threads give the same bits as one thread", "[attention][cli]") {
  // 20..70 tokens, d_model 64: a batch of 64 reports is ~200 MFLOP, so with 2 threads the
  // attention stage splits it into parts run as nested tasks (runtime/attention/stage.cpp); ragged
  // lengths make the parts' cuts fall between reports of different lengths.
  TempDir dir;
  const std::string base = "run --scenario ops-reports --weighting qkv -p ops-reports.d_model=64 -p min_tokens=20 "
                           "-p max_tokens=70 -p reports=300 -p heads=4 -p seed=11 --quiet ";
  std::string first_json, first_csv;
  for (const char* job : {"--threads 1 --chunk 8192", "--threads 2 --chunk 64", "--threads 2 --chunk 300",
                          "--threads 2 --chunk 7"}) {
    INFO(job);
    auto r = run_cli(base + job + " --summary " + shell_quote(dir.file("s.json")) + " --per-report " +
                     shell_quote(dir.file("r.csv")));
    REQUIRE(r.status == 0);
    if (first_json.empty()) {
      first_json = summary_text(dir.file("s.json")), first_csv = read_file(dir.file("r.csv"));
      continue;
    }
    CHECK(summary_text(dir.file("s.json")) == first_json);
    CHECK(read_file(dir.file("r.csv")) == first_csv);
  }
}

TEST_CASE("qkv: the terminal table shows per-head and per-pair attention statistics", "[attention][cli]") {
  auto r = run_cli(kQkv + "-p reports=500 -p heads=2");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("attention per head") && Contains("attention per pair of heads") && Contains("JS"));
  CHECK_THAT(r.out, Contains("attention f32"));
}

TEST_CASE("qkv reads the feature columns when the generator gives no embeddings", "[attention][cli]") {
  auto r = run_cli("run -s ops-reports -w qkv -p reports=200 -p heads=2 --quiet --format jsonl");
  REQUIRE(r.status == 0);
  auto rows = json_lines(r.out);
  REQUIRE(rows.size() == 200);
  CHECK(rows[0]["attention"]["heads"]["head1"].contains("entropy"));
  CHECK(rows[0]["attention"]["pairs"]["head1_head2"].contains("js_divergence"));
}

TEST_CASE("a 1-token report: entropy 0, confidence 1, no previous token", "[attention][cli]") {
  auto r = run_cli(kQkv + "-p reports=50 -p min_tokens=1 -p max_tokens=1 -p heads=2 --quiet --format jsonl");
  REQUIRE(r.status == 0);
  for (const auto& row : json_lines(r.out)) {
    const auto& h = row["attention"]["heads"]["head1"];
    CHECK(h["entropy"].get<double>() == Approx(0).margin(1e-6));
    CHECK(h["confidence"].get<double>() == Approx(1));
    CHECK(h["self_weight"].get<double>() == Approx(1));
    CHECK(h["prev_weight"].get<double>() == 0);
    CHECK(row["head_separation"].get<double>() == Approx(0).margin(1e-6));  // one token: every head reads it
  }
}

TEST_CASE("attention dumps: --attention writes the maps of chosen reports, rows are distributions", "[attention][cli]") {
  TempDir dir;
  auto r = run_cli(kQkv + "-p reports=40 -p heads=2 -p qkv.causal=true --quiet --attention " +
                   shell_quote(dir.file("maps.jsonl")) + " --attention-reports index:3,17");
  REQUIRE(r.status == 0);
  auto rows = json_lines(read_file(dir.file("maps.jsonl")));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["report_index"] == 3);
  CHECK(rows[1]["report_index"] == 17);
  for (const auto& row : rows) {
    const std::size_t n = row["tokens"].size();
    REQUIRE(row["heads"].size() == 2);
    REQUIRE(row["single"].size() == n);
    CHECK(row["output"].size() == n);  // seeded weights carry an output projection
    for (const auto& head : row["heads"])
      for (std::size_t q = 0; q < n; ++q) {
        double sum = 0;
        for (std::size_t k = 0; k < n; ++k) {
          const double a = head[q][k].get<double>();
          if (k > q) CHECK(a == 0);  // causal
          sum += a;
        }
        CHECK(sum == Approx(1).epsilon(1e-5));
      }
  }
  // One designated query: one row per map.
  auto last = run_cli(kQkv + "-p reports=5 -p heads=2 -p query=last --quiet --attention " +
                      shell_quote(dir.file("last.jsonl")) + " --attention-reports all");
  REQUIRE(last.status == 0);
  auto lrows = json_lines(read_file(dir.file("last.jsonl")));
  REQUIRE(lrows.size() == 5);
  for (const auto& row : lrows) {
    CHECK(row["queries"].size() == 1);
    CHECK(row["queries"][0] == row["tokens"].size() - 1);
    CHECK(row["heads"][0].size() == 1);
  }
}

TEST_CASE("positional: explicit maps give the metrics computed by hand", "[attention][cli]") {
  // 3-token reports; head 1 = previous token (the first token attends to itself), head 2 = first
  // token; baseline uniform. Per query q = 0, 1, 2: head 1 puts 1 on token 0, 0, 1; head 2 on 0, 0, 0.
  auto r = run_cli("run -s ops-reports -w positional -p reports=20 -p min_tokens=3 -p max_tokens=3 --quiet --format jsonl");
  REQUIRE(r.status == 0);
  for (const auto& row : json_lines(r.out)) {
    const auto& h1 = row["attention"]["heads"]["head1"];
    const auto& h2 = row["attention"]["heads"]["head2"];
    const auto& s = row["attention"]["heads"]["single"];
    CHECK(h1["entropy"].get<double>() == 0);
    CHECK(h1["confidence"].get<double>() == 1);
    CHECK(h1["prev_weight"].get<double>() == Approx(2.0 / 3));
    CHECK(h1["self_weight"].get<double>() == Approx(1.0 / 3));
    CHECK(h2["first_weight"].get<double>() == 1);
    CHECK(s["entropy"].get<double>() == Approx(std::log(3.0)));
    CHECK(s["confidence"].get<double>() == Approx(1.0 / 3));
    const auto& p = row["attention"]["pairs"]["head1_head2"];
    CHECK(p["js_divergence"].get<double>() == Approx(std::log(2.0) / 3));  // only q = 2 differs
    CHECK(p["position_overlap"].get<double>() == Approx(2.0 / 3));
    CHECK(p["subspace_cosine"].get<double>() == 1);  // V = X for every head
    // The seed's contexts at q = 0, 1, 2 read tokens (0, 0, 1) and (0, 0, 0): the mean of those.
  }
}

TEST_CASE("attention errors name the plugin and leave no output", "[attention][cli]") {
  TempDir dir;
  const std::string out = " --summary " + shell_quote(dir.file("s.json")) + " --per-report " + shell_quote(dir.file("r.csv"));
  auto no_emb = run_cli("run -s ops-reports -w qkv -p input=embeddings -p reports=10" + out);
  CHECK(no_emb.status == 1);
  CHECK_THAT(no_emb.err, Contains("qkv") && Contains("embeddings"));
  auto big = run_cli(kQkv + "-p reports=4 -p min_tokens=30000 -p max_tokens=30000 -p heads=2 --max-report-mb 1" + out);
  CHECK(big.status == 1);
  CHECK_THAT(big.err, Contains("report '#0'") && Contains("30000 tokens") && Contains("qkv") && Contains("--max-report-mb"));
  // A bad weights file: the file and the tensor are named, exit 1, nothing written.
  write_file(dir.file("../bad-mha.safetensors"), std::string("\x10\0\0\0\0\0\0\0{\"in_proj_weight\":", 27));
  auto bad = run_cli(kQkv + "-p reports=10 -p heads=2 -p weights=" + shell_quote(dir.file("../bad-mha.safetensors")) + out);
  std::filesystem::remove(dir.file("../bad-mha.safetensors"));
  CHECK(bad.status == 1);
  CHECK_THAT(bad.err, Contains("bad-mha.safetensors") && Contains("qkv"));
  auto shape = run_cli(kQkv + "-p reports=10 -p heads=2 -p weights=" +
                       shell_quote(source_path("tests/data/mha_small.safetensors")) + out);  // d_model 8, X is 16 wide
  CHECK(shape.status == 1);
  CHECK_THAT(shape.err, Contains("mha_small.safetensors") && Contains("16"));
  auto not_att = run_cli("run -s ops-reports -w axis-focus -p reports=10 --attention " + shell_quote(dir.file("m.jsonl")));
  CHECK(not_att.status == 2);
  CHECK_THAT(not_att.err, Contains("not an attention scheme"));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("plugins built against the ABI 1.0 header load and give identical results", "[attention][abi]") {
  const std::string cases = std::string(HEADSEP_BINARY_DIR) + "/tests/plugins/cases/";
  auto info = run_cli("plugins compat-focus --plugin-dir " + shell_quote(cases + "compat10"));
  REQUIRE(info.status == 0);
  CHECK_THAT(info.out, Contains("abi:  1.0"));
  auto now = run_cli("plugins compat-focus --plugin-dir " + shell_quote(cases + "compat_current"));
  REQUIRE(now.status == 0);
  CHECK_THAT(now.out, Contains("abi:  1." + std::to_string(HEADSEP_PLUGIN_ABI_MINOR)));
  const std::string job = "run -s compat-reports -w compat-focus --format jsonl --quiet --chunk 13 --plugin-dir ";
  auto old_run = run_cli(job + shell_quote(cases + "compat10"));
  auto new_run = run_cli(job + shell_quote(cases + "compat_current"));
  REQUIRE(old_run.status == 0);
  REQUIRE(new_run.status == 0);
  CHECK(json_lines(old_run.out).size() == 200);
  CHECK(old_run.out == new_run.out);
}

TEST_CASE("ABI 1.2 shared baseline, 1.3 every slot at once: results identical to a scheme without the flags", "[attention][abi]") {
  // compat_shared's weights() fails unless rows[0] is NULL exactly for slot > 0, and the compat_all*
  // builds fail unless the host asks for both slots in one call with the baseline rows as their
  // flags say, so a host that ignored a flag fails its run; every build must give the same bytes.
  const std::string cases = std::string(HEADSEP_BINARY_DIR) + "/tests/plugins/cases/";
  for (const char* threads : {"1", "2"}) {
    const std::string job = std::string("run -s compat-reports -w compat-designs --format jsonl --quiet --chunk 13 --threads ") +
                            threads + " --plugin-dir " + shell_quote(cases + "compat_current") + " --plugin-dir ";
    auto plain = run_cli(job + shell_quote(cases + "compat_unshared"));
    INFO(plain.err);
    REQUIRE(plain.status == 0);
    CHECK(json_lines(plain.out).size() == 400);  // 200 reports x 2 designs
    for (const char* variant : {"compat_shared", "compat_all", "compat_all_shared"}) {
      auto flagged = run_cli(job + shell_quote(cases + variant));
      INFO(variant << ": " << flagged.err);
      REQUIRE(flagged.status == 0);
      CHECK(flagged.out == plain.out);
    }
    // In f32 the host asks slot by slot, which the compat_all builds refuse: the error names the plugin.
    auto f32 = run_cli(job + shell_quote(cases + "compat_all") + " --precision f32");
    CHECK(f32.status != 0);
    CHECK_THAT(f32.err, Contains("compat-designs") && Contains("did not ask for every slot at once"));
  }
}

TEST_CASE("ABI 1.3 every slot at once: axis-focus gives the same bytes as slot by slot (--slot-by-slot)", "[abi]") {
  // The main job's weighting (3 designs, a shared baseline) with short ragged chunks (kernel tails).
  TempDir dir;
  for (const char* threads : {"1", "2"}) {
    std::string outs[2];
    for (int all = 0; all < 2; ++all) {
      const std::string s = dir.file(std::string("s") + threads + std::to_string(all) + ".json");
      auto r = run_shell(shell_quote(HEADSEP_CLI) + " run -s ops-reports -w axis-focus -p reports=3001 --chunk 37" +
                         (all ? "" : " --slot-by-slot") + " --format jsonl --quiet --top 3 --threads " + threads +
                         " --summary " + shell_quote(s));
      INFO(r.err);
      REQUIRE(r.status == 0);
      CHECK(json_lines(r.out).size() == 9003);  // 3001 reports x 3 designs
      outs[all] = r.out + summary_text(s);  // the summary but for run.execution (the command line differs)
    }
    CHECK(outs[0] == outs[1]);
  }
}
