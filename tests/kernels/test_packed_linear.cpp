// PackedLinear's product (kernels/packed_linear.hpp) with bf16 weights at every level over tail
// sizes: the widening path against the f32 kernel on the widened weights (the same bits), the
// vdpbf16ps path (where the CPU has AVX512-BF16) against X rounded to bf16 times the weights in
// double; nothing written past column N; a row's result independent of the call's other rows.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/levels_under_test.hpp"
#include "headsep/safetensors.hpp"  // f16_to_f32
#include "kernels/gelu.hpp"
#include "kernels/packed_linear.hpp"
#include "test_util.hpp"

using namespace headsep;
using kernel_test::levels_under_test;

namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff

float bf16_value(float v) {
  return std::bit_cast<float>(std::uint32_t(kernels::round_bf16(std::bit_cast<std::uint32_t>(v))) << 16);
}

/// Restores the vdpbf16ps switch however a test ends.
struct DotSwitch {
  explicit DotSwitch(bool on) { kernels::set_bf16_dot(on); }
  ~DotSwitch() { kernels::set_bf16_dot(true); }
};

// Rows past every micro-kernel's (6 on SSE2/AVX2, 8 on AVX-512), K odd and even (the padded last
// pair), columns inside one vector, across slices and past a panel (the stack-tile path).
const std::size_t kMs[] = {1, 2, 5, 6, 7, 8, 9, 13, 17};
const std::size_t kKs[] = {1, 2, 3, 7, 16, 33, 96};
const std::size_t kNs[] = {1, 4, 8, 13, 16, 17, 31, 47, 48, 49, 100};

struct Case {
  std::size_t M, K, N, ldx, ldc;
  std::vector<float> w, bias, x;  // w [N][K] already bf16 values
};

Case make_case(std::mt19937& rng, std::size_t M, std::size_t K, std::size_t N) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Case c{M, K, N, K + 3, N + 5, std::vector<float>(N * K), std::vector<float>(N), std::vector<float>(M * (K + 3))};
  for (auto& v : c.w) v = bf16_value(u(rng));
  for (auto& v : c.bias) v = u(rng);
  for (auto& v : c.x) v = u(rng);
  return c;
}

}  // namespace

TEST_CASE("round_bf16: nearest, ties to even, NaN stays NaN", "[kernels][bf16]") {
  CHECK(kernels::round_bf16(0x3f800000u) == 0x3f80);   // 1.0 exact
  CHECK(kernels::round_bf16(0x3f808000u) == 0x3f80);   // tie, even below
  CHECK(kernels::round_bf16(0x3f818000u) == 0x3f82);   // tie, even above
  CHECK(kernels::round_bf16(0x3f808001u) == 0x3f81);   // past the tie
  CHECK(kernels::round_bf16(0x7f7fffffu) == 0x7f80);   // FLT_MAX rounds to inf, as RNE does
  CHECK((kernels::round_bf16(0x7fc00001u) & 0x7f80) == 0x7f80);
  CHECK((kernels::round_bf16(0x7f800001u) & 0x7f) != 0);  // a signalling NaN's payload kept non-zero
}

TEST_CASE("pack_linear_bf16: every weight where bf16_panel_index says, rounded to nearest even", "[kernels][bf16]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (std::size_t K : {1, 2, 5, 64})
    for (std::size_t N : {1, 17, 49}) {
      std::vector<float> w(N * K), bias(N);
      for (auto& v : w) v = u(rng);
      for (auto& v : bias) v = u(rng);
      const auto p = kernels::pack_linear_bf16(w.data(), bias.data(), N, K);
      REQUIRE(p.type == kernels::WeightType::bf16);
      for (std::size_t n = 0; n < N; ++n) {
        CHECK(p.bias.get()[n] == bias[n]);
        for (std::size_t k = 0; k < K; ++k)
          CHECK(p.bf16.get()[kernels::bf16_panel_index(K, k, n)] == kernels::round_bf16(std::bit_cast<std::uint32_t>(w[n * K + k])));
      }
      CHECK(p.bytes() == (N + 47) / 48 * 48 * (kernels::bf16_pairs(K) * 4 + 4));
    }
}

TEST_CASE("round_f16: every f16 value back to itself, nearest even between them", "[kernels][bf16]") {
  std::size_t bad = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float v = f16_to_f32(static_cast<std::uint16_t>(h));
    const std::uint16_t r = kernels::round_f16(v);
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan ? !((r & 0x7c00) == 0x7c00 && (r & 0x3ff)) : r != h) ++bad;
  }
  CHECK(bad == 0);
  CHECK(kernels::round_f16(1.0f + 0x1p-11f) == 0x3c00);               // tie, even below
  CHECK(kernels::round_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);           // tie, even above
  CHECK(kernels::round_f16(0x1p-25f) == 0x0000);                      // half the least subnormal: to 0 (even)
  CHECK(kernels::round_f16(0x1.8p-25f) == 0x0001);                    // past it
  CHECK(kernels::round_f16(65520.0f) == 0x7c00);                      // past the largest: inf
  CHECK(kernels::round_f16(65504.0f) == 0x7bff);
}

TEST_CASE("bf16 panels, widened: at every level the bits of the f32 kernel on the same weights", "[kernels][bf16]") {
  // The widening is exact and the chain per element the f32 kernel's, so any difference is a bug
  // (the AVX-512 level with vdpbf16ps switched off: what a CPU without AVX512-BF16 runs). f16
  // panels the same way (weights that are f16 values: F16C's widening is exact too). With `gelu`
  // (an encoder's first FFN product) the f32 kernel's fused epilogue, bit for bit.
  const DotSwitch off(false);
  std::mt19937 rng(11);
  std::size_t failures = 0;
  for (const bool f16 : {false, true})
  for (std::size_t K : kKs)
    for (std::size_t N : kNs) {
      Case cs = make_case(rng, 17, K, N);
      if (f16)  // bf16 values are f16 values unless tiny or huge: |w| < 1 here, so f16 exactly
        for (auto& v : cs.w) v = f16_to_f32(kernels::round_f16(v));
      const auto p16 = f16 ? [&] {
        auto p = kernels::alloc_linear_bf16(N, K, kernels::WeightType::f16);
        kernels::pack_rows_bf16(p, cs.w.data(), cs.bias.data(), 0, N);
        return p;
      }()
                           : kernels::pack_linear_bf16(cs.w.data(), cs.bias.data(), N, K);
      const auto p32 = kernels::pack_linear_f32(cs.w.data(), cs.bias.data(), N, K);
      for (std::size_t M : kMs)
        for (auto level : levels_under_test())
        for (const bool gelu : {false, true}) {
          std::vector<float> a(M * cs.ldc, -7.0f), b(M * cs.ldc, -7.0f), one(cs.ldc, -7.0f);
          kernels::project_rows(level, cs.x.data(), cs.ldx, M, K, p16, N, a.data(), cs.ldc, nullptr, gelu);
          kernels::project_rows(level, cs.x.data(), cs.ldx, M, K, p32, N, b.data(), cs.ldc, nullptr, gelu);
          for (std::size_t m = 0; m < M; ++m) {
            kernels::project_rows(level, cs.x.data() + m * cs.ldx, cs.ldx, 1, K, p16, N, one.data(), cs.ldc, nullptr, gelu);
            for (std::size_t n = 0; n < cs.ldc; ++n) {
              const float got = a[m * cs.ldc + n];
              const bool ok = n < N ? got == b[m * cs.ldc + n] && got == one[n] : got == -7.0f;
              if (!ok && ++failures <= 10)
                FAIL_CHECK(to_string(level) << (f16 ? " f16" : "") << (gelu ? " gelu" : "") << " M " << M << " K " << K << " N " << N << " [" << m << "][" << n << "]: " << got
                                            << " vs f32 kernel " << b[m * cs.ldc + n] << ", alone " << one[n]);
            }
          }
        }
    }
  CHECK(failures == 0);
}

TEST_CASE("bf16 panels with vdpbf16ps: X rounded to bf16 times the weights, within f32 summation error", "[kernels][bf16]") {
  if (!kernels::bf16_dot_active()) {
    WARN("this CPU has no AVX512-BF16: the vdpbf16ps path is not tested here");
    return;
  }
  // Each pair's products are exact in f32; the sum of K + 1 terms in f32, in whatever order the
  // hardware pairs them, is within (K + 2)·u·Σ|terms| of the double sum. Rows independent. With
  // `gelu`: gelu_ref of those sums (gelu_inplace's pass after the product).
  std::mt19937 rng(13);
  std::size_t failures = 0;
  for (std::size_t K : kKs)
    for (std::size_t N : kNs) {
      Case cs = make_case(rng, 17, K, N);
      const auto p16 = kernels::pack_linear_bf16(cs.w.data(), cs.bias.data(), N, K);
      for (std::size_t M : kMs) {
        std::vector<float> a(M * cs.ldc, -7.0f), one(cs.ldc, -7.0f), g(M * cs.ldc, -7.0f);
        kernels::project_rows(SimdLevel::avx512, cs.x.data(), cs.ldx, M, K, p16, N, a.data(), cs.ldc);
        kernels::project_rows(SimdLevel::avx512, cs.x.data(), cs.ldx, M, K, p16, N, g.data(), cs.ldc, nullptr, true);
        for (std::size_t m = 0; m < M; ++m) {
          kernels::project_rows(SimdLevel::avx512, cs.x.data() + m * cs.ldx, cs.ldx, 1, K, p16, N, one.data(), cs.ldc);
          for (std::size_t n = 0; n < cs.ldc; ++n) {
            const float got = a[m * cs.ldc + n];
            if (n >= N) {
              if ((got != -7.0f || g[m * cs.ldc + n] != -7.0f) && ++failures <= 10) FAIL_CHECK("wrote column " << n << " >= N " << N);
              continue;
            }
            if (g[m * cs.ldc + n] != kernels::gelu_ref(got) && ++failures <= 10)
              FAIL_CHECK("gelu M " << M << " K " << K << " N " << N << " [" << m << "][" << n << "]: " << g[m * cs.ldc + n]);
            double ref = cs.bias[n], mag = std::fabs(cs.bias[n]);
            for (std::size_t k = 0; k < K; ++k) {
              const double t = double(bf16_value(cs.x[m * cs.ldx + k])) * cs.w[n * K + k];
              ref += t, mag += std::fabs(t);
            }
            if ((std::fabs(got - ref) > double(K + 2) * kU * mag || got != one[n]) && ++failures <= 10)
              FAIL_CHECK("M " << M << " K " << K << " N " << N << " [" << m << "][" << n << "]: " << got << " vs " << ref
                              << " alone " << one[n]);
          }
        }
      }
    }
  CHECK(failures == 0);
}

TEST_CASE("PackedLinear: a product of the wrong shape is refused", "[kernels][bf16]") {
  const std::vector<float> w(6, 0.5f);
  const auto p = kernels::pack_linear_bf16(w.data(), nullptr, 2, 3);
  std::vector<float> x(3, 1.0f), c(2);
  CHECK_THROWS(kernels::project_rows(SimdLevel::scalar, x.data(), 3, 1, 2, p, 2, c.data(), 2));
  kernels::project_rows(SimdLevel::scalar, x.data(), 3, 1, 3, p, 2, c.data(), 2);
  CHECK(c[0] == 1.5f);
  CHECK(c[1] == 1.5f);
}

TEST_CASE("headsep info says which bf16 products this CPU runs", "[bf16][cli]") {
  const auto r = testutil::run_cli("info");
  REQUIRE(r.status == 0);
  const bool dot = default_level() == SimdLevel::avx512 && kernels::bf16_dot_active();
  CHECK_THAT(r.out, Catch::Contains(dot ? "bf16 products:  vdpbf16ps (AVX512-BF16)" : "bf16 products:  bf16 weights widened"));
}
