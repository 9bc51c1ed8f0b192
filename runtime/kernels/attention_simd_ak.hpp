// struct AK<A>: the fused attention kernel of one architecture A. Its vector types, block shapes and
// one-line helpers, and the declarations of the members the role headers define (attention_simd_
// impl.hpp includes them all, and says why everything is a member of a struct templated on A).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <immintrin.h>  // AVX-512/AVX2 intrinsics in if-constexpr branches (declared for every target)

#include "kernels/attention_simd.hpp"

namespace headsep::kernels {
namespace attn_detail {

template <class A>
struct AK {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  static constexpr std::size_t W = B::size;
  // Micro-kernel shapes: MR query rows x 2 vectors of keys (scores) or value dims (A·V) keeps
  // 2·MR accumulators + 2 loaded vectors in registers (32 on AVX-512, 16 on AVX2/SSE2).
  static constexpr std::size_t MR = attention_micro_rows(W);
  static constexpr std::size_t NV = 2;
  static constexpr std::size_t DV = 2;
  /// Keys per panel of K^T ([panel][d][KP]): one score micro-kernel's keys, read contiguously.
  /// In a plain [d][n] layout its rows lay n floats apart (at n = 256 all in the same few L1
  /// sets); with the panels the AVX2 kernel's median at 256 tokens went 22.2 -> 20.0 ms, AVX-512
  /// unchanged (docs/PERFORMANCE.md).
  static constexpr std::size_t KP = NV * W;
  static_assert(kAttnMaxKeyPanel % KP == 0);

  static std::size_t up(std::size_t x) noexcept { return (x + W - 1) / W * W; }
  static std::size_t seg(std::size_t x) noexcept { return (x + kAttnMaxLanes - 1) / kAttnMaxLanes * kAttnMaxLanes; }
  static std::size_t lo(std::size_t x, std::size_t y) noexcept { return x < y ? x : y; }
  static std::size_t up_kp(std::size_t x) noexcept { return (x + KP - 1) / KP * KP; }

  /// x·y + z, fused where the level has FMA. xsimd 8.1 has no AVX-512 fma (its generic x*y + z
  /// stays two instructions under -ffp-contract=off), so AVX-512 calls the intrinsic.
  static B fmadd(B x, B y, B z) noexcept {
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) return B(_mm512_fmadd_ps(x, y, z));
    else return xsimd::fma(x, y, z);
  }

  /// Flush-to-zero and denormals-are-zero for the duration of a call, then the caller's MXCSR
  /// back. Masked lanes (e^-88) and far tails of a softmax are subnormal: each subnormal result
  /// or input costs a microcode assist of ~100 cycles on Intel (measured: 20% of a 3-token report
  /// in one store after vscalefps). Values below 1.2e-38 become 0, far inside the tolerance.
  struct FlushDenormals {
    unsigned saved = _mm_getcsr();
    FlushDenormals() noexcept { _mm_setcsr(saved | 0x8040u); }  // FTZ (bit 15) | DAZ (bit 6)
    ~FlushDenormals() { _mm_setcsr(saved); }
    FlushDenormals(const FlushDenormals&) = delete;
    FlushDenormals& operator=(const FlushDenormals&) = delete;
  };

  // ---- elementary functions and the W x W transpose (attention_simd_math.hpp) --------------
  static B exp2_neg(B t) noexcept;
  static B log_pos(B x) noexcept;
  static void softcap_row(float* s, std::size_t lv, float scale, float cap) noexcept;
  static float hmax(B v) noexcept;
  static B row_sums(const B* v) noexcept;
  static void transpose_block(const float* src, std::size_t lds, float* dst, std::size_t ldd) noexcept;

  // ---- micro-kernels (attention_simd_tiles.hpp) -------------------------------------------
  template <std::size_t R, std::size_t V>
  static void score_tile(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk, float* s,
                         std::size_t k0) noexcept;
  template <std::size_t R>
  static void scores_rows(const float* q, std::size_t ldq, const float* kt, std::size_t np, std::size_t dk, float* s,
                          std::size_t kbeg, std::size_t kend) noexcept;
  template <std::size_t R = MR>
  static void scores(std::size_t rows, const float* q, std::size_t ldq, const float* kt, std::size_t np,
                     std::size_t dk, float* s, std::size_t kbeg, std::size_t kend) noexcept;
  template <std::size_t R, std::size_t V>
  static void av_tile(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                      std::size_t ldo, std::size_t d0) noexcept;
  template <std::size_t R>
  static void av_rows(const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen, float* o,
                      std::size_t dvp) noexcept;
  template <std::size_t R = MR>
  static void av(std::size_t rows, const float* a, std::size_t np, const float* v, std::size_t ldv, std::size_t klen,
                 float* o, std::size_t dvp) noexcept;
  static float dot(const float* x, const float* y, std::size_t len) noexcept;
  /// softmax_row's CC for any number of axes (one dot product per axis after normalising).
  static constexpr std::size_t kAnyC = 5;
  /// log2 e and ln 2 in f32; kExp2Min = -88·log2 e, the clamp of exp2_neg's argument (e^-88, under
  /// the smallest normal float: the exps of masked scores, -inf, come out 0).
  static constexpr float kLog2e = 1.44269504f, kLn2 = 0.693147181f, kExp2Min = -126.957161f;
  template <std::size_t CC>
  static void softmax_row(float* s, std::size_t lv, float scale, float m, const float* ax, std::size_t np,
                          std::size_t C, float* ctx, std::size_t ldc, float& z_out, float& tz_out) noexcept;
  static float row_max(const float* s, std::size_t lv) noexcept;

  // ---- the report, query tiles (attention_simd_run.hpp) ----------------------------------
  static void run(const AttentionReport& in, const AttentionReportOut& out, const AttentionWork& w) noexcept;

  // ---- small reports, one per lane (attention_simd_small.hpp) ----------------------------
  static void small(const AttentionReport* const* in, const AttentionReportOut* const* out, std::size_t count,
                    float* f) noexcept;
  // f64 lanes for small()'s results.
  using BD = xsimd::batch<double, A>;
  static_assert(BD::size * 2 == W);
  /// W lanes as doubles: lanes [0, W/2) and [W/2, W).
  struct Wide {
    BD lo, hi;
    Wide operator*(const Wide& o) const noexcept { return {lo * o.lo, hi * o.hi}; }
    Wide operator*(const BD& o) const noexcept { return {lo * o, hi * o}; }
    Wide operator/(const Wide& o) const noexcept { return {lo / o.lo, hi / o.hi}; }
  };
  static Wide sqrt(const Wide& x) noexcept { return {xsimd::sqrt(x.lo), xsimd::sqrt(x.hi)}; }
  /// Lane by lane `test > 0 ? v : 0.0` (0 for a NaN test, as the scalar form).
  static Wide positive_or_zero(const Wide& test, const Wide& v) noexcept {
    const BD z(0.0);
    return {xsimd::select(test.lo > z, v.lo, z), xsimd::select(test.hi > z, v.hi, z)};
  }
  static Wide widen(B v) noexcept;

  // ---- projections: C = bias + X·B, B packed in kPanel-column panels (attention_simd_project.hpp)
  // GMR rows x GV vectors of one panel per micro-kernel: 24 accumulators on AVX-512 (8 x 3), 12 on
  // AVX2 (6 x 2) and SSE2 (4 x 3). AVX2's 16 columns are one slice (kSlice): a 64-byte line per k,
  // 24 KB at K = 384, which stays in a 32 KB L1 while the row tiles pass; 24 columns straddled
  // lines (48 KB) and streamed from L2: Zen 3 ran MiniLM's products at 40-54 GFLOP/s of 95
  // (docs/PERFORMANCE.md, 2026-12-02 17:40).
  static constexpr std::size_t GV = W == 8 ? 2 : 3;
  static constexpr std::size_t GMR = W >= 16 ? 8 : W == 8 ? 6 : 4;
  static_assert(kPanel % (GV * W) == 0);

  static B gelu(B in) noexcept;
  template <bool G, std::size_t R, std::size_t V>
  static void gemm_tile(const float* x, std::size_t ldx, std::size_t K, const float* bp, std::size_t c0, const float* bias, float* c,
                        std::size_t ldc, const char* pf, const char* pf_end) noexcept;
  template <std::size_t V>
  [[gnu::noinline]] static void gelu_tile(const float* t, float* c, std::size_t ldc, std::size_t rows) noexcept;
  /// R rows x V vectors (V < GV: a matrix's last columns).
  template <bool G, std::size_t R = GMR, std::size_t V = GV>
  static void gemm_rows(std::size_t rows, const float* x, std::size_t ldx, std::size_t K, const float* bp,
                        std::size_t c0, const float* bias, float* c, std::size_t ldc, const char* pf, const char* pf_end) noexcept;
  static void project(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                      const float* pbias, std::size_t N, float* c, std::size_t ldc, const float* next_matrix,
                      std::size_t next_k, bool gelu_out) noexcept;
  static void store_cols(float* dst, const float* src, std::size_t n) noexcept;
  template <bool G>
  static void project_t(const float* x, std::size_t ldx, std::size_t M, std::size_t K, const float* packed,
                        const float* pbias, std::size_t N, float* c, std::size_t ldc, const float* next_matrix,
                        std::size_t next_k) noexcept;

  static constexpr std::size_t kChains = W >= 16 ? 16 : 12;
  static float fma_chains(std::size_t rounds, float x) noexcept;
};

}  // namespace attn_detail
}  // namespace headsep::kernels
