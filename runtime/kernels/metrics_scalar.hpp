// Private: the plain scalar reference kernel. It is the oracle for every SIMD level, and SIMD
// levels use it for the reports a vector tile does not cover. It mirrors the seed's Python
// arithmetic: sums start at +0.0 and add tokens in order; products are not fused.
#pragma once
#include <cmath>
#include <cstddef>

#include "headsep/kernels.hpp"

namespace headsep::kernels {

/// Report r's differences from the baseline (head 0), pairwise context distances and head
/// separation from its contexts (element [h * C + c][r] at (h * C + c) * S + r, h in 0..H1-1).
/// Also the model's per-layer arithmetic (model/model_batch.cpp), so both agree bit for bit.
template <class T>
void separation_scalar(const T* context, T* difference, T* pairwise, T* separation, std::size_t H1,
                       std::size_t C, std::size_t S, std::size_t r) noexcept {
  for (std::size_t h = 1; h < H1; ++h)
    for (std::size_t c = 0; c < C; ++c)
      difference[((h - 1) * C + c) * S + r] = context[(h * C + c) * S + r] - context[c * S + r];
  T total = T(0);
  std::size_t p = 0;
  for (std::size_t i = 1; i < H1; ++i)
    for (std::size_t j = i + 1; j < H1; ++j, ++p) {
      T d2 = T(0);
      for (std::size_t c = 0; c < C; ++c) {
        const T d = context[(i * C + c) * S + r] - context[(j * C + c) * S + r];
        d2 += d * d;
      }
      const T dist = std::sqrt(d2);
      pairwise[p * S + r] = dist;
      total += dist;
    }
  separation[r] = p ? total / T(p) : T(0);
}

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
    separation_scalar(a.context, a.difference, a.pairwise, a.separation, H, C, S, r);
    if (a.nonfinite) {  // x - x is 0 for finite x, NaN for NaN and infinities
      T acc = a.separation[r] - a.separation[r];
      for (std::size_t i = 0; i < H * C; ++i) acc += a.context[i * S + r] - a.context[i * S + r];
      if (acc != acc) *a.nonfinite = true;
    }
  }
}

}  // namespace headsep::kernels
