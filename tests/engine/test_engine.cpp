// The engine through the real CLI and plugins: summaries, per-report streams, bounded memory,
// determinism across threads and chunk sizes, and a quiet stderr when it is not a terminal.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

using namespace testutil;
using Catch::Contains;

namespace {

const std::string kSynth = "run --scenario ops-reports --weighting axis-focus ";

// Runs the CLI in a child (stdout discarded) and returns its peak resident set (KiB).
long peak_rss_kib(const std::vector<std::string>& args) {
  ChildLimits lim;
  lim.stdout_path = "/dev/null";
  const Result r = run_child(args, lim);
  REQUIRE(r.status == 0);
  return r.peak_kib;
}

}  // namespace

TEST_CASE("summary JSON, per-report rows by extension, top-k", "[engine][cli]") {
  TempDir dir;
  auto r = run_cli(kSynth + "-p reports=20000 -p seed=5 --top 3 --bins 5 --summary " + shell_quote(dir.file("s.json")) +
                   " --per-report " + shell_quote(dir.file("rows.csv")));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("decision_vs_condition_split") && Contains("20000 reports, 60000 (report, scenario) groups"));
  auto j = nlohmann::json::parse(read_file(dir.file("s.json")));
  REQUIRE(j["scenarios"].size() == 3);
  CHECK(j["groups"] == 60000);
  for (const auto& s : j["scenarios"]) {
    CHECK(s["count"] == 20000);
    CHECK(s["top"].size() == 3);
    CHECK(s["head_separation_histogram"].size() == 5);
    const auto& m = s["metrics"]["head_separation"];
    CHECK(m["quantiles_exact"] == false);  // 20000 groups: sketch mode
    CHECK(m["p01"].get<double>() <= m["p50"].get<double>());
    CHECK(m["p50"].get<double>() <= m["p99"].get<double>());
    CHECK(m["min"].get<double>() <= m["p01"].get<double>());
    CHECK(s["top"][0]["head_separation"].get<double>() == m["max"].get<double>());
  }
  // The split design separates heads more than both heads on the condition side (the seed's reading).
  CHECK(j["scenarios"][1]["metrics"]["head_separation"]["mean"].get<double>() >
        j["scenarios"][2]["metrics"]["head_separation"]["mean"].get<double>());
  const std::string rows = read_file(dir.file("rows.csv"));
  std::size_t lines = 0;
  for (char c : rows) lines += c == '\n';
  CHECK(lines == 60001);  // header + one row per (report, scenario)
  CHECK_THAT(rows, Contains("\r\n#19999,condition_heavy_both_heads,"));
}

TEST_CASE("synthetic runs are byte-identical across threads, chunk sizes and precision-independent options", "[engine][determinism]") {
  TempDir dir;
  std::string first_rows, first_summary;
  for (auto [threads, chunk] : {std::pair{1, 8192}, {2, 1000}, {2, 333}, {3, 4096}}) {
    const std::string rows = dir.file("r.jsonl"), summ = dir.file("s.json");
    auto r = run_cli(kSynth + "-p reports=30000 -p seed=11 -p min_tokens=2 -p max_tokens=9 -q --threads " +
                     std::to_string(threads) + " --chunk " + std::to_string(chunk) + " --per-report " + shell_quote(rows) +
                     " --summary " + shell_quote(summ));
    REQUIRE(r.status == 0);
    if (first_rows.empty()) {
      first_rows = read_file(rows);
      first_summary = summary_text(summ);
      REQUIRE(first_rows.size() > 1000000);
    } else {
      INFO("threads " << threads << " chunk " << chunk);
      CHECK(read_file(rows) == first_rows);
      CHECK(summary_text(summ) == first_summary);  // but for run.execution
    }
  }
}

TEST_CASE("without --chunk a batch holds about 1 MiB of tokens, --chunk is kept, the same bytes either way",
          "[engine][determinism]") {
  TempDir dir;
  // The main job: ~4.5 tokens x (3 features + 2 axes + 3 designs x 3 weight rows) x 8 B ≈ 500 B a
  // report, so ~2100 reports a batch instead of 8192.
  auto batches = [&](const std::string& chunk, const std::string& path) {
    auto r = run_cli(kSynth + "-p reports=100000 -p seed=7 -q --profile --threads 2 " + chunk + " --summary " +
                     shell_quote(path));
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(read_file(path))["profile"]["batches"].get<std::size_t>();
  };
  const std::size_t fitted = batches("", dir.file("a.json")), asked = batches("--chunk 8192", dir.file("b.json"));
  CHECK(asked == 13);                     // ceil(100000 / 8192): --chunk as given
  CHECK((fitted >= 40 && fitted <= 60));  // 100000 / ~2100
  auto numbers = [&](const std::string& path) {
    auto j = nlohmann::json::parse(read_file(path));
    j.erase("run"), j.erase("profile");
    return j.dump();
  };
  CHECK(numbers(dir.file("a.json")) == numbers(dir.file("b.json")));
}

TEST_CASE("a summary-only run's memory does not grow with the number of reports", "[engine][memory]") {
  const long small = peak_rss_kib({"run", "--scenario", "ops-reports", "--weighting", "axis-focus", "-p", "reports=50000",
                                   "-q", "--threads", "2"});
  const long large = peak_rss_kib({"run", "--scenario", "ops-reports", "--weighting", "axis-focus", "-p", "reports=2000000",
                                   "-q", "--threads", "2"});
  INFO("peak RSS: 50k reports " << small << " KiB, 2M reports " << large << " KiB");
  CHECK(large < 2 * small);
  // 2M reports x ~5 tokens x 3 features held at once would add >= 240 MB. The bound is on the
  // growth, not the total: AddressSanitizer's shadow and quarantine alone put the total near 100 MB.
  CHECK(large - small < 64 * 1024);
}

TEST_CASE("no progress bar when stderr is not a terminal", "[engine][progress]") {
  // Long enough (> 1 s on this machine) that a bar would be drawn on a terminal.
  auto r = run_cli(kSynth + "-p reports=3000000 --threads 2");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Contains("3000000 reports"));
}

TEST_CASE("bad engine options are usage errors", "[engine][cli]") {
  CHECK(run_cli(kSynth + "--per-report out.parquet").status == 2);
  CHECK(run_cli(kSynth + "--precision f16").status == 2);
  CHECK(run_cli(kSynth + "--simd neon").status == 2);
  CHECK(run_cli(kSynth + "--chunk 0").status == 2);
}

TEST_CASE("text rows of a generated set: report count instead of CSV row counts, one block per report", "[engine][cli]") {
  auto r = run_cli("run --scenario ops-reports --weighting uniform -p reports=5 --format text");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::StartsWith("reports = 5\ncontext_axes = ['decision_axis', 'evidence_condition_axis']\n\n[uniform]\n"
                                      "report_id = '#0'\n"));
  CHECK_THAT(r.out, Contains("report_id = '#4'") && Contains("head_separation = 0.0"));
}
