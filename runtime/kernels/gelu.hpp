// Private: BERT's GELU, 0.5 x (1 + erf(x / √2)), erf by the rational approximation XLA and Eigen use
// for float (odd numerator of degree 13 over an even denominator of degree 8, the argument clamped
// to [-4, 4] where erf is ±1 in float), |error| < 1e-6. One definition of the coefficients for
// gelu_inplace (model/bert.cpp), the panel kernel's fused epilogue (attention_simd_impl.hpp) and
// its scalar reference (attention_dispatch.cpp).
#pragma once

namespace headsep::kernels {

inline constexpr float kGeluP[7] = {-2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f,
                                    -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                                    -1.60960333262415e-02f};
inline constexpr float kGeluQ[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                                    -7.37332916720468e-03f, -1.42647390514189e-02f};

/// The scalar reference (and gelu_inplace's loop body): unfused multiply-adds, Horner order.
[[gnu::always_inline]] inline float gelu_ref(float in) noexcept {
  float x = in * 0.70710678118654752f;
  x = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  const float x2 = x * x;
  float p = x2 * kGeluP[0] + kGeluP[1];
  for (int i = 2; i < 7; ++i) p = x2 * p + kGeluP[i];
  p = x * p;
  float q = x2 * kGeluQ[0] + kGeluQ[1];
  for (int i = 2; i < 5; ++i) q = x2 * q + kGeluQ[i];
  return 0.5f * in * (1.0f + p / q);
}

}  // namespace headsep::kernels
