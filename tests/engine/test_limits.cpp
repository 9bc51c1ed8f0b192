// Pathological inputs (docs/LIMITS.md): each runs in bounded memory or is refused with a message,
// never an out-of-memory kill. Peak memory is the child's ru_maxrss from wait4. The full-size
// versions (a 1 GB field, a 10 GB CSV, 4 M-row reports) are a manual check: scripts/limits.sh.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "test_util.hpp"

using namespace testutil;
using Catch::Contains;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEADSEP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEADSEP_TEST_SANITIZED 1
#endif
#endif

namespace {

// Under a sanitizer, shadow memory inflates every peak and runs are several times slower: the
// memory bounds are checked in the plain build; sanitized builds check outcomes and messages.
#ifdef HEADSEP_TEST_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#define CHECK_PEAK(run, kib) \
  if (!kSanitized) CHECK((run).peak_kib < (kib))

// The CLI in a child, stdout discarded; exit status, peak RSS (KiB) and stderr.
Result run_measured(const std::vector<std::string>& args) {
  ChildLimits lim;
  lim.stdout_path = "/dev/null";
  return run_child(args, lim);
}

const std::string kHeader = "report_id,scenario,token,decision_axis,evidence_axis,single_weight,head1_weight,head2_weight";

// Streams `rows` generated rows to PATH in 1 MiB blocks.
template <class Row>
void write_csv(const std::string& path, const std::string& header, std::uint64_t rows, Row row) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::string buf = header + "\n";
  for (std::uint64_t i = 0; i < rows; ++i) {
    row(buf, i);
    if (buf.size() > (1u << 20)) {
      REQUIRE(std::fwrite(buf.data(), 1, buf.size(), f) == buf.size());
      buf.clear();
    }
  }
  REQUIRE(std::fwrite(buf.data(), 1, buf.size(), f) == buf.size());
  REQUIRE(std::fclose(f) == 0);
}

std::vector<std::string> csv_run(const std::string& path) {
  return {"run", "--input", path, "--axes", "d=decision_axis;e=evidence_axis", "-q", "--threads", "2", "--summary", "/dev/null"};
}

}  // namespace

TEST_CASE("a field beyond the 16 MiB row limit is refused after 16 MiB, a 15 MiB field passes", "[limits]") {
  TempDir dir;
  const std::string big = dir.file("big.csv"), ok = dir.file("ok.csv");
  const std::string mib(1 << 20, 'x');
  write_csv(big, kHeader + ",note", 1, [&](std::string& b, std::uint64_t) {
    b += "r0,s,t,1,2,0.5,0.25,0.25,";
    for (int i = 0; i < 64; ++i) b += mib;  // 64 MiB unquoted
    b += '\n';
  });
  write_csv(ok, kHeader + ",note", 2, [&](std::string& b, std::uint64_t i) {
    b += "r" + std::to_string(i) + ",s,t,1,2,0.5,0.25,0.25,\"";
    if (i == 0)
      for (int k = 0; k < 15; ++k) b += mib;  // 15 MiB quoted
    b += "\"\n";
  });
  const Result refused = run_measured(csv_run(big));
  INFO(refused.err);
  CHECK(refused.status == 1);
  CHECK_THAT(refused.err, Contains(":2: row of more than 16 MiB (field 9); rows are limited to 16 MiB"));
  CHECK_PEAK(refused, 128 * 1024);
  const Result passed = run_measured(csv_run(ok));
  CHECK(passed.status == 0);
  CHECK_PEAK(passed, 128 * 1024);
}

TEST_CASE("30000 head columns are refused at the header, 1024 heads run in bounded memory", "[limits]") {
  TempDir dir;
  auto header = [](int heads) {
    std::string h = "report_id,scenario,token,decision_axis,evidence_axis,single_weight";
    for (int k = 1; k <= heads; ++k) h += ",head" + std::to_string(k) + "_weight";
    return h;
  };
  write_csv(dir.file("30k.csv"), header(30000), 1, [](std::string& b, std::uint64_t) {
    b += "r0,s,t,1,2,0.5";
    for (int k = 0; k < 30000; ++k) b += ",0.1";
    b += '\n';
  });
  const Result refused = run_measured(csv_run(dir.file("30k.csv")));
  CHECK(refused.status == 1);
  CHECK_THAT(refused.err, Contains("column 'head1025_weight': more than 1024 head columns; at most 1024 heads"));
  // 300 reports x 1024 heads: 523 776 pairwise separations per report, 1.26 GB in one batch of
  // the default chunk; the engine shrinks the chunk to keep a batch's metrics near 64 MiB.
  write_csv(dir.file("1024.csv"), header(1024), 900, [](std::string& b, std::uint64_t i) {
    b += "r" + std::to_string(i / 3) + ",s,t" + std::to_string(i % 3) + "," + std::to_string(i % 3) + "," +
         std::to_string(i % 5) + ",0.5";
    for (int k = 0; k < 1024; ++k) b += k % 2 ? ",0.3" : ",0.7";
    b += '\n';
  });
  const Result ok = run_measured(csv_run(dir.file("1024.csv")));
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK_PEAK(ok, 400 * 1024);
  // The same through a plugin: uniform with 1024 heads over generated reports.
  const Result plugin = run_measured({"run", "-s", "ops-reports", "-w", "uniform", "-p", "heads=1024", "-p", "reports=200", "-q",
                                   "--threads", "2", "--summary", "/dev/null"});
  CHECK(plugin.status == 0);
  CHECK_PEAK(plugin, 400 * 1024);
}

TEST_CASE("a million tokens in one report: memory linear in the report, small constant", "[limits]") {
  if (kSanitized) return;  // a memory bound only
  TempDir dir;
  write_csv(dir.file("m.csv"), kHeader, 1000000, [](std::string& b, std::uint64_t i) {
    b += "r0,s,tok" + std::to_string(i) + "," + std::to_string(i % 7) + "," + std::to_string(i % 5) + ",0.5,0.25,0.25\n";
  });
  const Result r = run_measured(csv_run(dir.file("m.csv")));
  INFO(r.err);
  CHECK(r.status == 0);
  // Measured 265 MB (it was 398 MB with a struct of strings and vectors per buffered row).
  CHECK_PEAK(r, 360 * 1024);
}

TEST_CASE("streaming: peak memory does not grow with the number of reports in a CSV", "[limits][memory]") {
  if (kSanitized) return;  // a memory bound only
  TempDir dir;
  auto gen = [&](const std::string& path, std::uint64_t reports) {
    write_csv(path, kHeader, reports, [](std::string& b, std::uint64_t i) {
      b += "r" + std::to_string(i) + ",s,t," + std::to_string(i % 7) + ",1,0.5,0.25,0.25\n";
    });
  };
  // Both sizes are past the 2^20 reports the report-id check keeps in memory: above that, ids
  // spill to a temporary file (the hash set that held them grew ~40 bytes per report).
  gen(dir.file("small.csv"), 1200000);
  gen(dir.file("large.csv"), 3600000);
  const Result small = run_measured(csv_run(dir.file("small.csv")));
  const Result large = run_measured(csv_run(dir.file("large.csv")));
  INFO("peak RSS: 1.2 M reports " << small.peak_kib << " KiB, 3.6 M reports " << large.peak_kib << " KiB");
  CHECK(small.status == 0);
  CHECK(large.status == 0);
  CHECK(large.peak_kib < small.peak_kib + 16 * 1024);
}

TEST_CASE("a report resuming after more than a million others is still refused, naming both lines", "[limits]") {
  TempDir dir;
  const std::uint64_t others = 1100000;
  write_csv(dir.file("resumed.csv"), kHeader, others + 2, [&](std::string& b, std::uint64_t i) {
    const std::string id = i == 0 || i == others + 1 ? "again" : "r" + std::to_string(i);
    b += id + ",s,t,1,1,0.5,0.25,0.25\n";
  });
  const Result r = run_measured(csv_run(dir.file("resumed.csv")));
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("resumed.csv:" + std::to_string(others + 3) +
                             ": column 'report_id': rows of the report that began at line 2 resume after other reports"));
  // Within the last million reports the id itself is named, at once.
  write_csv(dir.file("near.csv"), kHeader, 5, [](std::string& b, std::uint64_t i) {
    b += std::string(i == 0 || i == 4 ? "again" : "r" + std::to_string(i)) + ",s,t,1,1,0.5,0.25,0.25\n";
  });
  const Result near = run_measured(csv_run(dir.file("near.csv")));
  CHECK(near.status == 1);
  CHECK_THAT(near.err, Contains("near.csv:6: column 'report_id': rows of report 'again' resume after other reports (its rows "
                                "began at line 2)"));
}

TEST_CASE("random access: long reports shrink the batch instead of multiplying it by --chunk", "[limits][memory]") {
  if (kSanitized) return;  // a memory bound only
  // 300 reports of 65 536 tokens: one batch of the default chunk would hold 19.7 M tokens
  // (~1.4 GB); sampled first reports size the chunk to ~128 MiB of token data.
  const Result r = run_measured({"run", "-s", "ops-reports", "-w", "uniform", "-p", "min_tokens=65536", "-p", "max_tokens=65536", "-p",
                              "reports=300", "-q", "--threads", "2", "--summary", "/dev/null"});
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK_PEAK(r, 700 * 1024);
}
