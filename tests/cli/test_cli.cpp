// End-to-end tests of the real `headsep` binary: the seed block, formats, heads, axes, errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "test_util.hpp"

using namespace testutil;
using Catch::Contains;
using Catch::StartsWith;

namespace {

const std::string kSeedCsv = source_path("data/qkv-multihead-report-scenarios.csv");
const std::string kHeader =
    "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight\n";

// A CSV value printed with a random number of decimals, as people's files have them.
std::string num(std::mt19937_64& g, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", int(g() % 5) + 1, u(g));
  return buf;
}

std::string random_token(std::mt19937_64& g) {
  static const char* parts[] = {"정지", "결정", "pressure", "a,b", "say \"x\"", "it's", "복귀", "조건", "tab\there", "x"};
  std::string t;
  for (int i = 0, n = int(g() % 3) + 1; i < n; ++i) t += parts[g() % 10];
  return t;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

TEST_CASE("headsep example prints the seed's block byte for byte", "[cli][seed]") {
  auto r = run_cli("example");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == read_file(source_path("tests/seed/expected-output.txt")));
}

TEST_CASE("the seed's own Python script agrees with headsep on the seed CSV and on random CSVs", "[cli][seed][property]") {
  // The reference is the textbook's script itself (tests/seed/seed_script.py, only its path made a parameter).
  const std::string script = source_path("tests/seed/seed_script.py");
  auto py = run_shell("python3 " + shell_quote(script) + " " + shell_quote(kSeedCsv));
  REQUIRE(py.status == 0);
  auto ours = run_cli("run --input " + shell_quote(kSeedCsv) + " --report ops_pressure_return");
  REQUIRE(ours.status == 0);
  CHECK(ours.out + "\n" == py.out);  // print() leaves one blank line after the last block

  std::mt19937_64 g(20261129);
  TempDir dir;
  for (int trial = 0; trial < 25; ++trial) {
    std::string csv = kHeader;
    int n_reports = int(g() % 3) + 1, focus = int(g() % std::uint64_t(n_reports));
    for (int r = 0; r < n_reports; ++r) {
      std::string id = r == focus ? "ops_pressure_return" : "other_" + std::to_string(r);
      int n_tokens = int(g() % 6) + 1, n_scen = int(g() % 4) + 1;
      std::vector<std::string> tokens, feats;
      for (int t = 0; t < n_tokens; ++t) {
        tokens.push_back(random_token(g));
        feats.push_back(num(g, -3, 3) + "," + num(g, -3, 3) + "," + num(g, -3, 3));
      }
      for (int s = 0; s < n_scen; ++s)
        for (int t = 0; t < n_tokens; ++t)
          csv += id + ",scen_" + std::to_string(s) + "," + csv_field(tokens[t]) + "," + feats[t] + "," + num(g, 0, 2) +
                 "," + num(g, 0, 2) + "," + num(g, 0, 2) + "\n";
    }
    const std::string path = dir.file("rand" + std::to_string(trial) + ".csv");
    write_file(path, csv);
    auto ref = run_shell("python3 " + shell_quote(script) + " " + shell_quote(path));
    REQUIRE(ref.status == 0);
    auto got = run_cli("run --input " + shell_quote(path) + " --report ops_pressure_return --format text");
    INFO("trial " << trial << "\n" << csv);
    REQUIRE(got.status == 0);
    CHECK(got.out + "\n" == ref.out);
  }
}

TEST_CASE("text output names the report when several are printed", "[cli]") {
  auto r = run_cli("run --input " + shell_quote(kSeedCsv));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("csv_rows = 36\nfocus_report_rows = 36\n"));
  CHECK_THAT(r.out, Contains("[balanced_heads]\nreport_id = 'maint_code_guard'\ntokens = ['변수정의'"));
  CHECK(r.out.back() == '\n');
  CHECK(r.out.substr(r.out.size() - 2) != "\n\n");
}

TEST_CASE("JSON lines: one object per (report, scenario), shortest round-trip numbers", "[cli][jsonl]") {
  auto r = run_cli("run --input " + shell_quote(kSeedCsv) + " --format jsonl");
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> objs;
  while (std::getline(lines, line)) objs.push_back(nlohmann::json::parse(line));
  REQUIRE(objs.size() == 12);
  const auto& o = objs[1];
  CHECK(o["report_id"] == "ops_pressure_return");
  CHECK(o["scenario"] == "decision_vs_condition_split");
  CHECK(o["tokens"] == nlohmann::json::array({"정지결정", "압력이상", "복귀조건"}));
  REQUIRE(o["head_contexts"].size() == 2);
  CHECK(o["single_head_context"][0].get<double>() == Approx(1.3).margin(1e-3));
  CHECK(o["head_contexts"][1][1].get<double>() == Approx(1.2).margin(1e-3));
  CHECK(o["difference_from_single"].size() == 4);
  CHECK(o["head_separation"].get<double>() == Approx(1.14).margin(1e-3));
  CHECK_FALSE(o.contains("pairwise_separation"));
  // The difference is exactly head minus single, as computed in double.
  CHECK(o["difference_from_single"][2].get<double>() ==
        o["head_contexts"][1][0].get<double>() - o["single_head_context"][0].get<double>());
}

TEST_CASE("CSV output: one row per (report, scenario) with a header", "[cli][csvout]") {
  auto r = run_cli("run --input " + shell_quote(kSeedCsv) + " --format csv --report maint_code_guard");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, StartsWith("report_id,scenario,tokens,single_decision_axis,single_evidence_condition_axis,"
                               "head1_decision_axis,head1_evidence_condition_axis,head2_decision_axis,"
                               "head2_evidence_condition_axis,diff_head1_decision_axis,"));
  CHECK_THAT(r.out, Contains("\r\nmaint_code_guard,balanced_heads,\"[\"\"변수정의\"\",\"\"사용위치\"\",\"\"분기조건\"\"]\","));
  std::size_t rows = 0;
  for (char c : r.out) rows += c == '\n';
  CHECK(rows == 4);
}

TEST_CASE("N = 1, 3 and 5 heads, hand-computed", "[cli][heads]") {
  TempDir dir;
  // Two tokens; axis values: decision = d, ec = e + c. Token A: d=1, ec=0; token B: d=0, ec=2.
  SECTION("one head: no pair, separation 0") {
    write_file(dir.file("h1.csv"),
               "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight\n"
               "r,s,A,1,0,0,0.5,1\nr,s,B,0,1,1,0.5,0\n");
    auto r = run_cli("run --input " + shell_quote(dir.file("h1.csv")));
    REQUIRE(r.status == 0);
    CHECK(r.out ==
          "csv_rows = 2\nfocus_report_rows = 2\ncontext_axes = ['decision_axis', 'evidence_condition_axis']\n\n"
          "[s]\ntokens = ['A', 'B']\nsingle_head_context = [0.5, 1.0]\nhead1_context       = [1.0, 0.0]\n"
          "difference_from_single = [0.5, -1.0]\nhead_separation = 0.0\n");
  }
  SECTION("three heads: mean of the three pairwise distances") {
    write_file(dir.file("h3.csv"),
               "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,"
               "head2_weight,head3_weight\n"
               "r,s,A,1,0,0,0.5,1,0,0.5\nr,s,B,0,1,1,0.5,0,1,0\n");
    // head1 = (1,0), head2 = (0,2), head3 = (0.5,0); d12 = sqrt(5), d13 = 0.5, d23 = sqrt(4.25).
    auto r = run_cli("run --input " + shell_quote(dir.file("h3.csv")) + " --format jsonl");
    REQUIRE(r.status == 0);
    auto o = nlohmann::json::parse(r.out);
    CHECK(o["pairwise_separation"][0].get<double>() == std::sqrt(5.0));
    CHECK(o["pairwise_separation"][1].get<double>() == 0.5);
    CHECK(o["pairwise_separation"][2].get<double>() == std::sqrt(4.25));
    CHECK(o["head_separation"].get<double>() == (std::sqrt(5.0) + 0.5 + std::sqrt(4.25)) / 3);
    auto t = run_cli("run --input " + shell_quote(dir.file("h3.csv")));
    CHECK_THAT(t.out, Contains("head3_context       = [0.5, 0.0]\n"));
    CHECK_THAT(t.out, Contains("difference_from_single = [0.5, -1.0, -0.5, 1.0, 0.0, -1.0]\n"));
    CHECK_THAT(t.out, Contains("head_separation = 1.599\npairwise_separation = [2.236, 0.5, 2.062]\n"));
  }
  SECTION("five heads: ten pairs in order (1,2), (1,3), ..., (4,5)") {
    std::string csv = "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight";
    for (int h = 1; h <= 5; ++h) csv += ",head" + std::to_string(h) + "_weight";
    csv += "\nr,s,A,1,0,0,1,1,2,3,4,5\n";  // head h context = (h, 0)
    write_file(dir.file("h5.csv"), csv);
    auto r = run_cli("run --input " + shell_quote(dir.file("h5.csv")) + " --format jsonl");
    REQUIRE(r.status == 0);
    auto o = nlohmann::json::parse(r.out);
    REQUIRE(o["head_contexts"].size() == 5);
    std::vector<double> expect;
    for (int i = 1; i <= 5; ++i)
      for (int j = i + 1; j <= 5; ++j) expect.push_back(j - i);
    CHECK(o["pairwise_separation"].get<std::vector<double>>() == expect);
    CHECK(o["head_separation"].get<double>() == 2.0);  // (4*1 + 3*2 + 2*3 + 1*4) / 10
  }
}

TEST_CASE("a context that overflows is an error naming the report, in f64 and f32", "[cli]") {
  TempDir dir;
  // Report 'big': two tokens at 1e308 (f64) / 3e38 (f32) with weight 1: the sum overflows.
  for (const char* precision : {"f64", "f32"}) {
    const std::string v = std::string(precision) == "f64" ? "1e308" : "3e38";
    // 'big' is report 10 of 20: inside the SIMD kernels' vector tiles at every level, not the scalar tail.
    std::string csv = "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight\n";
    for (int i = 0; i < 20; ++i) {
      const std::string id = i == 10 ? "big" : "ok" + std::to_string(i), x = i == 10 ? v : "1";
      csv += id + ",s,A," + x + ",0,0,1,1,0\n" + id + ",s,B," + x + ",1,1,1,0,1\n";
    }
    write_file(dir.file("o.csv"), csv);
    auto r = run_cli("run --input " + shell_quote(dir.file("o.csv")) + " --precision " + precision + " --format jsonl -o " +
                     shell_quote(dir.file("o.jsonl")));
    INFO(precision << ": " << r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains("report 'big'") && Contains("overflowed"));
    CHECK_FALSE(std::filesystem::exists(dir.file("o.jsonl")));
  }
}

TEST_CASE("custom axes over any numeric columns, with coefficients", "[cli][axes]") {
  TempDir dir;
  write_file(dir.file("ax.csv"),
             "report_id,scenario,token,risk,cost,single_weight,head1_weight,head2_weight\n"
             "r,s,A,2,10,1,0.5,0\nr,s,B,4,20,0,0.5,1\n");
  auto r = run_cli("run --input " + shell_quote(dir.file("ax.csv")) + " --axes 'risk=risk;net=cost-0.5*risk' --format jsonl");
  REQUIRE(r.status == 0);
  auto o = nlohmann::json::parse(r.out);
  CHECK(o["single_head_context"] == nlohmann::json::array({2.0, 9.0}));
  CHECK(o["head_contexts"][0] == nlohmann::json::array({3.0, 13.5}));
  CHECK(o["head_contexts"][1] == nlohmann::json::array({4.0, 18.0}));
  auto t = run_cli("run --input " + shell_quote(dir.file("ax.csv")) + " --axes 'risk=risk'");
  CHECK_THAT(t.out, Contains("context_axes = ['risk']\n"));
  auto bad = run_cli("run --input " + shell_quote(dir.file("ax.csv")) + " --axes 'x=nosuch'");
  CHECK(bad.status == 1);
  CHECK_THAT(bad.err, Contains("column 'nosuch'"));
  auto usage = run_cli("run --input " + shell_quote(dir.file("ax.csv")) + " --axes 'noequals'");
  CHECK(usage.status == 2);
}

TEST_CASE("output files are atomic: written whole on success, absent on error", "[cli][output]") {
  TempDir dir;
  const std::string out = dir.file("result.jsonl");
  auto ok = run_cli("run --input " + shell_quote(kSeedCsv) + " --format jsonl --output " + shell_quote(out));
  REQUIRE(ok.status == 0);
  CHECK(ok.out.empty());
  CHECK(read_file(out).size() > 100);

  // A bad row after many good ones: no output file, no temporary left behind.
  std::string csv = kHeader;
  for (int i = 0; i < 20000; ++i) csv += "r" + std::to_string(i) + ",s,t,1,2,3,0.5,0.5,0.5\n";
  csv += "bad,s,t,1,2,oops,0.5,0.5,0.5\n";
  write_file(dir.file("bad.csv"), csv);
  const std::string out2 = dir.file("never.jsonl");
  auto bad = run_cli("run --input " + shell_quote(dir.file("bad.csv")) + " --format jsonl --chunk 64 --output " + shell_quote(out2));
  CHECK(bad.status == 1);
  CHECK_THAT(bad.err, Contains("bad.csv:20002") && Contains("column 'condition_axis'"));
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) files += e.path().filename().string().rfind("never", 0) == 0;
  CHECK(files == 0);
}

TEST_CASE("usage errors exit with status 2", "[cli]") {
  CHECK(run_cli("").status == 2);
  CHECK(run_cli("run").status == 2);
  CHECK(run_cli("frobnicate").status == 2);
  CHECK(run_cli("run --input x.csv --format yaml").status == 2);
  auto missing = run_cli("run --input /no/such/file.csv");
  CHECK(missing.status == 1);
  CHECK_THAT(missing.err, Contains("/no/such/file.csv"));
}

TEST_CASE("output to a device or pipe is written in place and leaves the device alone", "[cli][output]") {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A reader drains the FIFO while headsep writes to it.
  auto r = run_shell("(cat " + shell_quote(fifo) + " > " + shell_quote(dir.file("drained")) + " &) ; " +
                     shell_quote(HEADSEP_CLI) + " run --input " + shell_quote(kSeedCsv) + " --format jsonl --output " +
                     shell_quote(fifo) + "; sleep 0.2");
  CHECK(r.status == 0);
  CHECK(fs::is_fifo(fifo));
  CHECK(read_file(dir.file("drained")).find("\"report_id\":\"ops_pressure_return\"") != std::string::npos);
  auto n = run_cli("run --input " + shell_quote(kSeedCsv) + " --format jsonl --output /dev/null");
  CHECK(n.status == 0);
  CHECK(fs::is_character_file("/dev/null"));
}
