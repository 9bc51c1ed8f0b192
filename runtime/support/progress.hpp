// The progress bar on stderr, shared by the engine's run() and the model's run_model(): drawn
// once a run has taken a second, redrawn at most every 200 ms, each draw erasing the line
// (ANSI "erase to end of line": a terminal is the only place it is drawn), a last draw at the
// end (100 % when the total is known), human units ("2.1 M reports/s", "ETA 1m05s").
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace headsep::detail {

/// "2.1 M", "950 k", "12.5", "0.38": 2-3 significant digits with an SI prefix.
inline std::string human_count(double v) {
  const char* unit[] = {"", " k", " M", " G", " T"};
  int u = 0;
  while (std::fabs(v) >= 999.5 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 99.5 || (u == 0 && v == std::floor(v)) ? "%.0f%s" : std::fabs(v) >= 9.95 ? "%.1f%s" : "%.2g%s", v, unit[u]);
  return buf;
}

/// "42s", "1m05s", "2h03m".
inline std::string human_seconds(double s) {
  const long long t = s < 0 ? 0 : static_cast<long long>(std::llround(s));
  char buf[32];
  if (t < 60) std::snprintf(buf, sizeof buf, "%llds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  return buf;
}

/// One progress line (no "\r", no erase): `done` of `total` (0: unknown) after `seconds`.
inline std::string progress_line(std::uint64_t done, std::uint64_t total, double seconds, bool final) {
  const double rate = seconds > 0 ? double(done) / seconds : 0.0;
  std::string line;
  if (total) {
    const double frac = final ? 1.0 : std::min(1.0, double(done) / double(total));
    std::string bar(static_cast<std::size_t>(frac * 30), '#');
    bar.resize(30, '.');
    char pct[16];
    std::snprintf(pct, sizeof pct, "%5.1f%%", 100 * frac);
    line = "[" + bar + "] " + pct + "  " + human_count(double(done)) + " reports  " + human_count(rate) + " reports/s";
    line += final ? "  in " + human_seconds(seconds) : rate > 0 ? "  ETA " + human_seconds(double(total - std::min(total, done)) / rate) : "";
  } else {
    line = human_count(double(done)) + " reports  " + human_count(rate) + " reports/s" + (final ? "  in " + human_seconds(seconds) : "");
  }
  return line;
}

using Clock = std::chrono::steady_clock;

class Progress {
 public:
  explicit Progress(bool enabled, std::FILE* out = stderr) : enabled_(enabled), out_(out), start_(Clock::now()), last_(start_) {}
  void update(std::uint64_t reports, std::uint64_t total) { update(reports, total, Clock::now()); }
  void update(std::uint64_t reports, std::uint64_t total, Clock::time_point now) {
    if (!enabled_) return;
    if (now - last_ < std::chrono::milliseconds(200) || now - start_ < std::chrono::seconds(1)) return;
    last_ = now;
    draw(progress_line(reports, total, std::chrono::duration<double>(now - start_).count(), false));
  }
  /// The last line (when one was drawn): the final count and time, 100 % with a known total.
  void done(std::uint64_t reports, std::uint64_t total) { done(reports, total, Clock::now()); }
  void done(std::uint64_t reports, std::uint64_t total, Clock::time_point now) {
    if (!shown_) return;
    draw(progress_line(reports, total, std::chrono::duration<double>(now - start_).count(), !total || reports >= total));
    std::fputs("\n", out_);
    shown_ = false;
  }
  /// A run that failed ends the line without claiming completion (the error message follows).
  ~Progress() {
    if (shown_) std::fputs("\n", out_);
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  Clock::time_point start() const noexcept { return start_; }

 private:
  void draw(const std::string& line) {
    std::fputs(("\r" + line + "\x1b[K").c_str(), out_);
    std::fflush(out_);
    shown_ = true;
  }
  bool enabled_, shown_ = false;
  std::FILE* out_;
  Clock::time_point start_, last_;
};

}  // namespace headsep::detail
