// The fused attention kernel at every compiled and supported level against the scalar reference,
// against hand-computed softmax values and against metrics recomputed in double from the
// materialised maps (tolerances: attention_cases.hpp); project_rows at every level against its
// scalar reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "kernels/attention_simd.hpp"

#include "attention_cases.hpp"

using namespace headsep;
using namespace attention_test;

TEST_CASE("every level agrees with the scalar reference (sizes hitting the vector tails)", "[attention]") {
  const auto levels = levels_under_test();
  const std::uint32_t ns[] = {1, 2, 3, 7, 17, 64};
  const std::uint32_t ds[] = {1, 3, 5, 17, 33};
  const AttentionConfig configs[] = {
      {QueryMode::all, 0, MaskKind::none},  {QueryMode::all, 0, MaskKind::causal},
      {QueryMode::first, 0, MaskKind::none}, {QueryMode::last, 0, MaskKind::causal},
      {QueryMode::index, 2, MaskKind::none}, {QueryMode::index, -2, MaskKind::causal},
      {QueryMode::index, 99, MaskKind::none},
      // sliding windows (Mistral's): one key, a few, and one the short reports fit in
      {QueryMode::all, 0, MaskKind::causal, 1}, {QueryMode::all, 0, MaskKind::causal, 5},
      {QueryMode::last, 0, MaskKind::causal, 16},
      // soft-capped logits (Gemma-2's): caps that bite, with and without masks and windows
      {QueryMode::all, 0, MaskKind::none, 0, 0.5f}, {QueryMode::all, 0, MaskKind::causal, 5, 1.0f},
      {QueryMode::last, 0, MaskKind::causal, 0, 2.0f}};
  AttentionScratch ref_scratch, scratch;
  std::size_t runs = 0, failures = 0;
  std::uint64_t seed = 1;
  for (std::uint32_t n : ns)
    for (std::uint32_t heads = 1; heads <= 4; ++heads)
      for (std::size_t di = 0; di < std::size(ds); ++di)
        for (const auto& config : configs) {
          // d_k and d_v differ, the baseline has its own widths; padding columns 0 or 3.
          const std::uint32_t dk = ds[di], dv = ds[(di + 2) % std::size(ds)];
          // Every fourth case the baseline has no values (d_v = 0), as AttentionPlan builds it.
          const std::uint32_t dk0 = ds[(di + 1) % std::size(ds)], dv0 = seed % 4 ? ds[(di + 3) % std::size(ds)] : 0;
          const Case c = make_case(n, heads, dk0, dk, dv0, dv, 1 + seed % 3, config, seed, seed % 2 ? 3 : 0);
          ++seed;
          const Result ref = run_kernel(c, SimdLevel::scalar, ref_scratch);
          for (auto level : levels) {
            if (level == SimdLevel::scalar) continue;
            ++runs;
            const std::string err = compare(c, ref, run_kernel(c, level, scratch));
            if (!err.empty() && ++failures <= 10) FAIL_CHECK(to_string(level) << " " << describe(c) << ": " << err);
          }
        }
  INFO(runs << " kernel runs");
  CHECK(failures == 0);
}

TEST_CASE("attention_reports: small reports share vector lanes and keep the bits they get alone", "[attention]") {
  // One plan's shape, n = 1..9 (9 is past the lane kernel's limit), counts that leave every lane
  // width's last group partly filled; each report's outputs must be bit-identical to
  // attention_report on it alone, in any order, and within the tolerance of the scalar reference.
  const AttentionConfig configs[] = {{QueryMode::all, 0, MaskKind::none},
                                     {QueryMode::all, 0, MaskKind::causal},
                                     {QueryMode::last, 0, MaskKind::none},
                                     {QueryMode::all, 0, MaskKind::causal, 3}};  // windowed past n = 3
  AttentionScratch scratch, ref_scratch;
  std::uint64_t seed = 900;
  for (const auto& config : configs)
    for (std::uint32_t heads : {1u, 2u, 3u}) {
      std::vector<Case> cases;
      for (std::size_t i = 0; i < 37; ++i)
        cases.push_back(make_case(1 + std::uint32_t(i * 7 % 9), heads, 4, 2, 3, 2, 2, config, ++seed, 1));
      for (auto level : levels_under_test()) {
        std::vector<Result> alone, batch(cases.size());
        for (const auto& c : cases) alone.push_back(run_kernel(c, level, scratch));
        for (bool reversed : {false, true}) {
          std::vector<AttentionReport> in;
          std::vector<AttentionReportOut> out;
          std::vector<std::size_t> order(cases.size());
          for (std::size_t i = 0; i < order.size(); ++i) order[i] = reversed ? order.size() - 1 - i : i;
          for (std::size_t i : order) {
            const Case& c = cases[i];
            Result& r = batch[i];
            r = Result{};
            r.H = c.heads, r.C = c.axes, r.P = pairs(c.heads);
            r.ctx.assign((r.H + 1) * r.C * 3 + 1, kSentinel);
            r.hs.assign((r.H + 1) * kHeadStats * 3, kSentinel);
            r.ps.assign(r.P * kPairStats * 3 + 1, kSentinel);
            r.maps.assign((r.H + 1) * c.nq() * c.n + 1, -7.0f);
            AttentionReportOut o;
            o.context = r.ctx.data() + 1, o.head_stats = r.hs.data() + 1, o.pair_stats = r.ps.data() + 1, o.stride = 3;
            o.maps = r.maps.data();
            in.push_back(c.in()), out.push_back(o);
          }
          attention_reports(in.data(), out.data(), in.size(), level, scratch);
          for (std::size_t i = 0; i < cases.size(); ++i) {
            INFO(to_string(level) << " report " << i << " " << describe(cases[i]) << (reversed ? " reversed" : ""));
            CHECK(batch[i].ctx == alone[i].ctx);
            CHECK(batch[i].hs == alone[i].hs);
            CHECK(batch[i].ps == alone[i].ps);
            CHECK(std::equal(batch[i].maps.begin(), batch[i].maps.end() - 1, alone[i].maps.begin()));
            CHECK(untouched(batch[i].ctx));
            CHECK(untouched(batch[i].hs));
            CHECK(untouched(batch[i].ps));
            CHECK(compare(cases[i], run_kernel(cases[i], SimdLevel::scalar, ref_scratch), batch[i]) == "");
          }
        }
      }
    }
}

TEST_CASE("attention_reports: reports side by side in one output array (a batch's layout) keep the bits they get alone",
          "[attention]") {
  // A batch's metric rows hold report i in column i. Full groups of equal-n reports in adjacent
  // columns take the lane kernel's whole-vector stores, the last partial group lane by lane; both
  // must give each report the bits attention_report gives it alone, and write nothing else.
  const AttentionConfig configs[] = {{QueryMode::all, 0, MaskKind::none},
                                     {QueryMode::all, 0, MaskKind::causal},
                                     {QueryMode::last, 0, MaskKind::none}};
  auto same = [](double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); };
  AttentionScratch scratch;
  std::uint64_t seed = 2000;
  for (const auto& config : configs)
    for (std::uint32_t heads : {1u, 2u, 3u})
      for (std::uint32_t n : {1u, 3u, 8u}) {
        constexpr std::size_t count = 37, S = count + 2;  // columns 0 and S-1 must stay untouched
        std::vector<Case> cases;
        for (std::size_t i = 0; i < count; ++i) cases.push_back(make_case(n, heads, 4, 2, 3, 2, 2, config, ++seed, 1));
        const std::size_t rows_ctx = (heads + 1) * std::size_t(cases[0].axes), rows_hs = (heads + 1) * kHeadStats,
                          rows_ps = pairs(heads) * kPairStats;
        for (auto level : levels_under_test()) {
          std::vector<double> ctx(rows_ctx * S, kSentinel), hs(rows_hs * S, kSentinel), ps(rows_ps * S + 1, kSentinel);
          std::vector<AttentionReport> in;
          std::vector<AttentionReportOut> out;
          for (std::size_t i = 0; i < count; ++i) {
            AttentionReportOut o;
            o.context = ctx.data() + 1 + i, o.head_stats = hs.data() + 1 + i, o.pair_stats = ps.data() + 1 + i, o.stride = S;
            in.push_back(cases[i].in()), out.push_back(o);
          }
          attention_reports(in.data(), out.data(), count, level, scratch);
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < count; ++i) {
            const Result alone = run_kernel(cases[i], level, scratch);
            for (std::size_t k = 0; k < rows_ctx; ++k) wrong += !same(ctx[k * S + 1 + i], alone.ctx[1 + 3 * k]);
            for (std::size_t k = 0; k < rows_hs; ++k) wrong += !same(hs[k * S + 1 + i], alone.hs[1 + 3 * k]);
            for (std::size_t k = 0; k < rows_ps; ++k) wrong += !same(ps[k * S + 1 + i], alone.ps[1 + 3 * k]);
          }
          INFO(to_string(level) << " " << describe(cases[0]));
          CHECK(wrong == 0);
          std::size_t outside = 0;
          for (const auto* v : {&ctx, &hs, &ps})
            for (std::size_t k = 0; k + 1 < v->size(); k += S) outside += (*v)[k] != kSentinel || (*v)[k + S - 1] != kSentinel;
          CHECK(outside == 0);
        }
      }
}

TEST_CASE("large d_k and n (baseline width 256, the micro-kernel's full blocks)", "[attention]") {
  AttentionScratch ref_scratch, scratch;
  for (std::uint32_t n : {100u, 256u})
    for (auto mask : {MaskKind::none, MaskKind::causal}) {
      const Case c = make_case(n, 8, 256, 32, 256, 32, 2, {QueryMode::all, 0, mask}, n + 7, 0, 0.5f);
      const Result ref = run_kernel(c, SimdLevel::scalar, ref_scratch);
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << " " << describe(c));
        CHECK(compare(c, ref, run_kernel(c, level, scratch)) == "");
      }
    }
}

TEST_CASE("a baseline that is the heads concatenated (a model's): its scores summed from the heads' agree with "
          "the reference's one dot product",
          "[attention]") {
  // The SIMD levels then add the heads' raw scores instead of a d_model-wide product (run(),
  // sum_base); the reference keeps the product. Tails of n and d_k, masks, windows, query modes.
  const AttentionConfig configs[] = {{QueryMode::all, 0, MaskKind::none},
                                     {QueryMode::all, 0, MaskKind::causal},
                                     {QueryMode::last, 0, MaskKind::none},
                                     {QueryMode::all, 0, MaskKind::causal, 5}};
  AttentionScratch ref_scratch, scratch;
  std::uint64_t seed = 4000;
  for (std::uint32_t n : {1u, 7u, 17u, 70u, 130u})
    for (std::uint32_t heads : {1u, 3u, 12u})
      for (std::uint32_t dk : {3u, 32u})
        for (const auto& config : configs) {
          Case c = make_case(n, heads, 1, dk, 0, dk, 2, config, ++seed, 1, 0.5f);
          c.q_col[0] = c.q_col[1], c.k_col[0] = c.k_col[1], c.dk[0] = heads * dk;  // BERT's layout
          const Result ref = run_kernel(c, SimdLevel::scalar, ref_scratch);
          for (auto level : levels_under_test()) {
            INFO(to_string(level) << " " << describe(c));
            CHECK(compare(c, ref, run_kernel(c, level, scratch)) == "");
          }
        }
}

TEST_CASE("two tokens: hand-computed softmax", "[attention]") {
  // One head (+ baseline), d_k = d_v = 1: Q = (1, 2), K = (0.5, 1), V = (3, -1), for both heads.
  // Scores q_i k_j: row 0 (0.5, 1), row 1 (1, 2); softmax of (a, b) = (σ(a-b), σ(b-a)).
  Case c = make_case(2, 1, 1, 1, 1, 1, 1, {}, 1);
  const float qv[2] = {1.0f, 2.0f}, kv[2] = {0.5f, 1.0f}, vv[2] = {3.0f, -1.0f};
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t h = 0; h <= 1; ++h) {
      c.qkv[t * c.ld + c.q_col[h]] = qv[t];
      c.qkv[t * c.ld + c.k_col[h]] = kv[t];
      c.qkv[t * c.ld + c.v_col[h]] = vv[t];
    }
  c.axis[0] = {10.0f, 20.0f};
  const auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (auto mask : {MaskKind::none, MaskKind::causal}) {
    c.config.mask = mask;
    // a[q][k]
    const double a[2][2] = {{mask == MaskKind::causal ? 1.0 : sig(-0.5), mask == MaskKind::causal ? 0.0 : sig(0.5)},
                            {sig(-1.0), sig(1.0)}};
    double ent = 0, conf = 0, self = 0, prev = 0, first = 0, ctx = 0;
    for (int q = 0; q < 2; ++q) {
      for (int k = 0; k < 2; ++k) ent -= a[q][k] > 0 ? a[q][k] * std::log(a[q][k]) : 0.0;
      conf += std::max(a[q][0], a[q][1]);
      self += a[q][q];
      prev += q ? a[q][q - 1] : 0.0;
      first += a[q][0];
      ctx += a[q][0] * 10 + a[q][1] * 20;
    }
    AttentionScratch scratch;
    for (auto level : levels_under_test()) {
      INFO(to_string(level) << (mask == MaskKind::causal ? " causal" : ""));
      const Result r = run_kernel(c, level, scratch);
      for (int q = 0; q < 2; ++q)
        for (int k = 0; k < 2; ++k) {
          CHECK(r.maps[q * 2 + k] == Approx(a[q][k]).margin(1e-6));      // head 0
          CHECK(r.maps[4 + q * 2 + k] == Approx(a[q][k]).margin(1e-6));  // head 1
        }
      for (int q = 0; q < 2; ++q) CHECK(r.ho[q] == Approx(3 * a[q][0] - a[q][1]).margin(1e-6));
      for (std::size_t h = 0; h <= 1; ++h) {
        CHECK(r.head(h, kEntropy) == Approx(ent / 2).margin(1e-6));
        CHECK(r.head(h, kConfidence) == Approx(conf / 2).margin(1e-6));
        CHECK(r.head(h, kSelfWeight) == Approx(self / 2).margin(1e-6));
        CHECK(r.head(h, kPrevWeight) == Approx(prev / 2).margin(1e-6));
        CHECK(r.head(h, kFirstWeight) == Approx(first / 2).margin(1e-6));
        CHECK(r.context(h, 0) == Approx(ctx / 2).margin(1e-5));
      }
    }
  }
}

TEST_CASE("one token: entropy 0, confidence 1, prev 0", "[attention]") {
  AttentionScratch scratch;
  for (auto mask : {MaskKind::none, MaskKind::causal})
    for (auto mode : {QueryMode::all, QueryMode::last, QueryMode::index}) {
      const Case c = make_case(1, 3, 5, 3, 7, 2, 2, {mode, -4, mask}, 9);
      for (auto level : levels_under_test()) {
        INFO(to_string(level));
        const Result r = run_kernel(c, level, scratch);
        for (std::size_t h = 0; h <= 3; ++h) {
          CHECK(r.head(h, kEntropy) == Approx(0.0).margin(1e-6));
          CHECK(r.head(h, kConfidence) == Approx(1.0).margin(1e-6));
          CHECK(r.head(h, kSelfWeight) == Approx(1.0).margin(1e-6));
          CHECK(r.head(h, kPrevWeight) == 0.0);
          CHECK(r.head(h, kFirstWeight) == Approx(1.0).margin(1e-6));
          CHECK(r.context(h, 1) == Approx(c.axis[1][0]).epsilon(1e-6));
        }
        for (std::size_t p = 0; p < 3; ++p) {
          CHECK(r.pair(p, kJensenShannon) == Approx(0.0).margin(1e-6));
          CHECK(r.pair(p, kPositionOverlap) == Approx(1.0).margin(1e-6));
        }
      }
    }
}

TEST_CASE("an empty report gives zeros", "[attention]") {
  AttentionScratch scratch;
  const Case c = make_case(0, 2, 3, 3, 3, 3, 1, {}, 3);
  for (auto level : levels_under_test()) {
    const Result r = run_kernel(c, level, scratch);
    for (std::size_t h = 0; h <= 2; ++h)
      for (std::size_t s = 0; s < kHeadStats; ++s) CHECK(r.head(h, s) == 0.0);
    for (std::size_t s = 0; s < kPairStats; ++s) CHECK(r.pair(0, s) == 0.0);
  }
}

TEST_CASE("a sliding window: query q weighs exactly its last W keys, as transformers masks them", "[attention]") {
  AttentionScratch scratch;
  std::uint64_t seed = 700;
  for (std::uint32_t n : {1u, 4u, 9u, 33u, 100u})  // 100: keys skipped a whole K^T panel at a time
    for (std::uint32_t window : {1u, 4u, 8u}) {
      const Case c = make_case(n, 2, 5, 4, 3, 3, 1, {QueryMode::all, 0, MaskKind::causal, window}, seed++, 1);
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << " " << describe(c));
        const Result r = run_kernel(c, level, scratch);
        for (std::size_t h = 0; h <= 2; ++h)
          for (std::size_t q = 0; q < n; ++q) {
            double sum = 0;
            for (std::size_t k = 0; k < n; ++k) {
              const float a = r.maps[(h * n + q) * n + k];
              if (k > q || k + window <= q) CHECK(a == 0.0f);
              else CHECK(a > 0.0f);
              sum += a;
            }
            CHECK(sum == Approx(1.0).margin(1e-5));
          }
      }
    }
}

TEST_CASE("soft-capping: a cap far above the scores changes nothing, a tiny one flattens the rows", "[attention]") {
  AttentionScratch scratch;
  std::uint64_t seed = 900;
  for (std::uint32_t n : {3u, 17u, 40u})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
      Case c = make_case(n, 2, 5, 4, 3, 3, 1, {QueryMode::all, 0, mask}, seed++, 1);
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << " " << describe(c));
        c.config.softcap = 0.0f;
        const Result plain = run_kernel(c, level, scratch);
        c.config.softcap = 1e6f;
        const Result wide = run_kernel(c, level, scratch);
        c.config.softcap = 1e-4f;
        const Result flat = run_kernel(c, level, scratch);
        for (std::size_t i = 0; i < plain.maps.size(); ++i) CHECK(wide.maps[i] == Approx(plain.maps[i]).margin(1e-6));
        for (std::size_t h = 0; h <= 2; ++h)
          for (std::size_t q = 0; q < n; ++q) {
            const std::size_t seen = mask == MaskKind::causal ? q + 1 : n;
            for (std::size_t k = 0; k < seen; ++k) CHECK(flat.maps[(h * n + q) * n + k] == Approx(1.0 / seen).margin(1e-4));
          }
      }
    }
}

TEST_CASE("each metric equals its definition computed in double from the materialised maps", "[attention]") {
  AttentionScratch scratch;
  std::uint64_t seed = 100;
  for (std::uint32_t n : {1u, 5u, 17u, 40u})
    for (auto mask : {MaskKind::none, MaskKind::causal})
      for (auto mode : {QueryMode::all, QueryMode::index}) {
        const Case c = make_case(n, 3, 6, 4, 9, 5, 2, {mode, 3, mask}, seed++, 1, 2.0f);
        const std::size_t H = 3, nq = c.nq(), q0 = c.q_first();
        for (auto level : levels_under_test()) {
          INFO(to_string(level) << " " << describe(c));
          const Result r = run_kernel(c, level, scratch);
          const Tol t = tolerance(c);
          const double e = 4.0 * (double(n) + 16.0) * kU;  // the metric's own f32 sums
          auto A = [&](std::size_t h, std::size_t iq, std::size_t k) { return double(r.maps[(h * nq + iq) * n + k]); };
          std::vector<std::vector<double>> O(H + 1);  // O_h from the maps, [iq][d]
          std::vector<double> hs((H + 1) * kHeadStats, 0.0), ctx((H + 1) * 2, 0.0);
          for (std::size_t h = 0; h <= H; ++h) {
            O[h].assign(nq * c.dv[h], 0.0);
            for (std::size_t iq = 0; iq < nq; ++iq) {
              const std::size_t q = q0 + iq;
              double e = 0, mx = 0, sum = 0;
              for (std::size_t k = 0; k < n; ++k) {
                const double a = A(h, iq, k);
                sum += a;
                e -= a > 0 ? a * std::log(a) : 0.0;
                mx = std::max(mx, a);
                if (mask == MaskKind::causal && k > q) CHECK(a == 0.0);
                for (std::size_t d = 0; d < c.dv[h]; ++d) O[h][iq * c.dv[h] + d] += a * c.v(k, h)[d];
                for (std::size_t ax = 0; ax < 2; ++ax) ctx[h * 2 + ax] += a * c.axis[ax][k] / double(nq);
              }
              CHECK(sum == Approx(1.0).margin(n * 4 * kU + 1e-6));
              hs[h * kHeadStats + kEntropy] += e / double(nq);
              hs[h * kHeadStats + kConfidence] += mx / double(nq);
              hs[h * kHeadStats + kSelfWeight] += A(h, iq, q) / double(nq);
              hs[h * kHeadStats + kPrevWeight] += (q ? A(h, iq, q - 1) : 0.0) / double(nq);
              hs[h * kHeadStats + kFirstWeight] += A(h, iq, 0) / double(nq);
            }
            for (std::size_t s = 0; s < kHeadStats; ++s)
              CHECK(r.head(h, s) == Approx(hs[h * kHeadStats + s]).margin(s == kEntropy ? e * t.L : e));
            for (std::size_t ax = 0; ax < 2; ++ax)
              CHECK(r.context(h, ax) == Approx(ctx[h * 2 + ax]).margin(e * t.xmax));
            std::size_t off = 0;
            for (std::size_t g = 0; g < h; ++g) off += nq * c.dv[g];
            for (std::size_t i = 0; i < nq * c.dv[h]; ++i)
              CHECK(r.ho[off + i] == Approx(O[h][i]).margin(e * t.vmax));
          }
          for (std::size_t p = 0, i = 1; i <= H; ++i)
            for (std::size_t j = i + 1; j <= H; ++j, ++p) {
              double js = 0, ov = 0, dot = 0, ni = 0, nj = 0, dist = 0;
              for (std::size_t iq = 0; iq < nq; ++iq) {
                double hm = 0, hi = 0, hj = 0, d2 = 0;
                for (std::size_t k = 0; k < n; ++k) {
                  const double a = A(i, iq, k), b = A(j, iq, k), m = 0.5 * (a + b);
                  hm -= m > 0 ? m * std::log(m) : 0.0;
                  hi -= a > 0 ? a * std::log(a) : 0.0;
                  hj -= b > 0 ? b * std::log(b) : 0.0;
                  ov += a * b / double(nq);
                }
                js += (hm - 0.5 * (hi + hj)) / double(nq);
                for (std::size_t d = 0; d < 5; ++d) {
                  const double x = O[i][iq * 5 + d], y = O[j][iq * 5 + d];
                  dot += x * y, ni += x * x, nj += y * y, d2 += (x - y) * (x - y);
                }
                dist += std::sqrt(d2) / double(nq);
              }
              double vd = 0, vi = 0, vj = 0;
              for (std::size_t k = 0; k < n; ++k)
                for (std::size_t d = 0; d < 5; ++d) {
                  const double x = c.v(k, i)[d], y = c.v(k, j)[d];
                  vd += x * y, vi += x * x, vj += y * y;
                }
              CHECK(r.pair(p, kJensenShannon) == Approx(std::max(0.0, js)).margin(2 * e * t.L));
              CHECK(r.pair(p, kPositionOverlap) == Approx(ov).margin(e));
              CHECK(r.pair(p, kSubspaceCosine) == Approx(vd / std::sqrt(vi * vj)).margin(t.sub));
              CHECK(r.pair(p, kOutputCosine) == Approx(dot / std::sqrt(ni * nj)).margin(e * 4));
              CHECK(r.pair(p, kOutputDistance) == Approx(dist).margin(2 * std::sqrt(5.0) * e * t.vmax));
            }
        }
      }
}

TEST_CASE("zero values: cosines are 0, not NaN", "[attention]") {
  Case c = make_case(4, 2, 3, 3, 3, 3, 1, {}, 5);
  for (std::size_t t = 0; t < c.n; ++t)
    for (std::size_t h = 0; h <= 2; ++h)
      for (std::size_t d = 0; d < 3; ++d) c.qkv[t * c.ld + c.v_col[h] + d] = 0.0f;
  AttentionScratch scratch;
  for (auto level : levels_under_test()) {
    const Result r = run_kernel(c, level, scratch);
    CHECK(r.pair(0, kSubspaceCosine) == 0.0);
    CHECK(r.pair(0, kOutputCosine) == 0.0);
    CHECK(r.pair(0, kOutputDistance) == 0.0);
  }
}

TEST_CASE("heads with unequal d_v are refused", "[attention]") {
  Case c = make_case(3, 2, 3, 3, 3, 3, 1, {}, 5);
  c.dv[2] = 2;
  AttentionScratch scratch;
  CHECK_THROWS_AS(run_kernel(c, SimdLevel::scalar, scratch), Error);
}

TEST_CASE("fp32 peak is measured once and positive", "[attention]") {
  const double p = measure_fp32_peak_gflops();
  CHECK(p > 0.1);
  CHECK(measure_fp32_peak_gflops() == p);
}

TEST_CASE("project_rows: every level vs the scalar reference, rows independent of the call's row count", "[attention]") {
  // With the GELU epilogue too (gelu = true: GELU has slope <= 1.13, and the levels' fused
  // polynomial differs from the reference's by a few ulp: + 16·u·Σ|terms|).
  // Shapes hitting every tail: rows past the micro-kernel's (4 on SSE2, 6 on AVX2, 8 on AVX-512:
  // 1..9, 12, 13, 17, 67 are whole and partial row tiles of each),
  // columns within and past a panel (1, 13, 47..49, 100: partial vectors, the stack-tile path),
  // K below and above the prefetch spread (1, 5, 96: with few row tiles a tile prefetches more
  // lines of the next panel than it has iterations), with a next matrix to prefetch and without.
  // Tolerance: each element is bias + K products summed in k order, the reference unfused, the
  // levels with FMA: |Δ| <= (K + 2)·u·Σ|terms|.
  const auto levels = levels_under_test();
  const std::size_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 67};
  const std::size_t Ks[] = {1, 5, 96};
  const std::size_t Ns[] = {1, 8, 13, 17, 20, 33, 47, 48, 49, 100};  // last columns: masked stores of every width
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::size_t failures = 0;
  for (std::size_t K : Ks)
    for (std::size_t N : Ns) {
      std::vector<float> b(K * N), bias(N);
      for (auto& v : b) v = u(rng);
      for (auto& v : bias) v = u(rng);
      const auto packed = kernels::pack_panels(b.data(), K, N, bias.data());
      const std::vector<float> zeros(96 * 100, 0.0f);
      const auto next = kernels::pack_panels(zeros.data(), 96, 100, nullptr);
      for (std::size_t mi = 0; mi < 2 * std::size(Ms); ++mi) {
        const std::size_t M = Ms[mi / 2];
        const bool gelu = mi % 2;
        const std::size_t ldx = K + 3, ldc = N + 5;  // strides wider than the rows: nothing past N written
        std::vector<float> x(M * ldx);
        for (auto& v : x) v = u(rng);
        std::vector<float> ref(M * ldc, -7.0f);
        kernels::project_rows(SimdLevel::scalar, x.data(), ldx, M, K, packed.get(), N, ref.data(), ldc, nullptr, 0, gelu);
        for (auto level : levels) {
          std::vector<float> c(M * ldc, -7.0f), one(ldc, -7.0f);
          // With a next matrix to prefetch (its first panel: K_next = 96 rows), which changes nothing.
          kernels::project_rows(level, x.data(), ldx, M, K, packed.get(), N, c.data(), ldc, next.get(), 96, gelu);
          for (std::size_t m = 0; m < M; ++m) {
            // The same row alone: the same bits (grouping rows never changes a result).
            kernels::project_rows(level, x.data() + m * ldx, ldx, 1, K, packed.get(), N, one.data(), ldc, nullptr, 0,
                                  gelu);
            for (std::size_t n = 0; n < ldc; ++n) {
              const float got = c[m * ldc + n];
              if (n >= N) {
                if (got != -7.0f && ++failures <= 10) FAIL_CHECK(to_string(level) << " wrote column " << n << " >= N " << N);
                continue;
              }
              double mag = std::fabs(bias[n]);
              for (std::size_t k = 0; k < K; ++k) mag += std::fabs(double(x[m * ldx + k]) * b[k * N + n]);
              const double tol = gelu ? 1.2 * double(K + 2) * kU * mag + 16 * kU * mag : double(K + 2) * kU * mag;
              if ((std::fabs(double(got) - ref[m * ldc + n]) > tol || got != one[n]) && ++failures <= 10)
                FAIL_CHECK(to_string(level) << (gelu ? " gelu" : "") << " M " << M << " K " << K << " N " << N << " [" << m << "][" << n
                                            << "]: " << got << " vs reference " << ref[m * ldc + n] << " alone "
                                            << one[n]);
            }
          }
        }
      }
    }
  CHECK(failures == 0);
}
