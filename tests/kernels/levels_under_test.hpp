// The SIMD levels every kernel test runs: each compiled level this CPU supports (the others are
// skipped with a warning). Shared by test_kernels.cpp and the attention tests (attention_cases.hpp).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "headsep/kernels.hpp"

namespace kernel_test {

inline std::vector<headsep::SimdLevel> levels_under_test() {
  std::vector<headsep::SimdLevel> run;
  const auto sup = headsep::supported_levels();
  for (auto l : headsep::compiled_levels()) {
    if (std::find(sup.begin(), sup.end(), l) != sup.end()) run.push_back(l);
    else WARN("SIMD level " << headsep::to_string(l) << " is compiled but not supported by this CPU: skipped");
  }
  return run;
}

}  // namespace kernel_test
