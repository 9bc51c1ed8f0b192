// Classifying doubles by their integer bits, for validation loops over whole batches.
//
// A compare per value (std::isfinite, x >= 0) kept these loops scalar at the baseline ISA; the
// integer and/add/or forms below vectorise with SSE2 already, so a loop can OR them into one
// accumulator and test bit 63 once (it cost 10 % of the main job as a float compare).
#pragma once

#include <bit>
#include <cstdint>

#include "headsep/finite.hpp"

namespace headsep::detail {

// Bit 63 set iff x is Inf or NaN (headsep/finite.hpp, shared with the plugins).
using headsep::nonfinite_bit;

// Bit 63 set iff x is negative other than -0.0: (u - 1) & u keeps the sign bit only for u above
// 0x8000...0 (and 0 - 1 wraps to all ones, but & 0 clears it).
constexpr std::uint64_t negative_bit(double x) noexcept {
  const auto u = std::bit_cast<std::uint64_t>(x);
  return (u - 1) & u;
}

// "Not written": the quiet NaN headsep stores in every buffer a plugin must fill, before the call
// (payload 0xdead5e7a). A check that finds a NaN afterwards tells this one apart from a NaN the
// plugin wrote, so a row, token or value the plugin skipped is refused as "not written".
inline constexpr std::uint64_t kUnwrittenBits = 0x7FF80000DEAD5E7Aull;
inline constexpr std::uint32_t kUnwrittenBits32 = 0x7FC05E7Au;
constexpr double unwritten() noexcept { return std::bit_cast<double>(kUnwrittenBits); }
constexpr float unwritten32() noexcept { return std::bit_cast<float>(kUnwrittenBits32); }
constexpr bool is_unwritten(double x) noexcept { return std::bit_cast<std::uint64_t>(x) == kUnwrittenBits; }
constexpr bool is_unwritten(float x) noexcept { return std::bit_cast<std::uint32_t>(x) == kUnwrittenBits32; }

}  // namespace headsep::detail
