// The terminal's progress bar (support/progress.hpp): human units, the line's layout, and what a
// run draws on its stream: each draw erases the line, the last one says 100 % and ends the line.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "support/progress.hpp"

using headsep::detail::Clock;
using headsep::detail::human_count;
using headsep::detail::human_seconds;
using headsep::detail::progress_line;
using headsep::detail::Progress;

namespace {

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, got);
  return s;
}

}  // namespace

TEST_CASE("progress: counts and durations in human units", "[progress]") {
  CHECK(human_count(0) == "0");
  CHECK(human_count(7) == "7");
  CHECK(human_count(999) == "999");
  CHECK(human_count(2.1e6) == "2.1 M");
  CHECK(human_count(2e6) == "2 M");
  CHECK(human_count(950e3) == "950 k");
  CHECK(human_count(12.5e3) == "12.5 k");
  CHECK(human_count(16.4) == "16.4");
  CHECK(human_count(3.26e9) == "3.3 G");
  CHECK(human_seconds(4.6) == "5s");
  CHECK(human_seconds(65) == "1m05s");
  CHECK(human_seconds(7380) == "2h03m");
}

TEST_CASE("progress: a line with and without a known total", "[progress]") {
  CHECK(progress_line(500, 1000, 2.0, false) == "[###############...............]  50.0%  500 reports  250 reports/s  ETA 2s");
  CHECK(progress_line(1000, 1000, 4.0, true) == "[##############################] 100.0%  1 k reports  250 reports/s  in 4s");
  CHECK(progress_line(2100000, 0, 1.0, false) == "2.1 M reports  2.1 M reports/s");
  CHECK(progress_line(30, 0, 3.0, true) == "30 reports  10 reports/s  in 3s");
}

TEST_CASE("progress: each draw erases the line, the last says 100 % and ends it", "[progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    Progress p(true, f);
    const auto t0 = p.start();
    p.update(10, 100, t0 + std::chrono::milliseconds(500));   // under a second: nothing
    CHECK(read_all(f).empty());
    p.update(40, 100, t0 + std::chrono::milliseconds(1200));
    p.update(45, 100, t0 + std::chrono::milliseconds(1300));  // within 200 ms of the last draw: nothing
    p.update(90, 100, t0 + std::chrono::milliseconds(1500));
    p.done(100, 100, t0 + std::chrono::milliseconds(1600));
  }
  const std::string out = read_all(f);
  std::fclose(f);
  CHECK(out ==
        "\r[############..................]  40.0%  40 reports  33.3 reports/s  ETA 2s\x1b[K"
        "\r[###########################...]  90.0%  90 reports  60 reports/s  ETA 0s\x1b[K"
        "\r[##############################] 100.0%  100 reports  62.5 reports/s  in 2s\x1b[K\n");
}

TEST_CASE("progress: a short run draws nothing, a failed run ends its line without 100 %", "[progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    Progress quick(true, f);
    quick.update(5, 10, quick.start() + std::chrono::milliseconds(300));
    quick.done(10, 10, quick.start() + std::chrono::milliseconds(400));
  }
  CHECK(read_all(f).empty());
  {
    Progress failing(true, f);
    failing.update(5, 10, failing.start() + std::chrono::seconds(2));
  }  // destroyed without done(): the run threw
  const std::string out = read_all(f);
  std::fclose(f);
  CHECK(out.find("100.0%") == std::string::npos);
  CHECK(out.back() == '\n');
}
