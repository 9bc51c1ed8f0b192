// Private: the body of metrics_kernel<Arch>. Include it ONLY from metrics_<arch>.cpp.
//
// Why the code looks the way it does:
// - Every helper is a template on the architecture A, so each per-arch object file gets its own
//   symbols. A helper that did not depend on A (or a std:: container instantiated here) would be
//   an identical COMDAT in several objects compiled with different flags, and the linker could
//   keep the AVX-512 copy for a machine without AVX-512.
// - Lanes across reports (each lane = one report) keep the scalar reference's order of
//   operations exactly: per lane, s = +0.0, then s = s + w[t]*x[t] for t in order, unfused in
//   f64. So f64 is bit-identical to metrics_scalar at every level. Ragged reports are padded
//   with w = x = +0.0: the running sum is never -0.0 under round-to-nearest (it starts at +0.0),
//   so s + (+0.0*+0.0) == s bit for bit, NaN and infinities included.
// - f32 may fuse (xsimd::fma) and, for long reports, uses lanes across tokens with a
//   horizontal sum: not bit-identical, within the tolerance stated in tests/kernels.
#pragma once
#include <cstddef>

#include "kernels/metrics_simd_k.hpp"
#include "kernels/metrics_simd_ragged.hpp"

namespace headsep::kernels {

template <class Arch>
bool metrics_kernel<Arch>::valid_weights(const double* w, std::size_t n) const noexcept {
  // 0 <= x <= DBL_MAX, as ordered compares: false for NaN, infinities and negatives, true for
  // -0.0. Four vectors per step; the tail one by one.
  using B = xsimd::batch<double, Arch>;
  constexpr std::size_t W = B::size;
  const B zero(0.0), top(1.7976931348623157e308);
  auto in = [&](const B& v) { return (v >= zero) & (v <= top); };
  std::size_t i = 0;
  auto ok = in(B(0.0));
  for (; i + 4 * W <= n; i += 4 * W)
    ok = ok & in(B::load_unaligned(w + i)) & in(B::load_unaligned(w + i + W)) & in(B::load_unaligned(w + i + 2 * W)) &
         in(B::load_unaligned(w + i + 3 * W));
  for (; i + W <= n; i += W) ok = ok & in(B::load_unaligned(w + i));
  bool good = xsimd::all(ok);
  for (; i < n; ++i) good = good && w[i] >= 0.0 && w[i] <= 1.7976931348623157e308;
  return good;
}

template <class Arch>
std::size_t metrics_kernel<Arch>::operator()(const KernelArgs<double>& a, Strategy how) const {
  return simd_detail::K<Arch, double>::run(a, how);
}
template <class Arch>
std::size_t metrics_kernel<Arch>::operator()(const KernelArgs<float>& a, Strategy how) const {
  return simd_detail::K<Arch, float>::run(a, how);
}

}  // namespace headsep::kernels
