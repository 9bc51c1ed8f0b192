// Layers the architectures share (headsep/architecture.hpp): LayerNorm (BERT, GPT-2) with its
// vector levels, RMSNorm (Llama), the GELUs (BERT's erf, GPT-2's tanh) and SwiGLU (Llama).
#include <cmath>
#include <cstddef>

#include "headsep/architecture.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/gelu.hpp"

namespace headsep {
namespace {

/// The vector levels' LayerNorm (layer_norm_rows): the row's sums in 8 interleaved double partial
/// sums (lane j takes elements i ≡ j mod 8, combined as a tree), so the compiler vectorises them
/// (one zmm of doubles on AVX-512) where the reference's single chain cannot be reordered. Inlined
/// into one function per instruction set (target attributes, as gelu_inplace's clones), so no
/// copy compiled with AVX flags is ever shared with baseline code.
[[gnu::always_inline]] inline void layer_norm_body(float* x, const float* residual, std::size_t rows, std::size_t d,
                                                   const float* g, const float* b, double eps) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    if (residual)
      for (std::size_t i = 0; i < d; ++i) row[i] += residual[r * d + i];
    double s[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= d; i += 8)
      for (std::size_t j = 0; j < 8; ++j) s[j] += row[i + j];
    for (std::size_t j = 0; i < d; ++i, ++j) s[j] += row[i];
    const double mean = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) / double(d);
    double v[8] = {};
    for (i = 0; i + 8 <= d; i += 8)
      for (std::size_t j = 0; j < 8; ++j) {
        const double c = row[i + j] - mean;
        v[j] += c * c;
      }
    for (std::size_t j = 0; i < d; ++i, ++j) {
      const double c = row[i] - mean;
      v[j] += c * c;
    }
    const double var = (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))) / double(d);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (i = 0; i < d; ++i) row[i] = (row[i] - m) * inv * g[i] + b[i];
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"))) void layer_norm_avx512(
    float* x, const float* res, std::size_t rows, std::size_t d, const float* g, const float* b, double eps) noexcept {
  layer_norm_body(x, res, rows, d, g, b, eps);
}
__attribute__((target("avx2,fma"))) void layer_norm_avx2(float* x, const float* res, std::size_t rows, std::size_t d,
                                                         const float* g, const float* b, double eps) noexcept {
  layer_norm_body(x, res, rows, d, g, b, eps);
}
#endif

}  // namespace

void layer_norm_rows(SimdLevel level, float* x, const float* residual, std::size_t rows, std::size_t d, const float* g,
                     const float* b, double eps) {
  kernels::require_supported(level);
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512: return layer_norm_avx512(x, residual, rows, d, g, b, eps);
    case SimdLevel::avx2: return layer_norm_avx2(x, residual, rows, d, g, b, eps);
#endif
    case SimdLevel::scalar: break;
    default: return layer_norm_body(x, residual, rows, d, g, b, eps);  // SSE2: the baseline's vectors
  }
  // Reference: one sequential chain per sum.
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    if (residual)
      for (std::size_t i = 0; i < d; ++i) row[i] += residual[r * d + i];
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += row[i];
    const double mean = s / double(d);
    double v = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const double c = row[i] - mean;
      v += c * c;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(v / double(d) + eps));
    const float m = static_cast<float>(mean);
    for (std::size_t i = 0; i < d; ++i) row[i] = (row[i] - m) * inv * g[i] + b[i];
  }
}

// The rational erf of kernels/gelu.hpp, branch-free so the loop vectorises; one clone per
// instruction set. The forward fuses GELU into the FFN product (project_rows' gelu epilogue).
__attribute__((target_clones("avx512f", "avx2", "default"))) void gelu_inplace(float* v, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) v[i] = kernels::gelu_ref(v[i]);
}

void rms_norm_rows(const float* x, float* y, std::size_t rows, std::size_t d, const float* g, double eps) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* in = x + r * d;
    float* out = y + r * d;
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += double(in[i]) * in[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(s / double(d) + eps));
    for (std::size_t i = 0; i < d; ++i) out[i] = g[i] * (in[i] * inv);
  }
}

void gelu_tanh_inplace(float* v, std::size_t n) noexcept {
  const float c = 0.7978845608028654f;  // √(2/π)
  for (std::size_t i = 0; i < n; ++i) {
    const float x = v[i];
    v[i] = 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
  }
}

void swiglu_rows(const float* gu, float* out, std::size_t rows, std::size_t n) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* g = gu + r * 2 * n;
    const float* u = g + n;
    float* o = out + r * n;
    for (std::size_t i = 0; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace headsep
