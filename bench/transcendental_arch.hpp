// Private to bench_transcendental: exp and log over an array with one architecture's vectors, the
// engine's own (AK<A>::exp2_neg / log_pos, what the softmax, entropy and JS kernels call) and
// xsimd's (xsimd::exp / xsimd::log). Included only by transcendental_<arch>.cpp, each compiled with
// that architecture's flags; raw pointers only (no std:: code is emitted with AVX flags).
#pragma once
#include <cstddef>

#include "kernels/attention_simd_math.hpp"

namespace headsep::bench_transcendental {

template <class A>
struct Loops {
  using AK = kernels::attn_detail::AK<A>;
  using B = typename AK::B;
  // n a multiple of 4 vectors, in/out aligned to 64 bytes. Four independent vectors per step:
  // throughput, not the latency of one dependency chain.
  static void exp_engine(const float* in, float* out, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; i += 4 * B::size)
      for (std::size_t u = 0; u < 4; ++u)
        AK::exp2_neg(B::load_aligned(in + i + u * B::size)).store_aligned(out + i + u * B::size);
  }
  static void log_engine(const float* in, float* out, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; i += 4 * B::size)
      for (std::size_t u = 0; u < 4; ++u)
        AK::log_pos(B::load_aligned(in + i + u * B::size)).store_aligned(out + i + u * B::size);
  }
  static void exp_xsimd(const float* in, float* out, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; i += 4 * B::size)
      for (std::size_t u = 0; u < 4; ++u)
        xsimd::exp(B::load_aligned(in + i + u * B::size)).store_aligned(out + i + u * B::size);
  }
  static void log_xsimd(const float* in, float* out, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; i += 4 * B::size)
      for (std::size_t u = 0; u < 4; ++u)
        xsimd::log(B::load_aligned(in + i + u * B::size)).store_aligned(out + i + u * B::size);
  }
};

using Fn = void (*)(const float*, float*, std::size_t) noexcept;
struct ArchFns {
  Fn exp_engine, log_engine, exp_xsimd, log_xsimd;
};
ArchFns sse2_fns() noexcept;
ArchFns avx2_fns() noexcept;
ArchFns avx512_fns() noexcept;

#define HEADSEP_TRANSCENDENTAL_FNS(NAME, ARCH)                                                      \
  ArchFns NAME() noexcept {                                                                       \
    using L = Loops<ARCH>;                                                                        \
    return {&L::exp_engine, &L::log_engine, &L::exp_xsimd, &L::log_xsimd};                         \
  }

}  // namespace headsep::bench_transcendental
