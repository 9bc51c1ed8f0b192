// Runs the fused attention kernel at a level: checks, working memory (the only allocations: in
// this baseline-flags file, never in a per-arch object), the scalar reference or the SIMD
// instantiation; and the fp32 peak microbenchmark the benchmarks report efficiency against.
#include <algorithm>
#include <chrono>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernels/attention_scalar.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/gelu.hpp"
#include "headsep/error.hpp"

namespace headsep {
namespace kernels {
namespace {

constexpr std::size_t up16(std::size_t x) noexcept { return (x + kAttnMaxLanes - 1) / kAttnMaxLanes * kAttnMaxLanes; }
constexpr std::size_t up_panel(std::size_t x) noexcept {
  return (x + kAttnMaxKeyPanel - 1) / kAttnMaxKeyPanel * kAttnMaxKeyPanel;
}

}  // namespace

std::size_t attention_query_rows(const AttentionReport& in, std::size_t* first) noexcept {
  *first = 0;
  const std::size_t n = in.n;
  if (n == 0) return 0;
  if (in.config.query == QueryMode::all) return n;
  std::int64_t q = in.config.query == QueryMode::first  ? 0
                   : in.config.query == QueryMode::last ? std::int64_t(n) - 1
                                                        : in.config.query_index;
  if (q < 0) q += std::int64_t(n);
  q = q < 0 ? 0 : (q >= std::int64_t(n) ? std::int64_t(n) - 1 : q);
  *first = static_cast<std::size_t>(q);
  return 1;
}

std::uint32_t attention_tile_rows(std::size_t n, std::uint32_t heads, std::uint32_t block) noexcept {
  const std::size_t row_bytes = (std::size_t(heads) + 1) * up16(n) * sizeof(float), most = kAttnMaxTileRows / block * block;
  std::size_t t = kAttnTileBytes / (row_bytes ? row_bytes : 1) / block * block;
  t = t < block ? block : (t > most ? most : t);
  return static_cast<std::uint32_t>(t);
}

// The segments attention_simd_impl.hpp carves, each sized for the widest vector (a narrower
// level's segments are no larger) and rounded to 64 bytes, plus 64 bytes to align the start.
std::size_t attention_work_floats(const AttentionReport& in, std::uint32_t tq) noexcept {
  const std::size_t n = in.n, np = up16(n), H1 = std::size_t(in.heads) + 1;
  std::size_t kt = 0, ot = 0, vpack = 0;
  for (std::size_t h = 0; h < H1; ++h) {
    kt += std::size_t(in.dk[h]) * up_panel(n);
    ot += std::size_t(tq) * up16(in.dv[h]);
    vpack += up16(n * up16(in.dv[h]));
  }
  return up16(kt) + up16(std::size_t(in.axes) * np) + up16(H1 * tq * np) + up16(H1 * up16(tq)) +
         up16((6 + std::size_t(in.axes)) * up16(tq)) + up16(ot) + vpack +
         kAttnMaxLanes;
}

std::size_t attention_small_floats(const AttentionReport& in) noexcept {
  const std::size_t n = in.n, H1 = std::size_t(in.heads) + 1, C = in.axes;
  const std::size_t P = in.heads ? std::size_t(in.heads) * (in.heads - 1) / 2 : 0;
  std::size_t e = 0;
  for (std::size_t h = 0; h < H1; ++h) e += n * (2 * std::size_t(in.dk[h]) + in.dv[h]) + in.dv[h];
  return e + C * n + H1 * n + H1 + H1 * (kHeadStats + C + 1) + P * kPairStats + H1;
}

bool attention_small(const AttentionReport& in) noexcept {
  // (The lane kernel masks causally but knows no sliding window or soft-capping: a report the
  // window cuts, or a capped one, goes through the row kernel.)
  return in.config.softcap == 0.0f && in.n >= 1 && in.n <= kAttnSmallN && std::size_t(in.heads) + 1 <= kAttnSmallHeads &&
         attention_small_floats(in) <= kAttnSmallFloats && first_visible_key(in.config, in.n - 1) == 0;
}

std::size_t attention_work_doubles(const AttentionReport& in) noexcept { return 2 * (std::size_t(in.heads) + 1); }

std::shared_ptr<const float> pack_panels(const float* b, std::size_t K, std::size_t N, const float* bias) {
  const std::size_t panels = (N + kPanel - 1) / kPanel, floats = panels * (K + 1) * kPanel;
  // A model's matrices are streamed from L3/DRAM once per group of rows: on 2 MiB pages (Linux
  // transparent huge pages, which are off unless asked for) the stream crosses no 4 KiB page
  // boundary, where the hardware prefetchers stop, and needs 1/512 of the TLB walks.
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const std::size_t bytes = floats * sizeof(float);
  // Matrices from 1 MiB: 2 MiB-aligned, the size rounded up to whole 2 MiB pages when that adds at
  // most a quarter (else the tail stays on 4 KiB pages: only whole 2 MiB extents become huge).
  const std::size_t align = bytes >= kHuge / 2 ? kHuge : 64, huge = (bytes + kHuge - 1) / kHuge * kHuge;
  const std::size_t alloc = align == kHuge && huge - bytes <= bytes / 4 ? huge : bytes;
  float* p = static_cast<float*>(::operator new(alloc, std::align_val_t(align)));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHuge) madvise(p, alloc, MADV_HUGEPAGE);  // a hint: nothing changes if it is refused
#endif
  std::shared_ptr<const float> owner(p, [align](const float* q) { ::operator delete(const_cast<float*>(q), std::align_val_t(align)); });
  std::fill(p, p + floats, 0.0f);
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t n = 0; n < N; ++n) p[panel_index(K, k, n)] = b[k * N + n];
  if (bias)
    for (std::size_t n = 0; n < N; ++n) p[panels * K * kPanel + n] = bias[n];
  return owner;
}

void project_rows(SimdLevel level, const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                  std::size_t N, float* c, std::size_t ldc, const float* next, std::size_t next_k, bool gelu) {
  if (!next) next_k = 0;
  require_supported(level);
  const float* packed_bias = packed + (N + kPanel - 1) / kPanel * K * kPanel;
  switch (level) {
#if HEADSEP_KERNELS_X86
    case SimdLevel::sse2: return attention_kernel<xsimd::sse2>{}.project(x, ldx, M, K, packed, packed_bias, N, c, ldc, next, next_k, gelu);
    case SimdLevel::avx2: return attention_kernel<fma3_avx2>{}.project(x, ldx, M, K, packed, packed_bias, N, c, ldc, next, next_k, gelu);
    case SimdLevel::avx512:
      return attention_kernel<xsimd::avx512bw>{}.project(x, ldx, M, K, packed, packed_bias, N, c, ldc, next, next_k, gelu);
#endif
    default: break;
  }
  // Reference: bias + Σ_k x b, k in order, unfused.
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      float s = packed_bias[n];
      for (std::size_t k = 0; k < K; ++k) s += x[m * ldx + k] * packed[panel_index(K, k, n)];
      c[m * ldc + n] = gelu ? gelu_ref(s) : s;
    }
}

}  // namespace kernels

namespace {

void check_heads(const AttentionReport& in) {
  for (std::uint32_t h = 2; h <= in.heads; ++h)
    if (in.dv[h] != in.dv[1])
      throw Error("attention: head " + std::to_string(h) + " has d_v = " + std::to_string(in.dv[h]) + ", head 1 has " +
                  std::to_string(in.dv[1]) + " (the pairwise output and subspace metrics need equal d_v)");
  for (std::uint32_t h = 0; h <= in.heads; ++h)
    if (in.dk[h] == 0) throw Error("attention: head " + std::to_string(h) + " has d_k = 0");
}

#if HEADSEP_KERNELS_X86
/// The lane kernel over `count` <= lanes reports of one shape (attention_small accepted in[0]).
void run_small(const AttentionReport* const* in, const AttentionReportOut* const* out, std::size_t count,
               SimdLevel level, AttentionScratch& scratch) {
  const std::size_t floats = kernels::attention_small_floats(*in[0]) * kernels::kAttnMaxLanes + kernels::kAttnMaxLanes;
  if (scratch.tile.size() < floats) scratch.tile.resize(floats);
  const auto addr = reinterpret_cast<std::uintptr_t>(scratch.tile.data());
  float* f = scratch.tile.data() + ((64 - addr % 64) % 64) / sizeof(float);
  switch (level) {
    case SimdLevel::sse2: return kernels::attention_kernel<xsimd::sse2>{}.small(in, out, count, f);
    case SimdLevel::avx2: return kernels::attention_kernel<kernels::fma3_avx2>{}.small(in, out, count, f);
    case SimdLevel::avx512: return kernels::attention_kernel<xsimd::avx512bw>{}.small(in, out, count, f);
    case SimdLevel::scalar: break;
  }
}

std::size_t lanes(SimdLevel level) noexcept {
  switch (level) {
    case SimdLevel::sse2: return kernels::attention_kernel<xsimd::sse2>::lanes();
    case SimdLevel::avx2: return kernels::attention_kernel<kernels::fma3_avx2>::lanes();
    case SimdLevel::avx512: return kernels::attention_kernel<xsimd::avx512bw>::lanes();
    case SimdLevel::scalar: break;
  }
  return 1;
}
#endif

}  // namespace

void attention_report(const AttentionReport& in, const AttentionReportOut& out, SimdLevel level,
                      AttentionScratch& scratch) {
  kernels::require_supported(level);
  check_heads(in);
  if (level == SimdLevel::scalar) {
    kernels::attention_scalar(in, out, scratch.tile, scratch.sums);
    return;
  }
#if HEADSEP_KERNELS_X86
  if (kernels::attention_small(in)) {  // the lane kernel with one lane used: the bits it gives in a group
    const AttentionReport* pin = &in;
    const AttentionReportOut* pout = &out;
    return run_small(&pin, &pout, 1, level, scratch);
  }
  std::size_t q_first = 0;
  const std::size_t nq = kernels::attention_query_rows(in, &q_first);
  kernels::AttentionWork w;
  w.tq = nq > 1 ? kernels::attention_tile_rows(in.n, in.heads, kernels::attention_micro_rows(lanes(level))) : 1;
  const std::size_t floats = kernels::attention_work_floats(in, w.tq);
  if (scratch.tile.size() < floats) scratch.tile.resize(floats);
  const std::size_t doubles = kernels::attention_work_doubles(in);
  if (scratch.sums.size() < doubles) scratch.sums.resize(doubles);
  const auto addr = reinterpret_cast<std::uintptr_t>(scratch.tile.data());
  w.f = scratch.tile.data() + ((64 - addr % 64) % 64) / sizeof(float);
  w.d = scratch.sums.data();
  switch (level) {
    case SimdLevel::scalar: break;
    case SimdLevel::sse2: kernels::attention_kernel<xsimd::sse2>{}(in, out, w); break;
    case SimdLevel::avx2: kernels::attention_kernel<kernels::fma3_avx2>{}(in, out, w); break;
    case SimdLevel::avx512: kernels::attention_kernel<xsimd::avx512bw>{}(in, out, w); break;
  }
#endif
}

void attention_reports(const AttentionReport* in, const AttentionReportOut* out, std::size_t count, SimdLevel level,
                       AttentionScratch& scratch) {
  kernels::require_supported(level);
  if (count == 0) return;
#if HEADSEP_KERNELS_X86
  if (level != SimdLevel::scalar) {
    check_heads(in[0]);
    // Small reports of equal n share the lane kernel, lanes(level) at a time; the rest one by one.
    const std::size_t L = lanes(level);
    const AttentionReport* pin[kernels::kAttnMaxLanes];
    const AttentionReportOut* pout[kernels::kAttnMaxLanes];
    // Whether a report of n tokens is small depends on n alone here (one plan's reports).
    bool small[kernels::kAttnSmallN + 1] = {false};
    AttentionReport probe = in[0];
    for (std::uint32_t n = 1; n <= kernels::kAttnSmallN; ++n) probe.n = n, small[n] = kernels::attention_small(probe);
    bool any_small = false;
    for (std::size_t i = 0; i < count; ++i) {
      if (in[i].n <= kernels::kAttnSmallN && small[in[i].n]) any_small = true;
      else attention_report(in[i], out[i], level, scratch);
    }
    if (!any_small) return;
    for (std::uint32_t n = 1; n <= kernels::kAttnSmallN; ++n) {
      if (!small[n]) continue;
      std::size_t m = 0;
      for (std::size_t i = 0; i < count; ++i) {
        if (in[i].n != n) continue;
        pin[m] = in + i, pout[m] = out + i;
        if (++m == L) run_small(pin, pout, m, level, scratch), m = 0;
      }
      if (m) run_small(pin, pout, m, level, scratch);
    }
    return;
  }
#endif
  for (std::size_t i = 0; i < count; ++i) attention_report(in[i], out[i], level, scratch);
}

namespace {

/// Seconds for `rounds` rounds of the best level's FMA chains, and the flops they did.
struct Timed {
  double seconds = 0, flops = 0;
};

template <class Kernel>
Timed time_chains(std::size_t rounds) {
  static volatile float sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  sink = sink + Kernel{}.fma_chains(rounds, 1.0f);
  const auto t1 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double>(t1 - t0).count(), double(rounds) * double(Kernel::fma_chain_flops())};
}

/// Plain C++ chains (no SIMD level): 8 independent multiply-adds.
struct ScalarChains {
  float fma_chains(std::size_t rounds, float x) const {
    float a[8];
    for (int i = 0; i < 8; ++i) a[i] = x + float(i) * 1e-3f;
    for (std::size_t r = 0; r < rounds; ++r)
      for (int i = 0; i < 8; ++i) a[i] = a[i] * 0.9999999f + 1e-7f;
    float s = 0;
    for (int i = 0; i < 8; ++i) s += a[i];
    return s;
  }
  static std::size_t fma_chain_flops() noexcept { return 16; }
};

template <class Kernel>
double peak_of() {
  // Calibrate to ~4 ms per run, then the best of 10 runs (the best, not the mean: another
  // process can only slow a run down, and short runs are likelier to find the core alone).
  std::size_t rounds = std::size_t(1) << 14;
  Timed t = time_chains<Kernel>(rounds);
  while (t.seconds < 1e-3 && rounds < (std::size_t(1) << 40)) t = time_chains<Kernel>(rounds *= 2);
  rounds = static_cast<std::size_t>(double(rounds) * 0.004 / (t.seconds > 0 ? t.seconds : 1e-3)) + 1;
  double best = 0;
  for (int i = 0; i < 10; ++i) {
    t = time_chains<Kernel>(rounds);
    if (t.seconds > 0 && t.flops / t.seconds > best) best = t.flops / t.seconds;
  }
  return best * 1e-9;
}

}  // namespace

double measure_fp32_peak_gflops() {
  static const double peak = [] {
#if HEADSEP_KERNELS_X86
    switch (supported_levels().back()) {
      case SimdLevel::scalar: break;
      case SimdLevel::sse2: return peak_of<kernels::attention_kernel<xsimd::sse2>>();
      case SimdLevel::avx2: return peak_of<kernels::attention_kernel<kernels::fma3_avx2>>();
      case SimdLevel::avx512: return peak_of<kernels::attention_kernel<xsimd::avx512bw>>();
    }
#endif
    return peak_of<ScalarChains>();
  }();
  return peak;
}

}  // namespace headsep
