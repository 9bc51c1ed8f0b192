// headsep — finding Inf and NaN in float buffers, for validation passes over whole inputs.
//
// A compare per value (std::isfinite) keeps such loops scalar; the integer test on the exponent
// bits vectorizes, so the clean case (nearly every call) is one OR-reduction over the buffer.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace headsep {

/// Index of the first Inf or NaN among v[0..count), or count when every value is finite.
inline std::size_t first_non_finite(const float* v, std::size_t count) noexcept {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t b;
    std::memcpy(&b, v + i, 4);
    bad |= static_cast<std::uint32_t>((b & 0x7f800000u) == 0x7f800000u);
  }
  if (!bad) return count;
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(v[i])) return i;
  return count;
}

/// True when some v[i] of count doubles is Inf or NaN (bit 63 of exponent + one unit: all ones).
inline bool any_non_finite(const double* v, std::size_t count) noexcept {
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t b;
    std::memcpy(&b, v + i, 8);
    bad |= (b & 0x7FF0000000000000ull) + 0x0010000000000000ull;
  }
  return bad >> 63;
}

}  // namespace headsep
