// The memory lines of --profile (profile/memory.hpp).
#include "profile/memory.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace headsep::prof {

std::uint64_t peak_rss_bytes() noexcept {
  try {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:  123 kB"
  } catch (...) {
  }
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
  return s + "\n";
}

}  // namespace headsep::prof
