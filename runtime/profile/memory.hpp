// Private: the memory lines of `run --model --profile`: the weights held against the safetensors
// they came from, and the process's peak resident set (bf16 stays bf16: docs/MODEL.md).
#pragma once
#include <cstdint>
#include <string>

#include "headsep/architecture.hpp"

namespace headsep::prof {

/// The process's peak resident set in bytes: VmHWM from /proc/self/status, else getrusage's
/// ru_maxrss (0 when neither can be read).
std::uint64_t peak_rss_bytes() noexcept;
/// The resident set now (VmRSS), bytes; 0 when unreadable.
std::uint64_t rss_bytes() noexcept;

/// "weights: 2.01 GiB held (products bf16) from 2.47 GiB of safetensors (0.81x); peak RSS 2.35 GiB
/// (0.95x the safetensors)" and a newline; without the weights part when `w.file` is 0.
std::string memory_line(const WeightMemory& w, std::uint64_t peak_rss);

}  // namespace headsep::prof
