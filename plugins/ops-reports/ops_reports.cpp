// ops-reports — synthetic operations reports modelled on the seed: each token is a decision,
// evidence or condition word with feature values on decision_axis / evidence_axis /
// condition_axis (its own axis high, the others low). Every value derives from (seed, report
// index, token index) through splitmix64, a counter-based generator, so chunk i is the same
// whatever the chunk size or the thread that generates it. No per-token allocation. chunk() runs
// in three dispatched steps (report hashes, per-token staging, feature values): AVX-512 where the
// CPU has F + DQ, else AVX2, else the plain loops (HEADSEP_SIMD=scalar/sse2/avx2 caps the level).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/plugin_sdk.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using namespace headsep::sdk;

// splitmix64's finaliser: a bijective 64-bit mix.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
// Uniform integer in [0, n) from 16 random bits (multiply-shift: no division).
constexpr std::uint32_t pick16(std::uint64_t bits16, std::uint32_t n) noexcept {
  return static_cast<std::uint32_t>(((bits16 & 0xffff) * n) >> 16);
}

// Feature values k/10 for k = 0..18, as the seed writes them (exact decimal parses).
constexpr std::array<double, 19> kTenths = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
                                            1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8};

constexpr std::uint64_t kStep = 0xd1b54a32d192ed03ULL;  // token i of a report mixes h + (i + 1) * kStep

// chunk() in steps: (0) each report's hash; (1, AVX-512 path) per token its mix input x and its
// column code (0..2 for the first three tokens, which cover decision, evidence and condition
// rotated; 3 = drawn from the mix), staged as bits in feature columns 0 and 1; (2) from those, in
// place, main (0.8..1.8) in the token's column and two low values (0.0..0.6) in the next two.
// The plain path does (1) and (2) per token (tokens_scalar).
inline void token_features(std::uint64_t x, std::uint64_t code, double& f0, double& f1, double& f2) noexcept {
  const std::uint64_t b = mix(x);
  const std::uint32_t c = code < 3 ? static_cast<std::uint32_t>(code) : pick16(b, 3);
  const double main = kTenths[8 + pick16(b >> 16, 11)];
  const double lo1 = kTenths[pick16(b >> 32, 7)], lo2 = kTenths[pick16(b >> 48, 7)];
  // f[c] = main, f[(c + 1) % 3] = lo1, f[(c + 2) % 3] = lo2, as selects.
  f0 = c == 0 ? main : c == 1 ? lo2 : lo1;
  f1 = c == 1 ? main : c == 0 ? lo1 : lo2;
  f2 = c == 2 ? main : c == 1 ? lo1 : lo2;
}

// Step (0): hash[r] = mix(start + r * kGolden), the hash of each report of a chunk.
void hashes_scalar(std::uint64_t start, std::uint64_t n, std::uint64_t* hash) {
  for (std::uint64_t r = 0; r < n; ++r) hash[r] = mix(start + r * kGolden);
}

// Step (2) over n staged tokens (the AVX-512 path's tail).
void features_scalar(double* f0, double* f1, double* f2, std::uint64_t n) {
  for (std::uint64_t t = 0; t < n; ++t)
    token_features(std::bit_cast<std::uint64_t>(f0[t]), std::bit_cast<std::uint64_t>(f1[t]), f0[t], f1[t], f2[t]);
}

// Steps (1) and (2) in one pass per token, for the plain path (no staging round trip).
void tokens_scalar(const std::uint64_t* hash, const std::uint64_t* off, std::uint64_t n, double* f0, double* f1, double* f2) {
  static constexpr std::uint8_t kFirst[3][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}};  // (i + rot) % 3
  static constexpr std::uint8_t kNext[3][2] = {{1, 2}, {2, 0}, {0, 1}};  // (c + 1) % 3, (c + 2) % 3
  double* f[3] = {f0, f1, f2};
  for (std::uint64_t r = 0; r < n; ++r) {
    const std::uint64_t h = hash[r];
    const std::uint8_t* first = kFirst[pick16(h >> 16, 3)];
    for (std::uint64_t t = off[r], i = 0; t < off[r + 1]; ++t, ++i) {
      const std::uint64_t b = mix(h + (i + 1) * kStep);
      const std::uint32_t c = i < 3 ? first[i] : pick16(b, 3);
      // Stores through the column index: a data-dependent select here would be a branch.
      f[c][t] = kTenths[8 + pick16(b >> 16, 11)];
      f[kNext[c][0]][t] = kTenths[pick16(b >> 32, 7)];
      f[kNext[c][1]][t] = kTenths[pick16(b >> 48, 7)];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// 8 tokens per vector: the mix with vpmullq, the tenths from registers (vpermpd), the columns by
// masked blends; the last n % 8 tokens through the scalar code. (GCC 12's intrinsics headers
// start some results from _mm512_undefined_*: a false -Wmaybe-uninitialized.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
[[gnu::target("avx512f,avx512dq")]] inline __m512i mix_avx512(__m512i x) {
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)), _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)), _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

[[gnu::target("avx512f,avx512dq")]] void hashes_avx512(std::uint64_t start, std::uint64_t n, std::uint64_t* hash) {
  __m512i v = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(start)),
                               _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(static_cast<long long>(kGolden))));
  const __m512i step = _mm512_set1_epi64(static_cast<long long>(8 * kGolden));
  std::uint64_t r = 0;
  for (; r + 8 <= n; r += 8, v = _mm512_add_epi64(v, step)) _mm512_storeu_si512(hash + r, mix_avx512(v));
  hashes_scalar(start + r * kGolden, n - r, hash + r);
}

// Step (1): one report's tokens 8 at a time with masked stores (no branch on the length below 9 tokens).
[[gnu::target("avx512f,avx512dq")]] void stage_avx512(const std::uint64_t* hash, const std::uint64_t* off, std::uint64_t n, double* x,
                                                      double* code) {
  const __m512i steps = _mm512_mullo_epi64(_mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8), _mm512_set1_epi64(static_cast<long long>(kStep)));
  const __m512i block = _mm512_set1_epi64(static_cast<long long>(8 * kStep)), drawn = _mm512_set1_epi64(3);
  const __m512i first[3] = {_mm512_setr_epi64(0, 1, 2, 3, 3, 3, 3, 3), _mm512_setr_epi64(1, 2, 0, 3, 3, 3, 3, 3),
                            _mm512_setr_epi64(2, 0, 1, 3, 3, 3, 3, 3)};
  for (std::uint64_t r = 0; r < n; ++r) {
    const std::uint64_t h = hash[r], t0 = off[r], len = off[r + 1] - t0;
    __m512i xv = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(h)), steps);
    const auto m = static_cast<__mmask8>((1u << std::min<std::uint64_t>(len, 8)) - 1);
    _mm512_mask_storeu_epi64(x + t0, m, xv);
    _mm512_mask_storeu_epi64(code + t0, m, first[pick16(h >> 16, 3)]);
    for (std::uint64_t i = 8; i < len; i += 8) {
      xv = _mm512_add_epi64(xv, block);
      const auto mi = static_cast<__mmask8>((1u << std::min<std::uint64_t>(len - i, 8)) - 1);
      _mm512_mask_storeu_epi64(x + t0 + i, mi, xv);
      _mm512_mask_storeu_epi64(code + t0 + i, mi, drawn);
    }
  }
}

[[gnu::target("avx512f,avx512dq")]] void features_avx512(double* f0, double* f1, double* f2, std::uint64_t n) {
  const __m512i low16 = _mm512_set1_epi64(0xffff), three = _mm512_set1_epi64(3), seven = _mm512_set1_epi64(7),
                eleven = _mm512_set1_epi64(11), one = _mm512_set1_epi64(1), two = _mm512_set1_epi64(2);
  const __m512d hi_a = _mm512_loadu_pd(&kTenths[8]);                                   // 0.8 .. 1.5
  const __m512d hi_b = _mm512_setr_pd(kTenths[16], kTenths[17], kTenths[18], 0, 0, 0, 0, 0);  // 1.6 .. 1.8
  const __m512d lo = _mm512_loadu_pd(&kTenths[0]);                                     // 0.0 .. 0.7
  std::uint64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m512i b = mix_avx512(_mm512_loadu_si512(f0 + t));
    const __m512i code = _mm512_loadu_si512(f1 + t);
    // pick16(v, k) = ((v & 0xffff) * k) >> 16: a 32x32 -> 64 multiply is enough.
    const __m512i drawn = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_and_si512(b, low16), three), 16);
    const __m512i c = _mm512_mask_blend_epi64(_mm512_cmpeq_epi64_mask(code, three), code, drawn);
    const __m512i i_main = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_and_si512(_mm512_srli_epi64(b, 16), low16), eleven), 16);
    const __m512i i_lo1 = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_and_si512(_mm512_srli_epi64(b, 32), low16), seven), 16);
    const __m512i i_lo2 = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(b, 48), seven), 16);
    const __m512d main = _mm512_permutex2var_pd(hi_a, i_main, hi_b);
    const __m512d lo1 = _mm512_permutexvar_pd(i_lo1, lo), lo2 = _mm512_permutexvar_pd(i_lo2, lo);
    const __mmask8 c0 = _mm512_cmpeq_epi64_mask(c, _mm512_setzero_si512()), c1 = _mm512_cmpeq_epi64_mask(c, one),
                   c2 = _mm512_cmpeq_epi64_mask(c, two);
    // f0 = c0 ? main : c1 ? lo2 : lo1;  f1 = c1 ? main : c0 ? lo1 : lo2;  f2 = c2 ? main : c1 ? lo1 : lo2
    _mm512_storeu_pd(f0 + t, _mm512_mask_blend_pd(c0, _mm512_mask_blend_pd(c1, lo1, lo2), main));
    _mm512_storeu_pd(f1 + t, _mm512_mask_blend_pd(c1, _mm512_mask_blend_pd(c0, lo2, lo1), main));
    _mm512_storeu_pd(f2 + t, _mm512_mask_blend_pd(c2, _mm512_mask_blend_pd(c1, lo2, lo1), main));
  }
  features_scalar(f0 + t, f1 + t, f2 + t, n - t);
}
#pragma GCC diagnostic pop

void tokens_avx512(const std::uint64_t* hash, const std::uint64_t* off, std::uint64_t n, double* f0, double* f1, double* f2) {
  stage_avx512(hash, off, n, f0, f1);
  features_avx512(f0, f1, f2, off[n]);
}

// AVX2: the same steps 4 lanes wide. No 64-bit multiply: x * c from three 32x32 -> 64 products
// (the high x high one only reaches bits >= 64); the tenths by gathers; columns by blends.
[[gnu::target("avx2")]] inline __m256i mul64_avx2(__m256i x, std::uint64_t c) {
  const __m256i c_lo = _mm256_set1_epi64x(static_cast<long long>(c & 0xffffffff)), c_hi = _mm256_set1_epi64x(static_cast<long long>(c >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), c_lo), _mm256_mul_epu32(x, c_hi));
  return _mm256_add_epi64(_mm256_mul_epu32(x, c_lo), _mm256_slli_epi64(cross, 32));
}
[[gnu::target("avx2")]] inline __m256i mix_avx2(__m256i x) {
  x = mul64_avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)), 0xbf58476d1ce4e5b9ULL);
  x = mul64_avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)), 0x94d049bb133111ebULL);
  return _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
}

[[gnu::target("avx2")]] void hashes_avx2(std::uint64_t start, std::uint64_t n, std::uint64_t* hash) {
  __m256i v = _mm256_setr_epi64x(static_cast<long long>(start), static_cast<long long>(start + kGolden),
                                 static_cast<long long>(start + 2 * kGolden), static_cast<long long>(start + 3 * kGolden));
  const __m256i step = _mm256_set1_epi64x(static_cast<long long>(4 * kGolden));
  std::uint64_t r = 0;
  for (; r + 4 <= n; r += 4, v = _mm256_add_epi64(v, step))
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hash + r), mix_avx2(v));
  hashes_scalar(start + r * kGolden, n - r, hash + r);
}

// Step (1): tokens 0..7 of a report with two masked stores each (no branch below 9 tokens).
[[gnu::target("avx2")]] void stage_avx2(const std::uint64_t* hash, const std::uint64_t* off, std::uint64_t n, double* x, double* code) {
  const __m256i steps = _mm256_setr_epi64x(static_cast<long long>(kStep), static_cast<long long>(2 * kStep),
                                           static_cast<long long>(3 * kStep), static_cast<long long>(4 * kStep));
  const __m256i block = _mm256_set1_epi64x(static_cast<long long>(4 * kStep)), drawn = _mm256_set1_epi64x(3);
  const __m256i iota = _mm256_setr_epi64x(0, 1, 2, 3), four = _mm256_set1_epi64x(4);
  const __m256i first[3] = {_mm256_setr_epi64x(0, 1, 2, 3), _mm256_setr_epi64x(1, 2, 0, 3), _mm256_setr_epi64x(2, 0, 1, 3)};
  for (std::uint64_t r = 0; r < n; ++r) {
    const std::uint64_t h = hash[r], t0 = off[r], len = off[r + 1] - t0;
    auto* xp = reinterpret_cast<long long*>(x + t0);
    auto* cp = reinterpret_cast<long long*>(code + t0);
    const __m256i lenv = _mm256_set1_epi64x(static_cast<long long>(std::min<std::uint64_t>(len, 8)));
    __m256i xv = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(h)), steps);
    __m256i m = _mm256_cmpgt_epi64(lenv, iota);
    _mm256_maskstore_epi64(xp, m, xv);
    _mm256_maskstore_epi64(cp, m, first[pick16(h >> 16, 3)]);
    xv = _mm256_add_epi64(xv, block);
    m = _mm256_cmpgt_epi64(lenv, _mm256_add_epi64(iota, four));
    _mm256_maskstore_epi64(xp + 4, m, xv);
    _mm256_maskstore_epi64(cp + 4, m, drawn);
    for (std::uint64_t i = 8; i < len; i += 4) {
      xv = _mm256_add_epi64(xv, block);
      m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<long long>(len - i)), iota);
      _mm256_maskstore_epi64(xp + i, m, xv);
      _mm256_maskstore_epi64(cp + i, m, drawn);
    }
  }
}

[[gnu::target("avx2")]] void features_avx2(double* f0, double* f1, double* f2, std::uint64_t n) {
  const __m256i low16 = _mm256_set1_epi64x(0xffff), three = _mm256_set1_epi64x(3), seven = _mm256_set1_epi64x(7),
                eleven = _mm256_set1_epi64x(11), one = _mm256_set1_epi64x(1), two = _mm256_set1_epi64x(2);
  std::uint64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    const __m256i b = mix_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(f0 + t)));
    const __m256i code = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(f1 + t));
    const __m256i drawn = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_and_si256(b, low16), three), 16);
    const __m256i c = _mm256_blendv_epi8(code, drawn, _mm256_cmpeq_epi64(code, three));
    const __m256i i_main = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_and_si256(_mm256_srli_epi64(b, 16), low16), eleven), 16);
    const __m256i i_lo1 = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_and_si256(_mm256_srli_epi64(b, 32), low16), seven), 16);
    const __m256i i_lo2 = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(b, 48), seven), 16);
    const __m256d main = _mm256_i64gather_pd(&kTenths[8], i_main, 8);
    const __m256d lo1 = _mm256_i64gather_pd(kTenths.data(), i_lo1, 8), lo2 = _mm256_i64gather_pd(kTenths.data(), i_lo2, 8);
    const __m256d c0 = _mm256_castsi256_pd(_mm256_cmpeq_epi64(c, _mm256_setzero_si256()));
    const __m256d c1 = _mm256_castsi256_pd(_mm256_cmpeq_epi64(c, one)), c2 = _mm256_castsi256_pd(_mm256_cmpeq_epi64(c, two));
    _mm256_storeu_pd(f0 + t, _mm256_blendv_pd(_mm256_blendv_pd(lo1, lo2, c1), main, c0));
    _mm256_storeu_pd(f1 + t, _mm256_blendv_pd(_mm256_blendv_pd(lo2, lo1, c0), main, c1));
    _mm256_storeu_pd(f2 + t, _mm256_blendv_pd(_mm256_blendv_pd(lo2, lo1, c1), main, c2));
  }
  features_scalar(f0 + t, f1 + t, f2 + t, n - t);
}

void tokens_avx2(const std::uint64_t* hash, const std::uint64_t* off, std::uint64_t n, double* f0, double* f1, double* f2) {
  stage_avx2(hash, off, n, f0, f1);
  features_avx2(f0, f1, f2, off[n]);
}
#endif

// The three steps of chunk(), one set per instruction set.
struct Impl {
  void (*hashes)(std::uint64_t, std::uint64_t, std::uint64_t*);
  void (*tokens)(const std::uint64_t*, const std::uint64_t*, std::uint64_t, double*, double*, double*);
};
constexpr Impl kScalar{&hashes_scalar, &tokens_scalar};
#if defined(__GNUC__) && defined(__x86_64__)
constexpr Impl kAvx512{&hashes_avx512, &tokens_avx512};
constexpr Impl kAvx2{&hashes_avx2, &tokens_avx2};
#endif

constexpr std::string_view kVocab[3][8] = {
    {"정지결정", "보류결정", "차단작업", "재가동승인", "stop_decision", "hold_decision", "shutdown_order", "restart_approval"},
    {"압력이상", "진동기록", "잠금확인", "온도상승", "pressure_anomaly", "vibration_log", "lock_check", "temperature_rise"},
    {"복귀조건", "재가동조건", "예외조건", "분기조건", "return_condition", "restart_condition", "exception_clause", "branch_condition"},
};

class OpsReports final : public ScenarioGenerator {
 public:
  explicit OpsReports(const Params& p) {
    const auto reports = p.get_int("reports"), lo = p.get_int("min_tokens"), hi = p.get_int("max_tokens");
    if (reports < 0) throw ParamError("parameter 'reports' must be >= 0, got " + std::to_string(reports));
    if (lo < 1) throw ParamError("parameter 'min_tokens' must be >= 1, got " + std::to_string(lo));
    if (hi < lo || hi > 65536)
      throw ParamError("parameter 'max_tokens' must be in min_tokens..65536, got " + std::to_string(hi));
    reports_ = static_cast<std::uint64_t>(reports);
    min_ = static_cast<std::uint32_t>(lo);
    span_ = static_cast<std::uint32_t>(hi - lo + 1);
    key_ = mix(static_cast<std::uint64_t>(p.get_int("seed")) + kGolden);
    names_ = p.get_bool("names");
    const auto d = p.get_int("d_model");
    if (d < 0 || d > 4096) throw ParamError("parameter 'd_model' must be in 0..4096, got " + std::to_string(d));
    d_model_ = static_cast<std::uint32_t>(d);
    noise_ = p.get_double("noise");
    if (!(noise_ >= 0 && noise_ <= 100)) throw ParamError("parameter 'noise' must be in 0..100");
    // Each of the 24 vocabulary words gets a fixed embedding: uniform(-√3, √3) per dimension
    // (unit variance), drawn from (seed, word, dimension) so it does not depend on chunking.
    vocab_embedding_.resize(std::size_t(24) * d_model_);
    for (std::size_t wi = 0; wi < 24; ++wi)
      for (std::size_t j = 0; j < d_model_; ++j)
        vocab_embedding_[wi * d_model_ + j] = unit(mix(key_ ^ (0x5bd1e995ULL * (wi + 1)) ^ mix(j + 1)));
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    // HEADSEP_SIMD (as for the engine's kernels) caps the level, so tests can hold every path to
    // the same bits: scalar/sse2 -> the plain loop, avx2 -> 4 tokens per vector, otherwise
    // AVX-512 (F + DQ) where present.
    const char* cap = std::getenv("HEADSEP_SIMD");
    const std::string level = cap ? cap : "";
    const bool low = level == "scalar" || level == "sse2";
    if (!low && __builtin_cpu_supports("avx2")) impl_ = kAvx2;
    if (!low && level != "avx2" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) impl_ = kAvx512;
#endif
  }

  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = {"decision_axis", "evidence_axis", "condition_axis"};
    s.random_access = true;
    s.total_reports = reports_;
    s.d_model = d_model_;
    return s;
  }

  // Concurrent for distinct indices: reads only immutable members (and thread-local scratch).
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    if (max_reports == 0 || index >= (reports_ + max_reports - 1) / max_reports) return false;
    const std::uint64_t first = index * max_reports;
    const std::uint64_t n = std::min(max_reports, reports_ - first);
    // Each report's hash once (it sets the length and seeds every token).
    thread_local std::vector<std::uint64_t> hashes;
    hashes.resize(n);
    impl_.hashes(key_ + (first + 1) * kGolden, n, hashes.data());
    auto off = out.token_offsets(n);
    off[0] = 0;
    for (std::uint64_t r = 0; r < n; ++r) off[r + 1] = off[r] + length(hashes[r]);
    const std::uint64_t n_tokens = off[n];
    double* f[3] = {out.feature(0, n_tokens).data(), out.feature(1, n_tokens).data(), out.feature(2, n_tokens).data()};
    // The AVX-512 path stages each token's mix input and column code in columns 0 and 1 (as
    // bits), then turns them into the three feature values in place: that step has no per-report
    // structure left, so it runs 8 tokens per vector. The plain path does both per token.
    impl_.tokens(hashes.data(), off.data(), n, f[0], f[1], f[2]);
    if (names_ || d_model_) {
      float* emb = d_model_ ? out.embeddings(n_tokens, d_model_).data() : nullptr;
      std::string id;
      for (std::uint64_t r = 0; r < n; ++r) {
        const std::uint64_t h = hashes[r];
        const std::uint32_t rot = pick16(h >> 16, 3);
        const std::uint64_t t0 = off[r], len = off[r + 1] - t0;
        for (std::uint64_t i = 0; i < len; ++i) {
          const std::uint64_t b = mix(h + (i + 1) * kStep);
          const std::uint32_t c = i < 3 ? static_cast<std::uint32_t>((i + rot) % 3) : pick16(b, 3);
          if (names_) out.token_name(kVocab[c][(b >> 8) & 7]);
          if (emb) {
            // The word's embedding plus per-token noise (from (seed, report, token, dimension)).
            const float* e = &vocab_embedding_[(c * 8 + ((b >> 8) & 7)) * d_model_];
            float* xe = emb + (t0 + i) * d_model_;
            const float k = static_cast<float>(noise_);
            for (std::uint32_t j = 0; j < d_model_; ++j) xe[j] = e[j] + k * unit(mix(b + (j + 1) * kGolden));
          }
        }
        if (names_) {
          id = "ops-" + std::to_string(first + r);
          out.report_id(id);
        }
      }
    }
    return true;
  }

 private:
  std::uint64_t report_hash(std::uint64_t r) const noexcept { return mix(key_ + (r + 1) * kGolden); }
  std::uint32_t length(std::uint64_t h) const noexcept {
    return min_ + static_cast<std::uint32_t>(((h >> 32) * span_) >> 32);
  }

  // Uniform in (-√3, √3) from 24 random bits: unit variance.
  static float unit(std::uint64_t bits) noexcept {
    return static_cast<float>((double((bits >> 40) & 0xffffff) + 0.5) / 16777216.0 * 3.4641016151377544 - 1.7320508075688772);
  }

  std::uint64_t reports_ = 0, key_ = 0;
  std::uint32_t min_ = 3, span_ = 4, d_model_ = 0;
  double noise_ = 0.1;
  std::vector<float> vocab_embedding_;  // [word][d_model]
  bool names_ = false;
  Impl impl_ = kScalar;
};

constexpr headsep_param_spec kParams[] = {
    {"reports", HEADSEP_PARAM_INT, "1000", "number of reports to generate"},
    {"seed", HEADSEP_PARAM_INT, "1", "random seed: the same seed gives the same reports whatever the chunking"},
    {"min_tokens", HEADSEP_PARAM_INT, "3", "shortest report, in tokens"},
    {"max_tokens", HEADSEP_PARAM_INT, "6", "longest report, in tokens"},
    {"names", HEADSEP_PARAM_BOOL, "false", "emit report ids (ops-<index>) and token names (slower)"},
    {"d_model", HEADSEP_PARAM_INT, "0", "token embedding width for attention schemes (0 = none): a fixed random vector per vocabulary word plus noise"},
    {"noise", HEADSEP_PARAM_FLOAT, "0.1", "scale of the per-token noise added to each word's embedding (d_model > 0)"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(OpsReports, "ops-reports", "0.1.0",
                        "Synthetic operations reports: decision/evidence/condition tokens, deterministic per seed",
                        kParams)
