// Private: the engine's progress bar on stderr (RunOptions::progress), redrawn at most every
// 200 ms once a run has taken a second.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace headsep::engine {

using Clock = std::chrono::steady_clock;

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()), last_(start_) {}
  void update(std::uint64_t reports, std::uint64_t total_hint) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(200) || now - start_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = reports / secs;
    char line[160];
    if (total_hint) {
      const double frac = double(reports) / double(total_hint);
      const int filled = int(frac * 30);
      std::string bar(static_cast<std::size_t>(filled), '#');
      bar.resize(30, '.');
      std::snprintf(line, sizeof line, "\r[%s] %5.1f%%  %llu reports  %.3g reports/s  ETA %.0fs ", bar.c_str(),
                    100 * frac, static_cast<unsigned long long>(reports), rate, (total_hint - reports) / rate);
    } else {
      std::snprintf(line, sizeof line, "\r%llu reports  %.3g reports/s ", static_cast<unsigned long long>(reports), rate);
    }
    std::fputs(line, stderr);
    shown_ = true;
  }
  void done() {
    if (shown_) std::fputs("\n", stderr);
  }

 private:
  bool enabled_, shown_ = false;
  Clock::time_point start_, last_;
};

}  // namespace headsep::engine
