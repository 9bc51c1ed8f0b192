// Chooses a kernel level at run time. HEADSEP_SIMD forces one (tests, bug reports).
#include <cstdlib>

#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "metrics_scalar.hpp"

namespace headsep {

std::string_view to_string(SimdLevel level) noexcept {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::sse2: return "sse2";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "?";
}

SimdLevel parse_simd_level(std::string_view name) {
  for (auto l : {SimdLevel::scalar, SimdLevel::sse2, SimdLevel::avx2, SimdLevel::avx512})
    if (name == to_string(l)) return l;
  throw UsageError("unknown SIMD level '" + std::string(name) + "' (expected scalar, sse2, avx2 or avx512)");
}

std::vector<SimdLevel> compiled_levels() { return {SimdLevel::scalar}; }
std::vector<SimdLevel> supported_levels() { return {SimdLevel::scalar}; }

SimdLevel default_level() {
  if (const char* env = std::getenv("HEADSEP_SIMD"); env && *env) {
    SimdLevel l = parse_simd_level(env);
    for (auto s : supported_levels())
      if (s == l) return l;
    throw UsageError("HEADSEP_SIMD=" + std::string(env) + " is not supported on this CPU/build");
  }
  return supported_levels().back();
}

void compute_metrics(const KernelArgs<double>& a, SimdLevel) { kernels::metrics_scalar(a, 0, a.n_reports); }
void compute_metrics(const KernelArgs<float>& a, SimdLevel) { kernels::metrics_scalar(a, 0, a.n_reports); }

}  // namespace headsep
