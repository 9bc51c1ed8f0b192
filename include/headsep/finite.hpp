// headsep — finding Inf and NaN in float buffers, for validation passes over whole inputs.
//
// A compare per value (std::isfinite) keeps such loops scalar; the integer test on the exponent
// bits vectorizes, so the clean case (nearly every call) is one OR-reduction over the buffer.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace headsep {

/// Bit 63 set iff x is Inf or NaN: an all-ones exponent plus one exponent unit carries into bit 63.
constexpr std::uint64_t nonfinite_bit(double x) noexcept {
  return (std::bit_cast<std::uint64_t>(x) & 0x7FF0000000000000ull) + 0x0010000000000000ull;
}

/// Bit 31 set iff x is Inf or NaN (the float form of the same carry).
constexpr std::uint32_t nonfinite_bit(float x) noexcept {
  return (std::bit_cast<std::uint32_t>(x) & 0x7F800000u) + 0x00800000u;
}

/// True when some v[i] of count values is Inf or NaN: one OR-reduction, no branch per value.
template <class T>
bool any_non_finite(const T* v, std::size_t count) noexcept {
  decltype(nonfinite_bit(T{})) bad = 0;
  for (std::size_t i = 0; i < count; ++i) bad |= nonfinite_bit(v[i]);
  return bad >> (8 * sizeof(bad) - 1);
}

/// Index of the first Inf or NaN among v[0..count), or count when every value is finite.
inline std::size_t first_non_finite(const float* v, std::size_t count) noexcept {
  if (!any_non_finite(v, count)) return count;
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(v[i])) return i;
  return count;
}

}  // namespace headsep
