// headsep/finite.hpp and support/float_bits.hpp: the bit tests every validation pass uses must
// agree with std::isfinite on each special value, at every position of a buffer (vector bodies
// and their scalar tails), for floats and doubles.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "headsep/finite.hpp"
#include "support/float_bits.hpp"

namespace {

template <class T>
std::vector<T> specials() {
  using L = std::numeric_limits<T>;
  return {L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN(),
          headsep::detail::unwritten(), L::max(), -L::max(), L::denorm_min(), L::min(), T(0), -T(0)};
}

template <class T>
void check_positions() {
  for (const T bad : specials<T>()) {
    for (std::size_t n : {1, 2, 7, 8, 15, 16, 17, 33, 64, 65}) {
      for (std::size_t at = 0; at < n; ++at) {
        std::vector<T> v(n, T(1.5));
        v[at] = bad;
        const bool finite = std::isfinite(bad);
        INFO("value " << double(bad) << " at " << at << " of " << n);
        CHECK(headsep::any_non_finite(v.data(), n) == !finite);
        if constexpr (std::is_same_v<T, float>) CHECK(headsep::first_non_finite(v.data(), n) == (finite ? n : at));
        CHECK(bool(headsep::nonfinite_bit(bad) >> (8 * sizeof(T) - 1)) == !finite);
      }
    }
  }
}

}  // namespace

TEST_CASE("the non-finite bit tests agree with std::isfinite on every special float and double, anywhere in a buffer",
          "[finite]") {
  check_positions<float>();
  check_positions<double>();
  const std::vector<double> empty;
  CHECK_FALSE(headsep::any_non_finite(empty.data(), 0));
}

TEST_CASE("negative_bit is set for every negative double but -0.0", "[finite]") {
  using headsep::detail::negative_bit;
  for (double x : {-1.0, -std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::infinity(), -1e308})
    CHECK(negative_bit(x) >> 63);
  for (double x : {0.0, -0.0, 1.0, std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::infinity()})
    CHECK_FALSE(negative_bit(x) >> 63);
}
