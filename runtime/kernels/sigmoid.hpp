// Private: x / (1 + e^-z) in plain branch-free float arithmetic, the shared form of GPT-2's GELU
// (0.5 x (1 + tanh u) = x / (1 + e^-2u)) and Llama's SiLU (g / (1 + e^-g)). libm's tanhf/expf kept
// those loops scalar (26 % of a GPT-2 forward at width 768); written out, a loop over it vectorises
// under target_clones with the same bits at every level (-ffp-contract=off: no level fuses).
#pragma once
#include <bit>
#include <cstdint>

namespace headsep::kernels {

/// e^y, y clamped to [-87.3, 88] first (e^y then stays a normal float): Cephes' expf polynomial on
/// y - n ln2 (|r| <= ln2 / 2, relative error < 2e-7) times 2^n, n = round(y / ln2) added to the
/// exponent bits. The callers need 1 + e^y only, where the clamp changes nothing representable.
[[gnu::always_inline]] inline float exp_clamped(float y) noexcept {
  y = y < -87.3f ? -87.3f : (y > 88.0f ? 88.0f : y);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float t = y * 1.44269504088896341f + magic;
  const float n = t - magic;
  float r = y - n * 0.693359375f;  // ln2 in two parts: n * 0.693359375 is exact for |n| <= 128
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // t's low bits hold n (two's complement): shifted into the exponent field, the high bits drop out.
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(p) + (std::bit_cast<std::uint32_t>(t) << 23));
}

/// x / (1 + e^-z).
[[gnu::always_inline]] inline float times_sigmoid(float x, float z) noexcept { return x / (1.0f + exp_clamped(-z)); }

/// GPT-2's GELU ("gelu_new"): 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) = x / (1 + e^(-2u)).
[[gnu::always_inline]] inline float gelu_tanh_ref(float x) noexcept {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return times_sigmoid(x, 2.0f * u);
}

}  // namespace headsep::kernels
