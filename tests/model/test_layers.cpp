// The decoders' activations (runtime/model/layers.cpp over kernels/sigmoid.hpp): GPT-2's tanh GELU
// and SwiGLU against the exact forms in double, and the vectorised loops (the clone this CPU runs)
// bit-equal to the scalar reference at every length, so no tail or lane changes a bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "headsep/architecture.hpp"
#include "kernels/sigmoid.hpp"

using namespace headsep;

namespace {

std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -24000; i <= 24000; ++i) x.push_back(static_cast<float>(i) * 5e-4f);  // [-12, 12]
  for (float v : {-1e4f, -200.0f, -90.0f, -44.0f, 44.0f, 90.0f, 200.0f, 1e4f, 1e-30f, -1e-30f, 0.0f, -0.0f})
    x.push_back(v);
  return x;
}

// |got - want| / max(1, |x|): GELU and SiLU are ~x for large x, ~0 for very negative x.
double scaled_error(float x, float got, double want) { return std::abs(double(got) - want) / std::max(1.0, std::abs(double(x))); }

}  // namespace

TEST_CASE("exp_clamped: within 2 ulp of e^x over the floats it keeps normal", "[decoder][layers]") {
  double worst = 0;
  for (float y = -87.0f; y <= 87.9f; y += 0.013f) {
    const double want = std::exp(double(y));
    worst = std::max(worst, std::abs(double(kernels::exp_clamped(y)) - want) / want);
  }
  CAPTURE(worst);
  CHECK(worst < 2.4e-7);
  CHECK(kernels::exp_clamped(0.0f) == 1.0f);
  CHECK(std::isfinite(kernels::exp_clamped(1e30f)));
  CHECK(kernels::exp_clamped(-1e30f) > 0.0f);
}

TEST_CASE("GPT-2's tanh GELU and SwiGLU: within 3e-7 of the exact forms", "[decoder][layers]") {
  const auto x = inputs();
  std::vector<float> y = x;
  gelu_tanh_inplace(y.data(), y.size());
  double worst_gelu = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], want = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    worst_gelu = std::max(worst_gelu, scaled_error(x[i], y[i], want));
  }
  CAPTURE(worst_gelu);
  CHECK(worst_gelu < 3e-7);
  // SwiGLU over rows [gate | up] of n = x.size() / 2.
  const std::size_t n = x.size() / 2;
  std::vector<float> out(n);
  swiglu_rows(x.data(), out.data(), 1, n);
  double worst_silu = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = x[i], want = g / (1.0 + std::exp(-g)) * double(x[n + i]);
    worst_silu = std::max(worst_silu, std::abs(double(out[i]) - want) / std::max(1.0, std::abs(want)));
  }
  CAPTURE(worst_silu);
  CHECK(worst_silu < 3e-7);
}

TEST_CASE("the vectorised activations equal their scalar reference bit for bit at every length", "[decoder][layers]") {
  const auto x = inputs();
  for (std::size_t len : {1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000}) {
    for (std::size_t off : {0, 1, 3}) {  // unaligned starts
      CAPTURE(len, off);
      std::vector<float> y(x.begin() + off, x.begin() + off + len);
      gelu_tanh_inplace(y.data(), len);
      for (std::size_t i = 0; i < len; ++i) {
        const float want = kernels::gelu_tanh_ref(x[off + i]);
        if (std::memcmp(&y[i], &want, sizeof want) != 0) FAIL_CHECK("gelu_tanh at " << i << ": " << y[i] << " vs " << want);
      }
      std::vector<float> gu(x.begin() + off, x.begin() + off + 2 * len), out(len);
      swiglu_rows(gu.data(), out.data(), 1, len);
      for (std::size_t i = 0; i < len; ++i) {
        const float want = kernels::times_sigmoid(gu[i], gu[i]) * gu[len + i];
        if (std::memcmp(&out[i], &want, sizeof want) != 0) FAIL_CHECK("swiglu at " << i << ": " << out[i] << " vs " << want);
      }
    }
  }
}
