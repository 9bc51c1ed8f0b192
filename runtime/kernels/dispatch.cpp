// Chooses a kernel level at run time. HEADSEP_SIMD forces one (tests, bug reports).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>

#include "support/float_bits.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "kernels/metrics_scalar.hpp"
#include "kernels/metrics_simd.hpp"

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

std::vector<SimdLevel> compiled_levels() {
#if HEADSEP_KERNELS_X86
  return {SimdLevel::scalar, SimdLevel::sse2, SimdLevel::avx2, SimdLevel::avx512};
#else
  return {SimdLevel::scalar};
#endif
}

namespace {
// xsimd 8.1 reads CPUID only; __builtin_cpu_supports also checks that the OS saves the
// YMM/ZMM state (XCR0), so a level is supported when both agree.
bool cpu_runs(SimdLevel level) noexcept {
#if HEADSEP_KERNELS_X86
  const auto x = xsimd::available_architectures();
  switch (level) {
    case SimdLevel::scalar: return true;
    case SimdLevel::sse2: return x.sse2;
    case SimdLevel::avx2:
      return x.fma3_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SimdLevel::avx512:
      return x.avx512bw && x.avx512dq && x.avx512cd && x.avx512f && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("fma");
  }
  return false;
#else
  return level == SimdLevel::scalar;
#endif
}
}  // namespace

std::vector<SimdLevel> supported_levels() {
  static const std::vector<SimdLevel> levels = [] {
    std::vector<SimdLevel> v;
    for (auto l : compiled_levels())
      if (cpu_runs(l)) v.push_back(l);
    return v;
  }();
  return levels;
}

SimdLevel default_level() {
  if (const char* env = std::getenv("HEADSEP_SIMD"); env && *env) {
    SimdLevel l = parse_simd_level(env);
    for (auto s : supported_levels())
      if (s == l) return l;
    throw UsageError("HEADSEP_SIMD=" + std::string(env) + " is not supported on this CPU/build");
  }
  return supported_levels().back();
}

void kernels::require_supported(SimdLevel level) {
  // Called per batch: a bit set, not supported_levels()'s vector copy.
  static const unsigned mask = [] {
    unsigned m = 0;
    for (auto s : supported_levels()) m |= 1u << unsigned(s);
    return m;
  }();
  if (mask >> unsigned(level) & 1u) return;
  std::string have;
  for (auto s : supported_levels()) have.append(have.empty() ? "" : ", ").append(to_string(s));
  const auto built = compiled_levels();
  const bool in_build = std::find(built.begin(), built.end(), level) != built.end();
  throw UsageError("SIMD level '" + std::string(to_string(level)) + "' is not " +
                   (in_build ? "supported by this CPU" : "built into this binary") + " (supported: " + have + ")");
}

namespace {

template <class T>
void run_level(const KernelArgs<T>& a, SimdLevel level, [[maybe_unused]] kernels::Strategy how) {
  kernels::require_supported(level);
  std::size_t done = 0;
#if HEADSEP_KERNELS_X86
  switch (level) {
    case SimdLevel::scalar: break;
    case SimdLevel::sse2: done = kernels::metrics_kernel<xsimd::sse2>{}(a, how); break;
    case SimdLevel::avx2: done = kernels::metrics_kernel<kernels::fma3_avx2>{}(a, how); break;
    case SimdLevel::avx512: done = kernels::metrics_kernel<xsimd::avx512bw>{}(a, how); break;
  }
#endif
  // Reports the vector tiles do not cover (fewer than one vector width) go through the reference,
  // slot by slot (a kernel's `done` covers every slot).
  for (std::uint32_t s = 0; s < a.slots; ++s) {
    const KernelArgs<T> as = slot_args(a, s);
    if (s && a.shared_baseline) copy_baseline(a, as, done, a.n_reports);
    kernels::metrics_scalar(as, done, a.n_reports);
  }
}
}  // namespace

bool kernels::valid_weights(const double* w, std::size_t n, SimdLevel level) {
  require_supported(level);
#if HEADSEP_KERNELS_X86
  switch (level) {
    case SimdLevel::scalar: break;
    case SimdLevel::sse2: return kernels::metrics_kernel<xsimd::sse2>{}.valid_weights(w, n);
    case SimdLevel::avx2: return kernels::metrics_kernel<kernels::fma3_avx2>{}.valid_weights(w, n);
    case SimdLevel::avx512: return kernels::metrics_kernel<xsimd::avx512bw>{}.valid_weights(w, n);
  }
#endif
  // Bit 63 set iff some weight is Inf/NaN or negative other than -0.0.
  std::uint64_t acc = 0;
  for (std::size_t t = 0; t < n; ++t) acc |= detail::nonfinite_bit(w[t]) | detail::negative_bit(w[t]);
  return !(acc >> 63);
}

namespace {
// The scalar reference of bucket_keys; also the vector kernels' tail.
void bucket_keys_scalar(const double* x, std::size_t n, std::int64_t N, std::int64_t* key) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = std::bit_cast<std::uint64_t>(x[i]);
    const std::uint64_t mag = u & ~(std::uint64_t(1) << 63);
    if (std::bit_cast<double>(mag) < kernels::kSketchZero) {
      key[i] = 2;
      continue;
    }
    // mantissa < 2^52 and N < 2^12: the product fits in 64 bits.
    const auto sub = static_cast<std::int64_t>(((mag & ((std::uint64_t(1) << 52) - 1)) * std::uint64_t(N)) >> 52);
    key[i] = ((static_cast<std::int64_t>(mag >> 52) - 1023) * N + sub) * 4 + static_cast<std::int64_t>(u >> 63);
  }
}
}  // namespace

void kernels::bucket_keys(const double* x, std::size_t n, std::int64_t subdivisions, std::int64_t* key, SimdLevel level) {
  require_supported(level);
  std::size_t done = 0;
#if HEADSEP_KERNELS_X86
  switch (level) {
    case SimdLevel::scalar: break;
    case SimdLevel::sse2: done = kernels::metrics_kernel<xsimd::sse2>{}.bucket_keys(x, n, subdivisions, key); break;
    case SimdLevel::avx2: done = kernels::metrics_kernel<kernels::fma3_avx2>{}.bucket_keys(x, n, subdivisions, key); break;
    case SimdLevel::avx512: done = kernels::metrics_kernel<xsimd::avx512bw>{}.bucket_keys(x, n, subdivisions, key); break;
  }
#endif
  bucket_keys_scalar(x + done, n - done, subdivisions, key + done);
}

bool kernels::finite_extremes(const double* x, std::size_t n, double& lo, double& hi, SimdLevel level) {
  require_supported(level);
  std::size_t done = 0;
  bool finite = true;
#if HEADSEP_KERNELS_X86
  switch (level) {
    case SimdLevel::scalar: break;
    case SimdLevel::sse2: done = kernels::metrics_kernel<xsimd::sse2>{}.finite_extremes(x, n, lo, hi, finite); break;
    case SimdLevel::avx2: done = kernels::metrics_kernel<kernels::fma3_avx2>{}.finite_extremes(x, n, lo, hi, finite); break;
    case SimdLevel::avx512: done = kernels::metrics_kernel<xsimd::avx512bw>{}.finite_extremes(x, n, lo, hi, finite); break;
  }
#endif
  // The reference (and the tail): finiteness by integer bits, the extremes in four chains (one
  // chain of minsd/maxsd costs its latency per value).
  std::uint64_t bad = finite ? 0 : std::uint64_t(1) << 63;
  double l[4] = {lo, lo, lo, lo}, h[4] = {hi, hi, hi, hi};
  std::size_t i = done;
  for (; i + 4 <= n; i += 4)
    for (std::size_t k = 0; k < 4; ++k) {
      bad |= detail::nonfinite_bit(x[i + k]);
      l[k] = std::min(l[k], x[i + k]);
      h[k] = std::max(h[k], x[i + k]);
    }
  for (; i < n; ++i) {
    bad |= detail::nonfinite_bit(x[i]);
    l[0] = std::min(l[0], x[i]);
    h[0] = std::max(h[0], x[i]);
  }
  lo = std::min(std::min(l[0], l[1]), std::min(l[2], l[3]));
  hi = std::max(std::max(h[0], h[1]), std::max(h[2], h[3]));
  return !(bad >> 63);
}

void compute_metrics(const KernelArgs<double>& a, SimdLevel level) { run_level(a, level, {}); }
void compute_metrics(const KernelArgs<float>& a, SimdLevel level) { run_level(a, level, {}); }

void kernels::compute_metrics(const KernelArgs<double>& a, SimdLevel level, Strategy how) { run_level(a, level, how); }
void kernels::compute_metrics(const KernelArgs<float>& a, SimdLevel level, Strategy how) { run_level(a, level, how); }

}  // namespace headsep
