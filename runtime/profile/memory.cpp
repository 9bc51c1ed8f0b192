// The memory lines of --profile (profile/memory.hpp).
#include "profile/memory.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace headsep::prof {

namespace {
/// A "Key:  123 kB" line of /proc/self/status in bytes (0 when absent).
std::uint64_t status_kb(const char* key) noexcept {
  try {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string k = key;
    while (std::getline(in, line))
      if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
  } catch (...) {
  }
  return 0;
}
}  // namespace

std::uint64_t rss_bytes() noexcept { return status_kb("VmRSS:"); }

std::uint64_t peak_rss_bytes() noexcept {
  if (const std::uint64_t b = status_kb("VmHWM:")) return b;
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) == 0 && u.ru_maxrss > 0) return std::uint64_t(u.ru_maxrss) * 1024;  // KiB on Linux
  return 0;
}

std::string memory_line(const WeightMemory& w, std::uint64_t peak_rss) {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  char buf[256];
  std::string s;
  if (w.file) {
    std::snprintf(buf, sizeof buf, "weights: %.3f GiB held (products %s) from %.3f GiB of safetensors (%.2fx); ", w.held / GiB,
                  w.linear.c_str(), w.file / GiB, double(w.held) / double(w.file));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "peak RSS %.3f GiB", peak_rss / GiB);
  s += buf;
  if (w.file) {
    std::snprintf(buf, sizeof buf, " (%.2fx the safetensors)", double(peak_rss) / double(w.file));
    s += buf;
  }
  if (w.rss_loaded) {  // what the run added on top of the loaded model: its batches' activations
    std::snprintf(buf, sizeof buf, "; when loaded: RSS %.3f GiB, peak %.3f GiB", w.rss_loaded / GiB, w.peak_loaded / GiB);
    s += buf;
  }
  return s + "\n";
}

}  // namespace headsep::prof
