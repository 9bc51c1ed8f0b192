// K<A, T>'s ragged path: reports of any lengths, W per tile, lane i = report r0 + i: the short ones
// through hardware gathers with every sum in registers (ragged_gather), the rest through the stack
// tile (ragged_group). metrics_simd_impl.hpp includes it and says why all of it is templated on A.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/metrics_simd_k.hpp"

namespace headsep::kernels {
namespace simd_detail {

/// Any lengths: tiles of W reports, each lane its own report, padded with +0.0 up to the
/// tile's longest report. Reports [0, n).
template <class A, class T>
inline void K<A, T>::ragged(const KernelArgs<T>& a, std::size_t n, std::size_t kmax, T* tile) noexcept {
  for (std::size_t r0 = 0; r0 < n; r0 += W) ragged_group(a, r0, kmax, tile);
}

/// Short ragged reports (the main job: 3..6 tokens) without the stack tile: W consecutive
/// reports, lane i = report r0 + i; load(row, v) puts token t of every lane of `row` in v[t]
/// (t < K), +0.0 in lanes past their report's end (for both the weight and the axis, so, as in
/// ragged(), they add exactly +0.0: bit-identical to the reference). The group's longest report
/// K and the axes CC are compile-time: every sum stays in registers.
/// Slots (sa[0..slots), slot_args of one multi-slot call) share the axes' loads: each slot then
/// loads only its weights. A slot s >= 1 with baseline_given takes slot 0's baseline contexts,
/// copied from the rows slot 0 just stored (still in L1).
/// (The class is named simd_detail::K here: the template parameter K hides its plain name.)
template <class A, class T>
template <std::size_t K, std::size_t CC, class Load>
inline void simd_detail::K<A, T>::ragged_rows(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0,
                                              const Load& load) noexcept {
  const KernelArgs<T>& a = sa[0];
  const std::size_t H = std::size_t(a.heads) + 1, S = a.stride;
  B x[CC][K];
  for (std::size_t c = 0; c < CC; ++c) load(a.axis[c], x[c]);
  // Up to kRegHeads rows (heads + 1) the contexts stay in registers for finish_from.
  B ctx[kRegHeads][CC];
  const bool regs = H <= kRegHeads;
  for (std::size_t sl = 0; sl < slots; ++sl) {
    const KernelArgs<T>& as = sa[sl];
    if (as.baseline_given)  // slot 0: given by the caller (in memory); later slots: slot 0's
      for (std::size_t c = 0; c < CC; ++c) {
        if (sl) ctx[0][c].store_unaligned(as.context + c * S + r0);
        else ctx[0][c] = B::load_unaligned(a.context + c * S + r0);
      }
    for (std::size_t h = as.baseline_given ? 1 : 0; h < H; ++h) {
      B w[K];
      load(as.weight[h], w);
      for (std::size_t c = 0; c < CC; ++c) {
        B s(T(0));
        for (std::size_t t = 0; t < K; ++t) s = madd(w[t], x[c][t], s);
        s.store_unaligned(as.context + (h * CC + c) * S + r0);
        if (h < kRegHeads) ctx[h][c] = s;
      }
    }
    if (regs) finish_from(as, r0, [&](std::size_t h, std::size_t c) { return ctx[h][c]; });
    else finish(as, r0);
  }
}

/// ragged_rows with one hardware gather per (row, token) at idx[t*W + i] = off[r0 + i] + t.
template <class A, class T>
template <std::size_t K, std::size_t CC>
inline void simd_detail::K<A, T>::ragged_registers(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0,
                                                   const I* idx, const B& len) noexcept {
  typename B::batch_bool_type in[K];
  IB ix[K];
  for (std::size_t t = 0; t < K; ++t) in[t] = B(T(t)) < len, ix[t] = IB::load_aligned(idx + t * W);
  ragged_rows<K, CC>(sa, slots, r0, [&](const T* row, B* v) {
    for (std::size_t t = 0; t < K; ++t) v[t] = xsimd::select(in[t], gather(row, ix[t]), B(T(0)));
  });
}

/// ragged_rows with contiguous loads instead of gathers (f64; gathers are slow on AMD Zen and,
/// for data outside L1, on the Xeon too): tokens t, t+1 of reports r0, r2 (and r4, r6 with
/// AVX-512) are one register built from 128-bit loads, those of r1, r3 (r5, r7) another, and
/// unpacklo/unpackhi of the two are token t and token t+1 of the W lanes (unpack works within
/// 128-bit lanes, so no lane-crossing shuffle is needed). Lanes past their report's end read the
/// next reports' tokens (the caller checks that every read stays below off[n_reports]) and are
/// masked to +0.0.
template <class A, class T>
template <std::size_t K, std::size_t CC>
inline void simd_detail::K<A, T>::ragged_pairs(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0,
                                               const std::size_t* b, const B& len) noexcept {
#if defined(__AVX2__)  // (kPairLoads implies it; the SSE2 object has no 256-bit types)
  if constexpr (kPairLoads) {
    typename B::batch_bool_type in[K];
    for (std::size_t t = 0; t < K; ++t) in[t] = B(T(t)) < len;
    // Tokens t, t+1 of reports b[j] (lower 128 bits) and b[j + 2] (upper).
    const auto two = [&](const T* row, std::size_t j, std::size_t t) {
      return _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(row + b[j] + t)), _mm_loadu_pd(row + b[j + 2] + t), 1);
    };
    ragged_rows<K, CC>(sa, slots, r0, [&](const T* row, B* v) {
      for (std::size_t t = 0; t < K; t += 2) {
        B even, odd;  // tokens t and t + 1 (xsimd 8.1 has no in-lane unpack of its own)
        if constexpr (W == 4) {
          const __m256d lo = two(row, 0, t), hi = two(row, 1, t);
          even = _mm256_unpacklo_pd(lo, hi), odd = _mm256_unpackhi_pd(lo, hi);
        } else {
#if defined(__AVX512F__)
          const __m512d lo = _mm512_insertf64x4(_mm512_castpd256_pd512(two(row, 0, t)), two(row, 4, t), 1);
          const __m512d hi = _mm512_insertf64x4(_mm512_castpd256_pd512(two(row, 1, t)), two(row, 5, t), 1);
          even = _mm512_unpacklo_pd(lo, hi), odd = _mm512_unpackhi_pd(lo, hi);
#endif
        }
        v[t] = xsimd::select(in[t], even, B(T(0)));
        if (t + 1 < K) v[t + 1] = xsimd::select(in[t + 1], odd, B(T(0)));
      }
    });
    return;
  }
#endif
  (void)sa, (void)slots, (void)r0, (void)b, (void)len;
}

template <class A, class T>
template <std::size_t K>
inline bool simd_detail::K<A, T>::ragged_registers_axes(const KernelArgs<T>* sa, std::size_t slots, std::size_t r0,
                                                        const I* idx, const std::size_t* b, bool pairs,
                                                        const B& len) noexcept {
  const auto go = [&]<std::size_t CC>() {
    if (pairs) ragged_pairs<K, CC>(sa, slots, r0, b, len);
    else ragged_registers<K, CC>(sa, slots, r0, idx, len);
    return true;
  };
  switch (sa[0].axes) {
    case 1: return go.template operator()<1>();
    case 2: return go.template operator()<2>();
    case 3: return go.template operator()<3>();
    default: return false;
  }
}

/// The short ragged path: per group of W reports, contiguous loads (`pair_loads`, where the
/// architecture has them and every read stays inside the batch's tokens) or gathers, then the
/// stack tile for a group with a report longer than kShuffleMax or axes past 3.
template <class A, class T>
inline void K<A, T>::ragged_gather(const KernelArgs<T>* sa, std::size_t slots, std::size_t n, std::size_t kmax,
                                   T* tile, bool pair_loads) noexcept {
  const KernelArgs<T>& a = sa[0];
  // A lane past its report's end reads its report's first token (a valid index; the value is
  // then replaced by +0.0); an empty report's lane reads token 0 of the row.
  alignas(64) I idx[kShuffleMax * W];
  alignas(64) T lenv[W];
  // f64: the offsets are the index type (below 2^30, checked by run()), so the W lanes' offsets
  // and lengths are two vector loads. The lengths (compared with t < kShuffleMax only: no clamp)
  // then never go through lenv: a vector load of W scalars just stored is not forwarded from the
  // store buffer, and on a Xeon that stall cost the AVX2 main job 8 % in L3 and 10 % from DRAM
  // (bench_kernels mainjob/f64/avx2, 4 interleaved rounds; AVX-512 within noise).
  constexpr bool kOffsetVectors = sizeof(I) == sizeof(std::uint64_t);
  const std::size_t end = static_cast<std::size_t>(a.token_offset[a.n_reports]);
  for (std::size_t r0 = 0; r0 < n; r0 += W) {
    std::size_t longest = 0, b[W], len[W];
    for (std::size_t i = 0; i < W; ++i) {
      b[i] = static_cast<std::size_t>(a.token_offset[r0 + i]);
      len[i] = static_cast<std::size_t>(a.token_offset[r0 + i + 1]) - b[i];
      longest = len[i] > longest ? len[i] : longest;
      if constexpr (!kOffsetVectors) lenv[i] = T(len[i] < kShuffleMax ? len[i] : kShuffleMax);
    }
    [[maybe_unused]] IB bv, lv;
    if constexpr (kOffsetVectors) {
      bv = IB::load_unaligned(reinterpret_cast<const I*>(a.token_offset + r0));
      lv = IB::load_unaligned(reinterpret_cast<const I*>(a.token_offset + r0 + 1)) - bv;
    }
    // The pair loads read tokens [b[i], b[i] + longest rounded up to even) of every lane.
    const bool pairs = pair_loads && b[W - 1] + ((longest + 1) & ~std::size_t(1)) <= end;
    if (longest <= kShuffleMax && !pairs) {
      if constexpr (kOffsetVectors) {  // one vector select per token instead of W scalar ones
        const IB past_end = xsimd::select(lv > IB(I(0)), bv, IB(I(0)));
        for (std::size_t t = 0; t < longest; ++t)
          xsimd::select(IB(static_cast<I>(t)) < lv, bv + IB(static_cast<I>(t)), past_end).store_aligned(idx + t * W);
      } else {
        for (std::size_t t = 0; t < longest; ++t)
          for (std::size_t i = 0; i < W; ++i) idx[t * W + i] = static_cast<I>(t < len[i] ? b[i] + t : len[i] ? b[i] : 0);
      }
    }
    B lens;
    if constexpr (kOffsetVectors) lens = xsimd::to_float(lv);
    else lens = B::load_aligned(lenv);
    bool done = false;
    switch (longest) {
      case 1: done = ragged_registers_axes<1>(sa, slots, r0, idx, b, pairs, lens); break;
      case 2: done = ragged_registers_axes<2>(sa, slots, r0, idx, b, pairs, lens); break;
      case 3: done = ragged_registers_axes<3>(sa, slots, r0, idx, b, pairs, lens); break;
      case 4: done = ragged_registers_axes<4>(sa, slots, r0, idx, b, pairs, lens); break;
      case 5: done = ragged_registers_axes<5>(sa, slots, r0, idx, b, pairs, lens); break;
      case 6: done = ragged_registers_axes<6>(sa, slots, r0, idx, b, pairs, lens); break;
      case 7: done = ragged_registers_axes<7>(sa, slots, r0, idx, b, pairs, lens); break;
      case 8: done = ragged_registers_axes<8>(sa, slots, r0, idx, b, pairs, lens); break;
      default: break;
    }
    if (done) continue;
    for (std::size_t sl = 0; sl < slots; ++sl) {
      if (sl && sa[sl].baseline_given) copy_base(a, sa[sl], r0, r0 + W);
      ragged_group(sa[sl], r0, kmax, tile);
    }
  }
}

/// Reports [r0, r0 + W) through the stack tile.
template <class A, class T>
inline void K<A, T>::ragged_group(const KernelArgs<T>& a, std::size_t r0, std::size_t kmax, T* tile) noexcept {
  const std::size_t rows = std::size_t(a.axes) + a.heads + 1;
  {
    std::size_t b[W], len[W], longest = 0;
    for (std::size_t i = 0; i < W; ++i) {
      b[i] = static_cast<std::size_t>(a.token_offset[r0 + i]);
      len[i] = static_cast<std::size_t>(a.token_offset[r0 + i + 1]) - b[i];
      longest = len[i] > longest ? len[i] : longest;
    }
    if (longest == 0) accumulate<0>(a, r0, tile, 0, kmax, true);
    for (std::size_t tb = 0; tb < longest; tb += kmax) {
      const std::size_t k = lo<A>(kmax, longest - tb);
      for (std::size_t q = 0; q < rows; ++q) {
        const T* src = row(a, q);
        T* dst = tile + q * kmax * W;
        for (std::size_t i = 0; i < W; ++i) {
          const std::size_t have = len[i] > tb ? lo<A>(len[i] - tb, k) : 0;
          const T* s = src + b[i] + tb;
          std::size_t t = 0;
          for (; t < have; ++t) dst[t * W + i] = s[t];
          for (; t < k; ++t) dst[t * W + i] = T(0);
        }
      }
      accumulate<0>(a, r0, tile, k, kmax, tb == 0);
    }
    finish(a, r0);
  }
}

}  // namespace simd_detail
}  // namespace headsep::kernels
