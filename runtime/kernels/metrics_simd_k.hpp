// struct K<A, T>: the metric kernel of one architecture A and element type T (each lane one report):
// the finish and accumulate steps, the uniform-length and long-report paths, the dispatch among
// them (run), and the ragged path's declarations (metrics_simd_ragged.hpp defines it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/metrics_simd.hpp"

namespace headsep::kernels {
namespace simd_detail {

/// Stack tile of de-interleaved tokens: [array][token-in-block][lane].
inline constexpr std::size_t kTileBytes = 16384;
inline constexpr std::size_t kMaxBlock = 16;  ///< tokens per de-interleave block (runtime lengths)

template <class A>
constexpr std::size_t lo(std::size_t x, std::size_t y) noexcept { return x < y ? x : y; }

template <class A, class T>
struct K {
  using B = xsimd::batch<T, A>;
  static constexpr std::size_t W = B::size;
  static constexpr bool fused = std::is_same_v<T, float>;  // f64 never fuses (bit-identity)

  static B madd(B w, B x, B acc) noexcept {
    if constexpr (fused) return xsimd::fma(w, x, acc);
    else return acc + w * x;
  }

  /// Differences, pairwise distances and separation for reports [r0, r0 + W) whose contexts
  /// are already stored. Reads the context rows back (they are in L1) in the scalar order.
  /// With a.nonfinite, also checks every context and the separation (x - x: 0 when finite,
  /// NaN otherwise; the difference of a head's and the baseline's context covers both).
  static void finish(const KernelArgs<T>& a, std::size_t r0) noexcept {
    const T* ctx = a.context + r0;
    const std::size_t C = a.axes, S = a.stride;
    finish_from(a, r0, [&](std::size_t h, std::size_t c) { return B::load_unaligned(ctx + (h * C + c) * S); });
  }
  /// finish() with context (h, c) of the W reports given by ctx(h, c): the stored rows, or
  /// registers that still hold them (ragged_registers), so nothing is read back.
  template <class Ctx>
  [[gnu::always_inline]] static void finish_from(const KernelArgs<T>& a, std::size_t r0, const Ctx& ctx) noexcept {
    const std::size_t C = a.axes, H = std::size_t(a.heads) + 1, S = a.stride;
    B check(T(0));
    for (std::size_t h = 1; h < H; ++h)
      for (std::size_t c = 0; c < C; ++c) {
        const B d = ctx(h, c) - ctx(0, c);
        d.store_unaligned(a.difference + ((h - 1) * C + c) * S + r0);
        check = check + (d - d);
      }
    B total(T(0));
    std::size_t p = 0;
    for (std::size_t i = 1; i < H; ++i)
      for (std::size_t j = i + 1; j < H; ++j, ++p) {
        B d2(T(0));
        for (std::size_t c = 0; c < C; ++c) {
          const B d = ctx(i, c) - ctx(j, c);
          d2 = d2 + d * d;
        }
        const B dist = xsimd::sqrt(d2);
        dist.store_unaligned(a.pairwise + p * S + r0);
        total = total + dist;
      }
    const B sep = p ? total / B(T(p)) : B(T(0));
    sep.store_unaligned(a.separation + r0);
    if (a.nonfinite) {
      check = check + (sep - sep);
      // (not any(check != check): xsimd 8.1's AVX != is the ordered compare, false for NaN)
      if (!xsimd::all(check == check)) *a.nonfinite = true;
    }
  }

  /// Adds tokens [0, k) of a de-interleaved block to the contexts of reports [r0, r0 + W).
  /// `first`: start from +0.0 instead of the stored partial sums. `tile` rows: axes first,
  /// then the weights h = 0..H-1, each `kb` tokens of W lanes.
  template <std::size_t KC>
  static void accumulate(const KernelArgs<T>& a, std::size_t r0, const T* tile, std::size_t k,
                         std::size_t kb, bool first) noexcept {
    const std::size_t C = a.axes, H = std::size_t(a.heads) + 1, S = a.stride;
    if constexpr (KC) k = KC, kb = KC;
    for (std::size_t h = a.baseline_given ? 1 : 0; h < H; ++h) {
      const T* w = tile + (C + h) * kb * W;
      for (std::size_t c = 0; c < C; ++c) {
        const T* x = tile + c * kb * W;
        T* out = a.context + (h * C + c) * S + r0;
        B s = first ? B(T(0)) : B::load_unaligned(out);
        for (std::size_t t = 0; t < k; ++t)
          s = madd(B::load_aligned(w + t * W), B::load_aligned(x + t * W), s);
        s.store_unaligned(out);
      }
    }
  }

  /// Rows of the tile: the axes, then the weights.
  static const T* row(const KernelArgs<T>& a, std::size_t i) noexcept {
    return i < a.axes ? a.axis[i] : a.weight[i - a.axes];
  }

  // ---- in-register de-interleave of W reports x LC tokens (Strategy::shuffle) ----
  // Lane i of token t is element e = i*LC + t of the LC vectors loaded from src, i.e. lane
  // e % W of vector e / W. Index and mask vectors are compile-time constants.
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  using UB = xsimd::batch<U, A>;

  template <std::size_t LC, std::size_t t>
  struct Elem {
    static constexpr std::size_t e(std::size_t i) { return i * LC + t; }
  };
  /// Lane i takes lane (i*LC + t) % W of its source vector.
  template <std::size_t LC, std::size_t t>
  struct Perm {
    static constexpr U get(std::size_t i, std::size_t) { return static_cast<U>(Elem<LC, t>::e(i) % W); }
  };
  /// Lanes i whose element lives in vector j (swizzle-then-blend form).
  template <std::size_t LC, std::size_t t, std::size_t j>
  struct FromVec {
    static constexpr bool get(std::size_t i, std::size_t) { return Elem<LC, t>::e(i) / W == j; }
  };
  /// Positions p of vector j that token t needs (blend-then-swizzle form, LC odd).
  template <std::size_t LC, std::size_t t, std::size_t j>
  struct PosOf {
    static constexpr bool get(std::size_t p, std::size_t) {
      for (std::size_t i = 0; i < W; ++i)
        if (Elem<LC, t>::e(i) == j * W + p) return true;
      return false;
    }
  };
  template <std::size_t LC, std::size_t t, std::size_t j>
  static constexpr bool contributes() {
    for (std::size_t i = 0; i < W; ++i)
      if (Elem<LC, t>::e(i) / W == j) return true;
    return false;
  }

  template <std::size_t LC, std::size_t t, std::size_t... J>
  static B token(const B* v, std::index_sequence<J...>) noexcept {
    constexpr auto perm = xsimd::make_batch_constant<UB, Perm<LC, t>>();
    if constexpr (LC % 2 == 1) {
      // LC odd is coprime with W: the W wanted elements sit at distinct positions, so blend
      // them into one vector (LC-1 blends), then one permute puts them in lane order.
      B u = v[0];
      ((u = (J > 0 && contributes<LC, t, J>())
                ? xsimd::select(xsimd::make_batch_bool_constant<B, PosOf<LC, t, J>>(), v[J], u)
                : u),
       ...);
      return xsimd::swizzle(u, perm);
    } else {
      // LC even: positions collide, so permute each contributing vector, then blend.
      B out(T(0));
      ((out = contributes<LC, t, J>()
                  ? xsimd::select(xsimd::make_batch_bool_constant<B, FromVec<LC, t, J>>(), xsimd::swizzle(v[J], perm), out)
                  : out),
       ...);
      return out;
    }
  }

  /// out[t] = token t of the W reports whose LC*W tokens start at src.
  /// flatten: GCC otherwise leaves xsimd's batch_bool(bool...) constructor out of line for the
  /// larger LC, building every blend mask at run time (10x slower at LC = 8).
  template <std::size_t LC>
  [[gnu::flatten]] static void deinterleave(const T* src, B* out) noexcept {
    B v[LC];
    for (std::size_t j = 0; j < LC; ++j) v[j] = B::load_unaligned(src + j * W);
    [&]<std::size_t... Ts>(std::index_sequence<Ts...>) {
      ((out[Ts] = token<LC, Ts>(v, std::make_index_sequence<LC>())), ...);
    }(std::make_index_sequence<LC>());
  }
  template <std::size_t LC>
  static void deinterleave(const T* src, T* dst) noexcept {
    B out[LC];
    deinterleave<LC>(src, out);
    for (std::size_t t = 0; t < LC; ++t) out[t].store_aligned(dst + t * W);
  }

  /// Short uniform reports, CC axes known at compile time: the de-interleaved axes stay in
  /// registers for all heads, each head's weights are de-interleaved once, and the sums go
  /// straight to the context rows. No stack tile, no store-to-load round trip.
  template <std::size_t LC, std::size_t CC>
  static void uniform_registers(const KernelArgs<T>& a, std::size_t n) noexcept {
    const std::size_t H = std::size_t(a.heads) + 1, S = a.stride;
    const std::size_t first = static_cast<std::size_t>(a.token_offset[0]);
    for (std::size_t r0 = 0; r0 < n; r0 += W) {
      const std::size_t base = first + r0 * LC;
      B x[CC][LC];
      for (std::size_t c = 0; c < CC; ++c) deinterleave<LC>(a.axis[c] + base, x[c]);
      for (std::size_t h = a.baseline_given ? 1 : 0; h < H; ++h) {
        B w[LC];
        deinterleave<LC>(a.weight[h] + base, w);
        for (std::size_t c = 0; c < CC; ++c) {
          B s(T(0));
          for (std::size_t t = 0; t < LC; ++t) s = madd(w[t], x[c][t], s);
          s.store_unaligned(a.context + (h * CC + c) * S + r0);
        }
      }
      finish(a, r0);
    }
  }

  /// xsimd 8.1's batch::gather passes <A, T> to kernel::gather, which rules out the AVX2 and
  /// AVX-512 float/double overloads (they take only <A>), so it silently inserts lane by lane.
  /// Call the hardware gather directly where there is one.
  template <class IB>
  static B gather(const T* src, const IB& idx) noexcept {
    if constexpr (std::is_base_of_v<xsimd::avx2, A> || std::is_base_of_v<xsimd::avx512f, A>)
      return xsimd::kernel::gather<A>(src, idx, A{});
    else
      return B::gather(src, idx);
  }

  /// Uniform length L (LC = L when known at compile time, else 0): tiles of W reports,
  /// reports [0, n). Tokens of lane i, token t live at off[r0] + i*L + t.
  template <std::size_t LC, Strategy How>
  static void uniform(const KernelArgs<T>& a, std::size_t n, std::size_t L, std::size_t kmax, T* tile) noexcept {
    using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    using IB = xsimd::batch<I, A>;
    static_assert(IB::size == W);
    if constexpr (LC) L = LC, kmax = LC;
    const std::size_t rows = std::size_t(a.axes) + a.heads + 1;
    alignas(64) I lane_start[W];
    for (std::size_t i = 0; i < W; ++i) lane_start[i] = static_cast<I>(i * L);
    const IB starts = IB::load_aligned(lane_start);
    // Uniform reports are contiguous, so report r0 starts at off[0] + r0*L: reading off[r0]
    // instead would stream the offsets array from memory for nothing.
    const std::size_t first = static_cast<std::size_t>(a.token_offset[0]);
    for (std::size_t r0 = 0; r0 < n; r0 += W) {
      const std::size_t base = first + r0 * L;
      for (std::size_t tb = 0; tb < L; tb += kmax) {
        const std::size_t k = LC ? LC : lo<A>(kmax, L - tb);
        for (std::size_t q = 0; q < rows; ++q) {
          const T* src = row(a, q) + base + tb;
          T* dst = tile + q * kmax * W;
          if constexpr (How == Strategy::shuffle && LC > 0) {
            deinterleave<LC>(src, dst);
          } else if constexpr (How == Strategy::gather) {
            for (std::size_t t = 0; t < k; ++t) gather(src, starts + IB(static_cast<I>(t))).store_aligned(dst + t * W);
          } else {
            for (std::size_t i = 0; i < W; ++i)
              for (std::size_t t = 0; t < k; ++t) dst[t * W + i] = src[i * L + t];
          }
        }
        accumulate<LC>(a, r0, tile, k, kmax, tb == 0);
      }
      finish(a, r0);
    }
  }

  // ---- the ragged path (metrics_simd_ragged.hpp) ----
  static void ragged(const KernelArgs<T>& a, std::size_t n, std::size_t kmax, T* tile) noexcept;
  // Index type of the gathers (ragged_registers / ragged_gather).
  using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  using IB = xsimd::batch<I, A>;
  static constexpr bool kHardwareGather = std::is_base_of_v<xsimd::avx2, A> || std::is_base_of_v<xsimd::avx512f, A>;
  /// Rows (heads + 1) up to which ragged_rows keeps the contexts in registers for finish_from.
  static constexpr std::size_t kRegHeads = 5;
  /// ragged_pairs exists (contiguous loads + unpack instead of gathers): AVX2 and AVX-512, f64.
  static constexpr bool kPairLoads = kHardwareGather && std::is_same_v<T, double>;
  template <std::size_t K, std::size_t CC, class Load>
  static void ragged_rows(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0, const Load& load) noexcept;
  template <std::size_t K, std::size_t CC>
  static void ragged_registers(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0, const I* idx,
                               const B& len) noexcept;
  template <std::size_t K, std::size_t CC>
  static void ragged_pairs(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0, const std::size_t* b,
                           const B& len) noexcept;
  template <std::size_t K>
  static bool ragged_registers_axes(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0, const I* idx,
                                    const std::size_t* b, bool pairs, const B& len) noexcept;
  static void ragged_gather(const KernelArgs<T>* sa, std::size_t slots, std::size_t n, std::size_t kmax,
                            T* tile, bool pair_loads) noexcept;
  static void ragged_group(const KernelArgs<T>& a, std::size_t r0, std::size_t kmax, T* tile) noexcept;

  /// One context of one report with lanes across its tokens (f32 only): 4 independent
  /// accumulators, a horizontal sum, then the leftover tokens in order.
  static T dot(const T* w, const T* x, std::size_t len) noexcept {
    B s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
    std::size_t t = 0;
    for (; t + 4 * W <= len; t += 4 * W) {
      s0 = xsimd::fma(B::load_unaligned(w + t), B::load_unaligned(x + t), s0);
      s1 = xsimd::fma(B::load_unaligned(w + t + W), B::load_unaligned(x + t + W), s1);
      s2 = xsimd::fma(B::load_unaligned(w + t + 2 * W), B::load_unaligned(x + t + 2 * W), s2);
      s3 = xsimd::fma(B::load_unaligned(w + t + 3 * W), B::load_unaligned(x + t + 3 * W), s3);
    }
    for (; t + W <= len; t += W) s0 = xsimd::fma(B::load_unaligned(w + t), B::load_unaligned(x + t), s0);
    T s = xsimd::hadd((s0 + s1) + (s2 + s3));
    for (; t < len; ++t) s = s + w[t] * x[t];
    return s;
  }

  /// Lanes across tokens: contexts report by report, then the rest W reports at a time.
  static void long_reports(const KernelArgs<T>& a, std::size_t n) noexcept {
    const std::size_t C = a.axes, H = std::size_t(a.heads) + 1, S = a.stride;
    for (std::size_t r0 = 0; r0 < n; r0 += W) {
      for (std::size_t r = r0; r < r0 + W; ++r) {
        const std::size_t b = static_cast<std::size_t>(a.token_offset[r]);
        const std::size_t len = static_cast<std::size_t>(a.token_offset[r + 1]) - b;
        for (std::size_t h = a.baseline_given ? 1 : 0; h < H; ++h)
          for (std::size_t c = 0; c < C; ++c)
            a.context[(h * C + c) * S + r] = dot(a.weight[h] + b, a.axis[c] + b, len);
      }
      finish(a, r0);
    }
  }

  /// Long reports, order-preserving (f64): one report at a time, tokens in the outer loop and
  /// all HC x CC (head, axis) sums in registers in the inner one. Each sum still adds its tokens
  /// in order from +0.0 (bit-identical), but the sums are independent chains, so the adds
  /// overlap instead of waiting on one another as in the reference's one-sum-at-a-time loop.
  template <std::size_t HC, std::size_t CC>
  static void long_ordered(const KernelArgs<T>& a, std::size_t n) noexcept {
    const std::size_t S = a.stride;
    const T* w[HC];
    const T* x[CC];
    for (std::size_t h = 0; h < HC; ++h) w[h] = a.weight[h];
    for (std::size_t c = 0; c < CC; ++c) x[c] = a.axis[c];
    for (std::size_t r0 = 0; r0 < n; r0 += W) {
      for (std::size_t r = r0; r < r0 + W; ++r) {
        const std::size_t b = static_cast<std::size_t>(a.token_offset[r]);
        const std::size_t e = static_cast<std::size_t>(a.token_offset[r + 1]);
        T acc[HC][CC] = {};
        for (std::size_t t = b; t < e; ++t)
          for (std::size_t h = 0; h < HC; ++h)
            for (std::size_t c = 0; c < CC; ++c) acc[h][c] = acc[h][c] + w[h][t] * x[c][t];
        for (std::size_t h = a.baseline_given ? 1 : 0; h < HC; ++h)  // (a given baseline is summed, not stored)
          for (std::size_t c = 0; c < CC; ++c) a.context[(h * CC + c) * S + r] = acc[h][c];
      }
      finish(a, r0);
    }
  }
  template <std::size_t HC>
  static bool long_ordered_axes(const KernelArgs<T>& a, std::size_t n) noexcept {
    switch (a.axes) {
      case 1: long_ordered<HC, 1>(a, n); return true;
      case 2: long_ordered<HC, 2>(a, n); return true;
      case 3: long_ordered<HC, 3>(a, n); return true;
      default: return false;
    }
  }
  /// Compile-time heads 1..4 and axes 1..3 (15 sums at most stay in registers); false otherwise.
  static bool long_ordered(const KernelArgs<T>& a, std::size_t n) noexcept {
    switch (a.heads) {
      case 1: return long_ordered_axes<2>(a, n);
      case 2: return long_ordered_axes<3>(a, n);
      case 3: return long_ordered_axes<4>(a, n);
      case 4: return long_ordered_axes<5>(a, n);
      default: return false;
    }
  }

  /// Slots computed natively in one pass (ragged_gather); more run one by one.
  static constexpr std::size_t kMaxSlots = 16;

  // kernels.hpp's slot_args / copy_baseline, tagged with A: this object file's (AVX-compiled)
  // copies never stand in for the baseline build's (see the top of this file).
  static KernelArgs<T> slot(const KernelArgs<T>& a, std::uint32_t s) noexcept { return slot_args<T, A>(a, s); }
  static void copy_base(const KernelArgs<T>& from, const KernelArgs<T>& to, std::size_t r0, std::size_t r1) noexcept {
    copy_baseline<T, A>(from, to, r0, r1);
  }

  static std::size_t run(const KernelArgs<T>& a, Strategy how) noexcept {
    if (a.slots == 1) return run_slots(&a, 1, how);
    if (a.slots <= kMaxSlots) {
      KernelArgs<T> sa[kMaxSlots];
      for (std::uint32_t s = 0; s < a.slots; ++s) sa[s] = slot(a, s);
      return run_slots(sa, a.slots, how);
    }
    std::size_t done = 0;  // the same prefix for every slot: it depends on the shape only
    for (std::uint32_t s = 0; s < a.slots; ++s) {
      const KernelArgs<T> as = slot(a, s);
      if (s && as.baseline_given) copy_base(a, as, 0, a.n_reports / W * W);
      done = run_slots(&as, 1, how);
    }
    return done;
  }

  /// The reports [0, n) of every slot of sa[0..slots) (slot_args of one call).
  static std::size_t run_slots(const KernelArgs<T>* sa, std::size_t slots, Strategy how) noexcept {
    const KernelArgs<T>& a = sa[0];
    const std::size_t n = a.n_reports / W * W;
    if (n == 0) return 0;
    // Paths without native slots take them one by one, slot 0 first (later slots may copy its baseline).
    const auto each = [&](auto&& path) {
      for (std::size_t s = 0; s < slots; ++s) {
        if (s && sa[s].baseline_given) copy_base(a, sa[s], 0, n);
        path(sa[s]);
      }
    };
    const std::size_t L = a.uniform_length;
    const std::size_t tokens = static_cast<std::size_t>(a.token_offset[a.n_reports] - a.token_offset[0]);
    const bool long_reports_here = tokens >= kLongReport * a.n_reports;
    if constexpr (std::is_same_v<T, float>) {
      if (how == Strategy::tokens || (how == Strategy::automatic && long_reports_here)) {
        each([&](const KernelArgs<T>& as) { long_reports(as, n); });
        return n;
      }
    } else {
      // long_ordered() declines (false, nothing written) by heads/axes only: alike for every slot.
      if ((how == Strategy::tokens || (how == Strategy::automatic && long_reports_here)) && long_ordered(a, n)) {
        for (std::size_t s = 1; s < slots; ++s) {
          if (sa[s].baseline_given) copy_base(a, sa[s], 0, n);
          long_ordered(sa[s], n);
        }
        return n;
      }
    }
    // The tile must hold at least one token of every row; beyond that the scalar code is as good.
    const std::size_t rows = std::size_t(a.axes) + a.heads + 1;
    alignas(64) T tile[kTileBytes / sizeof(T)];
    const std::size_t kmax = lo<A>(kMaxBlock, kTileBytes / sizeof(T) / (rows * W));
    if (kmax == 0) return 0;
    // Lane offsets i*L must fit the gather's index type.
    const bool gather_ok = L * W < (std::size_t(1) << 30);
    const bool pair_loads = kPairLoads && (how == Strategy::automatic || how == Strategy::shuffle);
    if (L == 0 && kHardwareGather && W >= 4 && (how == Strategy::automatic || how == Strategy::gather || pair_loads) &&
        static_cast<std::uint64_t>(a.token_offset[a.n_reports]) < (std::uint64_t(1) << 30)) {
      // Measured on the main job's 3..6-token reports (Xeon, avx512 f64: gathers; AMD Zen 4, avx2
      // f64: contiguous pair loads): see docs/PERFORMANCE.md.
      ragged_gather(sa, slots, n, kmax, tile, pair_loads);
    } else if (L == 0 || how == Strategy::tokens) {
      each([&](const KernelArgs<T>& as) { ragged(as, n, kmax, tile); });
    } else if (how == Strategy::gather && gather_ok) {
      each([&](const KernelArgs<T>& as) { uniform_dispatch<Strategy::gather>(as, n, L, kmax, tile); });
    } else if (how == Strategy::shuffle && L <= kShuffleMax) {
      each([&](const KernelArgs<T>& as) { uniform_dispatch<Strategy::shuffle>(as, n, L, kmax, tile); });
    } else if (how != Strategy::automatic) {
      each([&](const KernelArgs<T>& as) { uniform_dispatch<Strategy::transpose>(as, n, L, kmax, tile); });
    } else if (L < 8 && W >= 4) {
      // Measured on Zen 3 (in cache, 2 heads, 2 axes; avx2 f32 L=3: 5.1 ns/report shuffle vs
      // 12.4 transpose vs 14.4 gather). From L = 8 on, or with 2 lanes, the permutes cost more
      // than the scalar copies.
      each([&](const KernelArgs<T>& as) { uniform_dispatch<Strategy::shuffle>(as, n, L, kmax, tile); });
    } else {
      each([&](const KernelArgs<T>& as) { uniform_dispatch<Strategy::transpose>(as, n, L, kmax, tile); });
    }
    return n;
  }

  template <Strategy How>
  static void uniform_dispatch(const KernelArgs<T>& a, std::size_t n, std::size_t L, std::size_t kmax, T* tile) noexcept {
    // Short uniform reports get a compile-time length so de-interleave and sums fully unroll.
    if constexpr (How == Strategy::shuffle) {
      const auto regs = [&]<std::size_t LC>() {
        switch (a.axes) {
          case 1: uniform_registers<LC, 1>(a, n); return true;
          case 2: uniform_registers<LC, 2>(a, n); return true;
          case 3: uniform_registers<LC, 3>(a, n); return true;
          default: return false;
        }
      };
      bool done = false;
      switch (L) {
        case 1: done = regs.template operator()<1>(); break;
        case 2: done = regs.template operator()<2>(); break;
        case 3: done = regs.template operator()<3>(); break;
        case 4: done = regs.template operator()<4>(); break;
        case 5: done = regs.template operator()<5>(); break;
        case 6: done = regs.template operator()<6>(); break;
        case 7: done = regs.template operator()<7>(); break;
        case 8: done = regs.template operator()<8>(); break;
        default: break;
      }
      if (done) return;
    }
    if (L <= kmax) {
      switch (L) {
        case 1: return uniform<1, How>(a, n, L, kmax, tile);
        case 2: return uniform<2, How>(a, n, L, kmax, tile);
        case 3: return uniform<3, How>(a, n, L, kmax, tile);
        case 4: return uniform<4, How>(a, n, L, kmax, tile);
        case 5: return uniform<5, How>(a, n, L, kmax, tile);
        case 6: return uniform<6, How>(a, n, L, kmax, tile);
        case 7: return uniform<7, How>(a, n, L, kmax, tile);
        case 8: return uniform<8, How>(a, n, L, kmax, tile);
        default: break;
      }
    }
    uniform<0, How>(a, n, L, kmax, tile);
  }
};

}  // namespace simd_detail
}  // namespace headsep::kernels
