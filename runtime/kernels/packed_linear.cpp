// Packing an nn.Linear in f32, bf16 or f16, and the dispatch of its product (packed_linear.hpp): the
// checks, the one allocation (X as bf16 pairs for vdpbf16ps) and the scalar reference live here,
// compiled with the baseline flags.
#include "kernels/packed_linear.hpp"

#include "headsep/architecture.hpp"  // gelu_inplace
#include "headsep/safetensors.hpp"     // f16_to_f32

#include <sys/mman.h>
#if HEADSEP_KERNELS_X86
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace headsep::kernels {
namespace {

std::atomic<bool> g_dot_enabled{true};

#if HEADSEP_KERNELS_X86
/// CPUID leaf `leaf`, subleaf `sub`: bit `bit` of register `reg` (0 EAX, 1 EBX, 2 ECX, 3 EDX).
/// (Not __builtin_cpu_supports: clang 14, the fuzz build's compiler, knows neither "avx512bf16"
/// nor "f16c". The OS's saving of the vector state is the SIMD level's check, dispatch.cpp.)
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, unsigned bit) noexcept {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
#endif

bool cpu_has_bf16_dot() noexcept {
#if HEADSEP_KERNELS_X86
  // AVX512_BF16: CPUID.(7, 1):EAX[5]; AVX512BW: CPUID.(7, 0):EBX[30].
  static const bool has = cpuid_bit(7, 1, 0, 5) && cpuid_bit(7, 0, 1, 30);
  return has;
#else
  return false;
#endif
}

/// `bytes` zeroed, 64-byte aligned; from 1 MiB on 2 MiB pages (as pack_panels: the panels are
/// streamed once per group of rows).
template <class T>
std::shared_ptr<T> alloc_zeroed(std::size_t count) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 64);
  const std::size_t align = bytes >= kHuge / 2 ? kHuge : 64, huge = (bytes + kHuge - 1) / kHuge * kHuge;
  const std::size_t alloc = align == kHuge && huge - bytes <= bytes / 4 ? huge : bytes;
  T* p = static_cast<T*>(::operator new(alloc, std::align_val_t(align)));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHuge) madvise(p, alloc, MADV_HUGEPAGE);
#endif
  std::fill(p, p + count, T{});
  return std::shared_ptr<T>(p, [align](T* q) { ::operator delete(q, std::align_val_t(align)); });
}

float widen(std::uint16_t b) noexcept { return std::bit_cast<float>(std::uint32_t(b) << 16); }

bool cpu_has_f16c() noexcept {
#if HEADSEP_KERNELS_X86
  static const bool has = cpuid_bit(1, 0, 2, 29);  // F16C: CPUID.1:ECX[29]
  return has;
#else
  return false;
#endif
}

}  // namespace

std::size_t PackedLinear::bytes() const noexcept {
  const std::size_t panels = (out + kPanel - 1) / kPanel;
  if (type == WeightType::f32) return f32 ? panels * (in + 1) * kPanel * sizeof(float) : 0;
  return bf16 ? panels * kPanel * (bf16_pairs(in) * 2 * sizeof(std::uint16_t) + sizeof(float)) : 0;
}

// (F. Giesen's float_to_half_fast3_rtne: the subnormal range by one f32 add whose rounding is the
// conversion's, the normal range by integer rounding.)
std::uint16_t round_f16(float v) noexcept {
  constexpr std::uint32_t f32_inf = 255u << 23, f16_max = (127u + 16u) << 23;
  const float denorm_magic = std::bit_cast<float>(((127u - 15u) + (23u - 10u) + 1u) << 23);
  std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t o;
  if (u >= f16_max) {
    o = u > f32_inf ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {
    o = std::bit_cast<std::uint32_t>(std::bit_cast<float>(u) + denorm_magic) - std::bit_cast<std::uint32_t>(denorm_magic);
  } else {
    const std::uint32_t odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

PackedLinear pack_linear_f32(const float* w, const float* bias, std::size_t out, std::size_t in) {
  std::vector<float> t(in * out);  // B[i][o] = W[o][i]
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i) t[i * out + o] = w[o * in + i];
  PackedLinear p;
  p.in = in, p.out = out;
  p.f32 = pack_panels(t.data(), in, out, bias);
  return p;
}

PackedLinear alloc_linear_bf16(std::size_t out, std::size_t in, WeightType type) {
  const std::size_t panels = (out + kPanel - 1) / kPanel;
  PackedLinear p;
  p.type = type == WeightType::f16 ? WeightType::f16 : WeightType::bf16;
  p.in = in, p.out = out;
  p.bf16 = alloc_zeroed<std::uint16_t>(panels * kPanel * bf16_pairs(in) * 2);
  p.bias = alloc_zeroed<float>(panels * kPanel);
  return p;
}

void pack_rows_bf16(PackedLinear& p, const float* w, const float* bias, std::size_t row0, std::size_t rows) {
  if (p.type == WeightType::f32 || row0 + rows > p.out) throw std::logic_error("pack_rows_bf16: rows past the linear's");
  auto* q = const_cast<std::uint16_t*>(p.bf16.get());  // (alloc_linear_bf16's own, not yet shared)
  const std::size_t in = p.in;
  const bool f16 = p.type == WeightType::f16;
  for (std::size_t o = 0; o < rows; ++o)
    for (std::size_t i = 0; i < in; ++i)
      q[bf16_panel_index(in, i, row0 + o)] =
          f16 ? round_f16(w[o * in + i]) : round_bf16(std::bit_cast<std::uint32_t>(w[o * in + i]));
  if (bias) std::copy(bias, bias + rows, const_cast<float*>(p.bias.get()) + row0);
}

PackedLinear pack_linear_bf16(const float* w, const float* bias, std::size_t out, std::size_t in) {
  PackedLinear p = alloc_linear_bf16(out, in);
  pack_rows_bf16(p, w, bias, 0, out);
  return p;
}

bool bf16_dot_active() noexcept { return cpu_has_bf16_dot() && g_dot_enabled.load(std::memory_order_relaxed); }
void set_bf16_dot(bool on) noexcept { g_dot_enabled.store(on, std::memory_order_relaxed); }

namespace {
/// This thread's buffer for one panel widened to f32 (K x kPanel floats, 64-byte aligned), kept
/// at its largest size: the widening kernels' scratch.
float* panel_work(std::size_t K) {
  struct Free {
    void operator()(float* p) const noexcept { std::free(p); }
  };
  thread_local std::unique_ptr<float, Free> buf;
  thread_local std::size_t size = 0;
  const std::size_t need = (K * kPanel * sizeof(float) + 63) / 64 * 64;
  if (need > size) {
    buf.reset(static_cast<float*>(std::aligned_alloc(64, need)));
    size = buf ? need : 0;
    if (!buf) throw std::bad_alloc();
  }
  return buf.get();
}

/// project_rows (packed_linear.hpp) of bf16/f16 panels. `g`: the widening kernels fuse GELU (the
/// f32 kernel's epilogue); true returned: vdpbf16ps or a reference ran, and GELU is still to do.
bool project_16(SimdLevel level, const float* x, std::size_t ldx, std::size_t M, std::size_t K, const PackedLinear& w,
                std::size_t N, float* c, std::size_t ldc, bool g) {
  const std::uint16_t* panels = w.bf16.get();
  const float* bias = w.bias.get();
  if (w.type == WeightType::f16) {
    switch (level) {
#if HEADSEP_KERNELS_X86
      case SimdLevel::sse2:
        return bf16_project<xsimd::sse2>{}.f16(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
      case SimdLevel::avx2:  // (every AVX2 CPU known has F16C; one without runs the SSE2 kernel's bits)
        if (cpu_has_f16c())
          return bf16_project<fma3_avx2>{}.f16(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
        return bf16_project<xsimd::sse2>{}.f16(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
      case SimdLevel::avx512:
        return bf16_project<xsimd::avx512bw>{}.f16(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
#endif
      default: break;
    }
    for (std::size_t m = 0; m < M; ++m)  // the f32 reference on the widened weights
      for (std::size_t n = 0; n < N; ++n) {
        float s = bias[n];
        for (std::size_t k = 0; k < K; ++k) s += x[m * ldx + k] * f16_to_f32(panels[bf16_panel_index(K, k, n)]);
        c[m * ldc + n] = s;
      }
    return g;
  }
  switch (level) {
#if HEADSEP_KERNELS_X86
    case SimdLevel::sse2:
      return bf16_project<xsimd::sse2>{}(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
    case SimdLevel::avx2:
      return bf16_project<fma3_avx2>{}(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
    case SimdLevel::avx512:
      if (bf16_dot_active()) {
        // X as bf16 pairs once per call (RNE; an odd K's last pair padded with 0): M·K roundings
        // against M·K·N products.
        const std::size_t KP = bf16_pairs(K);
        thread_local std::vector<std::uint32_t> xb;
        xb.assign(M * KP, 0);
        for (std::size_t m = 0; m < M; ++m)
          for (std::size_t k = 0; k < K; ++k)
            xb[m * KP + k / 2] |= std::uint32_t(round_bf16(std::bit_cast<std::uint32_t>(x[m * ldx + k]))) << (16 * (k % 2));
        bf16_dot_project(xb.data(), KP, M, K, panels, bias, N, c, ldc);
        return g;
      }
      return bf16_project<xsimd::avx512bw>{}(x, ldx, M, K, panels, bias, N, c, ldc, panel_work(K), g), false;
#endif
    default: break;
  }
  // Reference: bias + Σ_k x·w on the widened weights, k in order, unfused (the f32 reference's sum).
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      float s = bias[n];
      for (std::size_t k = 0; k < K; ++k) s += x[m * ldx + k] * widen(panels[bf16_panel_index(K, k, n)]);
      c[m * ldc + n] = s;
    }
  return g;
}
}  // namespace

void project_rows(SimdLevel level, const float* x, std::size_t ldx, std::size_t M, std::size_t K,
                  const PackedLinear& w, std::size_t N, float* c, std::size_t ldc, const PackedLinear* next, bool gelu) {
  if (w.in != K || w.out != N || !w)
    throw std::logic_error("project_rows: a " + std::to_string(w.out) + " x " + std::to_string(w.in) +
                           " linear asked for " + std::to_string(N) + " x " + std::to_string(K));
  if (w.type == WeightType::f32) {
    const bool pf = next && next->type == WeightType::f32;
    return project_rows(level, x, ldx, M, K, w.f32.get(), N, c, ldc, pf ? next->f32.get() : nullptr, pf ? next->in : 0,
                        gelu);
  }
  require_supported(level);
  // (The f32 scalar reference's GELU is gelu_ref per element, as gelu_inplace's: the decoders' pass.)
  if (project_16(level, x, ldx, M, K, w, N, c, ldc, gelu))
    for (std::size_t m = 0; m < M; ++m) gelu_inplace(c + m * ldc, N);
}

}  // namespace headsep::kernels
