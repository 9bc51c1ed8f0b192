// Private: the plain scalar reference kernel. It is the oracle for every SIMD level, and SIMD
// levels use it for the reports a vector tile does not cover. It mirrors the seed's Python
// arithmetic: sums start at +0.0 and add tokens in order; products are not fused.
#pragma once
#include <cmath>
#include <cstddef>

#include "headsep/kernels.hpp"

namespace headsep::kernels {

template <class T>
void metrics_scalar(const KernelArgs<T>& a, std::size_t r_begin, std::size_t r_end) {
  const std::size_t C = a.axes, H = std::size_t(a.heads) + 1, S = a.stride;
  for (std::size_t r = r_begin; r < r_end; ++r) {
    const std::size_t b = static_cast<std::size_t>(a.token_offset[r]);
    const std::size_t e = static_cast<std::size_t>(a.token_offset[r + 1]);
    for (std::size_t h = a.baseline_given ? 1 : 0; h < H; ++h) {
      const T* w = a.weight[h];
      for (std::size_t c = 0; c < C; ++c) {
        const T* x = a.axis[c];
        T s = T(0);
        for (std::size_t t = b; t < e; ++t) s += w[t] * x[t];
        a.context[(h * C + c) * S + r] = s;
      }
    }
    for (std::size_t h = 1; h < H; ++h)
      for (std::size_t c = 0; c < C; ++c)
        a.difference[((h - 1) * C + c) * S + r] = a.context[(h * C + c) * S + r] - a.context[c * S + r];
    T total = T(0);
    std::size_t p = 0;
    for (std::size_t i = 1; i < H; ++i)
      for (std::size_t j = i + 1; j < H; ++j, ++p) {
        T d2 = T(0);
        for (std::size_t c = 0; c < C; ++c) {
          const T d = a.context[(i * C + c) * S + r] - a.context[(j * C + c) * S + r];
          d2 += d * d;
        }
        const T dist = std::sqrt(d2);
        a.pairwise[p * S + r] = dist;
        total += dist;
      }
    a.separation[r] = p ? total / T(p) : T(0);
    if (a.nonfinite) {  // x - x is 0 for finite x, NaN for NaN and infinities
      T acc = a.separation[r] - a.separation[r];
      for (std::size_t i = 0; i < H * C; ++i) acc += a.context[i * S + r] - a.context[i * S + r];
      if (acc != acc) *a.nonfinite = true;
    }
  }
}

}  // namespace headsep::kernels
