// The fused attention kernel at every compiled and supported level against the scalar reference,
// against hand-computed softmax values and against metrics recomputed in double from the
// materialised maps; AttentionPlan against a direct double computation from the weights,
// grouping invariance, seeded weights, validation and the memory budget.
//
// Tolerance (f32 level vs f32 reference), per case. u = 2^-24 (unit roundoff).
//   A score is a d_k-term dot product: each side is within d_k·u·M_s of the exact value, M_s =
//   max Σ_d |Q[q][d] K[k][d]|, times the scale 1/sqrt(d_k); subtracting the max and scaling adds a
//   few ulp of |y| <= 2·M_s·scale. So y = scale·(s - max) differs by δy <= (2·d_k + 4)·u·M_s·scale.
//   a_k = e^{y_k} / Σ e^{y}: relative error <= 2·δy (y_k and the weighted mean of the others in Z)
//   + 4u (two exp evaluations of ~2 ulp) + (n + 2)·u (Z summed in different orders, division).
//   With a safety factor of 2:  δ = 2·(2·δy + (n + 8)·u), a relative error of every probability.
//   Then, first-order, with L = 2 + 2·log(n + 1):
//     confidence, self, prev, first, map entries   |Δ| <= δ                (each a <= 1)
//     entropy  -Σ a log a                           |Δ| <= δ·L              (Σ a|1 + log a| <= 1 + log n)
//     JS = H(M) - (H(P) + H(Q))/2                   |Δ| <= 2·δ·L
//     overlap Σ p q                                 |Δ| <= 2·δ
//     context Σ a x, O = Σ a V                      |Δ| <= (δ + n·u)·max|x| (resp. max|V|)
//     output distance (1-Lipschitz in O_i, O_j)     |Δ| <= 2·sqrt(d_v)·(δ + n·u)·max|V|
//     output cosine                                 |Δ| <= 2·sqrt(nq·d_v)·(δ + n·u)·max|V| / min ‖O‖
//     subspace cosine (same V, summation order)     |Δ| <= 4·(n·d_v + 8)·u
// Against the maps a level itself wrote (same probabilities), only the metric's own f32 sums
// differ from double: |Δ| <= 4·(n + 16)·u times L (entropies, JS), max|x| or max|V| (sums of a·x).
// Measured on the sweep: at most ~1/10 of each bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "kernels/attention_simd.hpp"

using namespace headsep;

namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24
constexpr double kSentinel = -12345.5;
const float* const kNoAxis[1] = {nullptr};

std::vector<SimdLevel> levels_under_test() {
  std::vector<SimdLevel> run;
  const auto sup = supported_levels();
  for (auto l : compiled_levels()) {
    if (std::find(sup.begin(), sup.end(), l) != sup.end()) run.push_back(l);
    else WARN("SIMD level " << to_string(l) << " is compiled but not supported by this CPU: skipped");
  }
  return run;
}

std::size_t pairs(std::size_t H) { return H ? H * (H - 1) / 2 : 0; }

/// One report's projected Q/K/V (layout [Q_0..Q_H | K_0..K_H | V_0..V_H | pad]) and axes.
struct Case {
  std::uint32_t n = 0, heads = 0, axes = 0;
  std::vector<std::uint32_t> q_col, k_col, v_col, dk, dv;
  std::size_t ld = 0;
  std::vector<float> qkv;  // exactly n*ld floats: a kernel reading past the last row would be caught by ASan
  std::vector<std::vector<float>> axis;
  std::vector<const float*> axp;
  AttentionConfig config;

  AttentionReport in() const {
    AttentionReport r;
    r.n = n, r.heads = heads, r.qkv = qkv.data(), r.ld = ld;
    r.q_col = q_col.data(), r.k_col = k_col.data(), r.v_col = v_col.data(), r.dk = dk.data(), r.dv = dv.data();
    r.config = config, r.axes = axes, r.axis = axes ? axp.data() : kNoAxis;
    return r;
  }
  const float* q(std::size_t t, std::size_t h) const { return qkv.data() + t * ld + q_col[h]; }
  const float* k(std::size_t t, std::size_t h) const { return qkv.data() + t * ld + k_col[h]; }
  const float* v(std::size_t t, std::size_t h) const { return qkv.data() + t * ld + v_col[h]; }
  std::size_t nq() const { return n == 0 ? 0 : (config.query == QueryMode::all ? n : 1); }
  std::size_t q_first() const {
    if (config.query == QueryMode::all || n == 0) return 0;
    std::int64_t q = config.query == QueryMode::first ? 0 : config.query == QueryMode::last ? std::int64_t(n) - 1 : config.query_index;
    if (q < 0) q += n;
    return std::size_t(std::clamp<std::int64_t>(q, 0, std::int64_t(n) - 1));
  }
};

Case make_case(std::uint32_t n, std::uint32_t heads, std::uint32_t dk0, std::uint32_t dk, std::uint32_t dv0,
               std::uint32_t dv, std::uint32_t axes, AttentionConfig config, std::uint64_t seed, std::size_t pad = 0,
               float amp = 1.5f) {
  Case c;
  c.n = n, c.heads = heads, c.axes = axes, c.config = config;
  std::size_t col = 0;
  for (auto* part : {&c.q_col, &c.k_col, &c.v_col})
    for (std::uint32_t h = 0; h <= heads; ++h) {
      part->push_back(static_cast<std::uint32_t>(col));
      col += part == &c.v_col ? (h ? dv : dv0) : (h ? dk : dk0);
    }
  for (std::uint32_t h = 0; h <= heads; ++h) c.dk.push_back(h ? dk : dk0), c.dv.push_back(h ? dv : dv0);
  c.ld = col + pad;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-amp, amp), ux(-3.0f, 3.0f);
  c.qkv.resize(std::size_t(n) * c.ld);
  for (auto& x : c.qkv) x = u(rng);
  c.axis.assign(axes, std::vector<float>(n));
  for (auto& a : c.axis)
    for (auto& x : a) x = ux(rng);
  for (auto& a : c.axis) c.axp.push_back(a.data());
  return c;
}

/// Outputs of one run, written into column 1 of 3-wide rows (columns 0 and 2 must stay untouched).
struct Result {
  std::size_t H = 0, C = 0, P = 0;
  std::vector<double> ctx, hs, ps;
  std::vector<float> maps, ho;
  double head(std::size_t h, std::size_t s) const { return hs[(h * kHeadStats + s) * 3 + 1]; }
  double pair(std::size_t p, std::size_t s) const { return ps[(p * kPairStats + s) * 3 + 1]; }
  double context(std::size_t h, std::size_t c) const { return ctx[(h * C + c) * 3 + 1]; }
};

Result run_kernel(const Case& c, SimdLevel level, AttentionScratch& scratch, bool maps = true, bool head_out = true) {
  Result r;
  r.H = c.heads, r.C = c.axes, r.P = pairs(c.heads);
  r.ctx.assign((r.H + 1) * r.C * 3 + 1, kSentinel);
  r.hs.assign((r.H + 1) * kHeadStats * 3, kSentinel);
  r.ps.assign(r.P * kPairStats * 3 + 1, kSentinel);
  std::size_t sum_dv = 0;
  for (auto d : c.dv) sum_dv += d;
  if (maps) r.maps.assign((r.H + 1) * c.nq() * c.n + 1, -7.0f);
  if (head_out) r.ho.assign(c.nq() * sum_dv + 1, -7.0f);
  AttentionReportOut o;
  o.context = r.ctx.data() + 1, o.head_stats = r.hs.data() + 1, o.pair_stats = r.ps.data() + 1, o.stride = 3;
  o.maps = maps ? r.maps.data() : nullptr;
  o.head_out = head_out ? r.ho.data() : nullptr;
  attention_report(c.in(), o, level, scratch);
  return r;
}

bool untouched(const std::vector<double>& v) {
  for (std::size_t i = 0; i + 1 < v.size(); i += 3)
    if (v[i] != kSentinel || v[i + 2] != kSentinel) return false;
  return v.back() == kSentinel || v.size() % 3 == 0;
}

/// Tolerances of the file header for one case.
struct Tol {
  double delta = 0, L = 0, xmax = 0, vmax = 0, nu = 0, sub = 0;
  std::size_t dv = 0;
};

Tol tolerance(const Case& c) {
  double ms_scaled = 0;  // max over heads of M_s * scale, M_s = max Σ_d |Q K|
  std::size_t dkmax = 0;
  for (std::size_t h = 0; h <= c.heads; ++h) {
    double ms = 0;
    for (std::size_t q = 0; q < c.n; ++q)
      for (std::size_t k = 0; k < c.n; ++k) {
        double s = 0;
        for (std::size_t d = 0; d < c.dk[h]; ++d) s += std::fabs(double(c.q(q, h)[d]) * c.k(k, h)[d]);
        ms = std::max(ms, s);
      }
    ms_scaled = std::max(ms_scaled, ms / std::sqrt(double(c.dk[h])));
    dkmax = std::max<std::size_t>(dkmax, c.dk[h]);
  }
  Tol t;
  const double dy = (2.0 * double(dkmax) + 4.0) * kU * ms_scaled;
  t.delta = 2.0 * (2.0 * dy + (double(c.n) + 8.0) * kU);
  t.L = 2.0 + 2.0 * std::log(double(c.n) + 1.0);
  t.nu = double(c.n) * kU;
  for (auto& a : c.axis)
    for (float x : a) t.xmax = std::max(t.xmax, double(std::fabs(x)));
  for (std::size_t k = 0; k < c.n; ++k)
    for (std::size_t h = 0; h <= c.heads; ++h)
      for (std::size_t d = 0; d < c.dv[h]; ++d) t.vmax = std::max(t.vmax, double(std::fabs(c.v(k, h)[d])));
  t.dv = c.heads ? c.dv[1] : c.dv[0];
  t.sub = 4.0 * (double(c.n) * double(t.dv) + 8.0) * kU;
  return t;
}

/// ‖O_h‖ over the queries, from a run's head_out.
double out_norm(const Case& c, const Result& r, std::size_t h) {
  std::size_t off = 0;
  for (std::size_t g = 0; g < h; ++g) off += c.nq() * c.dv[g];
  double s = 0;
  for (std::size_t i = 0; i < c.nq() * c.dv[h]; ++i) s += double(r.ho[off + i]) * r.ho[off + i];
  return std::sqrt(s);
}

/// "" or the first output of `got` outside the tolerance around `ref`.
std::string compare(const Case& c, const Result& ref, const Result& got) {
  const Tol t = tolerance(c);
  std::ostringstream os;
  os.precision(10);
  auto check = [&](const char* what, std::size_t i, std::size_t j, double e, double g, double tol) {
    if (std::fabs(e - g) <= tol && std::isfinite(g) == std::isfinite(e)) return true;
    os << what << "[" << i << "][" << j << "]: scalar " << e << " vs " << g << " (tol " << tol << ")";
    return false;
  };
  if (!untouched(got.ctx) || !untouched(got.hs) || !untouched(got.ps)) return "a neighbouring column was written";
  for (std::size_t h = 0; h <= c.heads; ++h) {
    for (std::size_t s = 0; s < kHeadStats; ++s) {
      const double tol = s == kEntropy ? t.delta * t.L : t.delta;
      if (!check("head_stats", h, s, ref.head(h, s), got.head(h, s), tol)) return os.str();
    }
    for (std::size_t a = 0; a < c.axes; ++a)
      if (!check("context", h, a, ref.context(h, a), got.context(h, a), (t.delta + t.nu) * t.xmax)) return os.str();
  }
  for (std::size_t p = 0, i = 1; i <= c.heads; ++i)
    for (std::size_t j = i + 1; j <= c.heads; ++j, ++p) {
      const double on = std::min(out_norm(c, ref, i), out_norm(c, ref, j));
      const double tols[kPairStats] = {
          2 * t.delta * t.L, 2 * t.delta, t.sub,
          on > 0 ? 2 * std::sqrt(double(c.nq() * t.dv)) * (t.delta + t.nu) * t.vmax / on + t.sub : 1e-6,
          2 * std::sqrt(double(t.dv)) * (t.delta + t.nu) * t.vmax + t.sub};
      for (std::size_t s = 0; s < kPairStats; ++s)
        if (!check("pair_stats", p, s, ref.pair(p, s), got.pair(p, s), tols[s])) return os.str();
    }
  for (std::size_t i = 0; i < ref.maps.size(); ++i)
    if (!check("maps", i, 0, ref.maps[i], got.maps[i], t.delta)) return os.str();
  for (std::size_t i = 0; i < (got.ho.empty() ? 0 : ref.ho.size()); ++i)  // got.ho empty: not asked for
    if (!check("head_out", i, 0, ref.ho[i], got.ho[i], (t.delta + t.nu) * t.vmax)) return os.str();
  return "";
}

std::string describe(const Case& c) {
  std::ostringstream os;
  static const char* modes[] = {"all", "first", "last", "index"};
  os << "n=" << c.n << " heads=" << c.heads << " dk0=" << c.dk[0] << " dk=" << c.dk.back() << " dv0=" << c.dv[0]
     << " dv=" << c.dv.back() << " ld=" << c.ld << " axes=" << c.axes << " query=" << modes[int(c.config.query)]
     << "(" << c.config.query_index << ")" << (c.config.mask == MaskKind::causal ? " causal" : "");
  return os.str();
}

}  // namespace

TEST_CASE("every level agrees with the scalar reference (sizes hitting the vector tails)", "[attention]") {
  const auto levels = levels_under_test();
  const std::uint32_t ns[] = {1, 2, 3, 7, 17, 64};
  const std::uint32_t ds[] = {1, 3, 5, 17, 33};
  const AttentionConfig configs[] = {
      {QueryMode::all, 0, MaskKind::none},  {QueryMode::all, 0, MaskKind::causal},
      {QueryMode::first, 0, MaskKind::none}, {QueryMode::last, 0, MaskKind::causal},
      {QueryMode::index, 2, MaskKind::none}, {QueryMode::index, -2, MaskKind::causal},
      {QueryMode::index, 99, MaskKind::none}};
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
                                     {QueryMode::last, 0, MaskKind::none}};
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

// ---- AttentionPlan ---------------------------------------------------------------------------

namespace {

/// Reports of the given lengths, X uniform in [-1, 1], 2 axes; offsets start at `lead` tokens.
struct Batch {
  std::vector<std::uint64_t> off;
  std::vector<float> x;
  std::vector<std::vector<float>> axis;
  std::vector<const float*> axp;
  std::size_t n() const { return off.size() - 1; }
};

Batch make_batch(const std::vector<std::uint32_t>& lengths, std::uint32_t d_model, std::uint64_t seed,
                 std::size_t lead = 3) {
  Batch b;
  b.off.push_back(lead);
  for (auto l : lengths) b.off.push_back(b.off.back() + l);
  const std::size_t T = b.off.back() + 2;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  b.x.resize(T * d_model);
  for (auto& v : b.x) v = u(rng);
  b.axis.assign(2, std::vector<float>(T));
  for (auto& a : b.axis)
    for (auto& v : a) v = 3 * u(rng);
  for (auto& a : b.axis) b.axp.push_back(a.data());
  return b;
}

struct PlanOut {
  std::vector<double> ctx, hs, ps;
  std::vector<float> maps, out;
  std::vector<std::uint64_t> maps_off, out_off;
};

PlanOut run_plan(const AttentionPlan& plan, const Batch& b, SimdLevel level, AttentionScratch& scratch, bool one_by_one,
                 bool with_maps = false, bool with_out = false) {
  const std::size_t R = b.n(), H = plan.heads(), P = pairs(H);
  PlanOut o;
  o.ctx.assign((H + 1) * 2 * R, kSentinel);
  o.hs.assign((H + 1) * kHeadStats * R, kSentinel);
  o.ps.assign(P * kPairStats * R + 1, kSentinel);
  std::uint64_t mo = 0, oo = 0;
  for (std::size_t r = 0; r < R; ++r) {
    const std::uint64_t n = b.off[r + 1] - b.off[r];
    const std::uint64_t nq = n == 0 ? 0 : (plan.config().query == QueryMode::all ? n : 1);
    o.maps_off.push_back(mo), o.out_off.push_back(oo);
    mo += (H + 1) * nq * n, oo += nq * plan.d_model();
  }
  o.maps.assign(mo + 1, -7.0f);
  o.out.assign(oo + 1, -7.0f);
  auto call = [&](std::size_t r0, std::size_t r1) {
    AttentionOut out;
    out.context = o.ctx.data() + r0, out.head_stats = o.hs.data() + r0, out.pair_stats = o.ps.data() + r0;
    out.stride = R;
    if (with_maps) out.maps = o.maps.data(), out.maps_offset = o.maps_off.data() + r0;
    if (with_out) out.output = o.out.data(), out.output_offset = o.out_off.data() + r0;
    plan.run(b.x.data(), b.off.data() + r0, r1 - r0, 2, b.axp.data(), level, out, scratch);
  };
  if (one_by_one)
    for (std::size_t r = 0; r < R; ++r) call(r, r + 1);
  else
    call(0, R);
  return o;
}

bool same_bits(const PlanOut& a, const PlanOut& b) {
  return a.ctx == b.ctx && a.hs == b.hs && a.ps == b.ps && a.maps == b.maps && a.out == b.out;
}

/// Largest |a - b| / (1 + |a|) over every output.
double max_rel_diff(const PlanOut& a, const PlanOut& b) {
  double m = 0;
  auto cmp = [&](const auto& x, const auto& y) {
    for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - double(y[i])) / (1.0 + std::fabs(double(x[i]))));
  };
  cmp(a.ctx, b.ctx), cmp(a.hs, b.hs), cmp(a.ps, b.ps), cmp(a.maps, b.maps), cmp(a.out, b.out);
  return m;
}

/// nn.Linear in double: y[t][o] = Σ_i x[t][i] W[o][i] + b[o].
std::vector<double> linear(const float* x, std::size_t T, std::size_t in, const std::vector<float>& w,
                           const std::vector<float>& b, std::size_t out) {
  std::vector<double> y(T * out);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (std::size_t i = 0; i < in; ++i) s += double(x[t * in + i]) * w[o * in + i];
      y[t * out + o] = s;
    }
  return y;
}

AttentionWeights with_biases(AttentionWeights w, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto fill = [&](std::vector<float>& v, std::size_t n) {
    v.resize(n);
    for (auto& x : v) x = u(rng);
  };
  fill(w.b_q, w.heads * w.d_k), fill(w.b_k, w.heads * w.d_k), fill(w.b_v, w.heads * w.d_v);
  fill(w.s_b_q, w.d_model), fill(w.s_b_k, w.d_model), fill(w.s_b_v, w.d_model);
  if (!w.w_o.empty()) fill(w.b_o, w.d_model);
  return w;
}

}  // namespace

/// Runs body(blas) with the panel projections, then with OpenBLAS (restoring the default after).
template <class F>
void each_gemm(F&& body) {
  for (bool blas : {false, true}) {
    kernels::set_attention_gemm_blas(blas);
    INFO((blas ? "OpenBLAS projections" : "panel projections"));
    body(blas);
  }
  kernels::set_attention_gemm_blas(false);
}

TEST_CASE("AttentionPlan matches attention computed in double straight from the weights", "[attention][plan]") {
  const std::uint32_t dm = 12, H = 3, dk = 4, dv = 5;
  each_gemm([&](bool) {
  for (bool biases : {false, true})
    for (auto mask : {MaskKind::none, MaskKind::causal}) {
      AttentionWeights w = seeded_attention_weights(dm, H, dk, dv, 42);
      if (biases) w = with_biases(w, 7);
      const AttentionPlan plan(w, {QueryMode::all, 0, mask});
      const Batch b = make_batch({1, 6, 9}, dm, 11);
      AttentionScratch scratch;
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << (biases ? " biases" : "") << (mask == MaskKind::causal ? " causal" : ""));
        const PlanOut o = run_plan(plan, b, level, scratch, false, true, true);
        for (std::size_t r = 0; r < b.n(); ++r) {
          const std::size_t n = b.off[r + 1] - b.off[r];
          const float* x = b.x.data() + b.off[r] * dm;
          // Per head: Q, K, V in double, then the map and O.
          std::vector<std::vector<double>> Q(H + 1), K(H + 1), V(H + 1), O(H + 1);
          Q[0] = linear(x, n, dm, w.s_w_q, w.s_b_q, dm), K[0] = linear(x, n, dm, w.s_w_k, w.s_b_k, dm);
          V[0] = linear(x, n, dm, w.s_w_v, w.s_b_v, dm);
          const auto qa = linear(x, n, dm, w.w_q, w.b_q, H * dk), ka = linear(x, n, dm, w.w_k, w.b_k, H * dk);
          const auto va = linear(x, n, dm, w.w_v, w.b_v, H * dv);
          for (std::size_t h = 1; h <= H; ++h)
            for (std::size_t t = 0; t < n; ++t) {
              for (std::size_t d = 0; d < dk; ++d) Q[h].push_back(qa[t * H * dk + (h - 1) * dk + d]);
              for (std::size_t d = 0; d < dk; ++d) K[h].push_back(ka[t * H * dk + (h - 1) * dk + d]);
              for (std::size_t d = 0; d < dv; ++d) V[h].push_back(va[t * H * dv + (h - 1) * dv + d]);
            }
          for (std::size_t h = 0; h <= H; ++h) {
            const std::size_t d_k = h ? dk : dm, d_v = h ? dv : dm;
            O[h].assign(n * d_v, 0.0);
            double ent = 0;
            for (std::size_t q = 0; q < n; ++q) {
              const std::size_t len = mask == MaskKind::causal ? q + 1 : n;
              std::vector<double> s(n, 0.0);
              double mx = -1e300, z = 0;
              for (std::size_t k = 0; k < len; ++k) {
                for (std::size_t d = 0; d < d_k; ++d) s[k] += Q[h][q * d_k + d] * K[h][k * d_k + d];
                s[k] /= std::sqrt(double(d_k));
                mx = std::max(mx, s[k]);
              }
              for (std::size_t k = 0; k < len; ++k) z += std::exp(s[k] - mx);
              for (std::size_t k = 0; k < n; ++k) {
                const double a = k < len ? std::exp(s[k] - mx) / z : 0.0;
                CHECK(o.maps[o.maps_off[r] + (h * n + q) * n + k] == Approx(a).margin(2e-5));
                ent -= a > 0 ? a * std::log(a) : 0.0;
                for (std::size_t d = 0; d < d_v; ++d) O[h][q * d_v + d] += a * V[h][k * d_v + d];
              }
            }
            CHECK(o.hs[(h * kHeadStats + kEntropy) * b.n() + r] == Approx(ent / double(n)).margin(1e-4));
          }
          // Output projection: concat(O_1..O_H) W_O^T + b_O.
          for (std::size_t q = 0; q < n; ++q)
            for (std::size_t m = 0; m < dm; ++m) {
              double y = w.b_o.empty() ? 0.0 : w.b_o[m];
              for (std::size_t h = 1; h <= H; ++h)
                for (std::size_t d = 0; d < dv; ++d) y += O[h][q * dv + d] * w.w_o[m * H * dv + (h - 1) * dv + d];
              CHECK(o.out[o.out_off[r] + q * dm + m] == Approx(y).margin(1e-4));
            }
        }
      }
    }
  });
}

TEST_CASE("AttentionPlan: grouping never changes a bit (all at once vs one by one)", "[attention][plan]") {
  // 47 reports of 0..150 tokens (over 3000 tokens: several projection groups, partial row blocks);
  // d_model = 64 makes groups of ~680 tokens, so the 700-token report is projected alone.
  std::vector<std::uint32_t> lengths;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 47; ++i) lengths.push_back(std::uniform_int_distribution<std::uint32_t>(0, 150)(rng));
  lengths[5] = 1, lengths[6] = 2, lengths[7] = 0, lengths[8] = 700;
  struct Shape {
    std::uint32_t dm, H, dk, dv;
  };
  each_gemm([&](bool blas) {
  for (Shape s : {Shape{16, 2, 8, 8}, Shape{13, 3, 5, 7}, Shape{2, 2, 1, 1}, Shape{64, 4, 16, 16}})
    for (bool biases : {false, true}) {
      AttentionWeights w = seeded_attention_weights(s.dm, s.H, s.dk, s.dv, 9);
      if (biases) w = with_biases(w, 1);
      const AttentionPlan plan(w, {QueryMode::all, 0, MaskKind::causal});
      const Batch b = make_batch(lengths, s.dm, 5);
      AttentionScratch s1, s2;
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << " d_model=" << s.dm << (biases ? " biases" : ""));
        const PlanOut all = run_plan(plan, b, level, s1, false, true, true);
        const PlanOut one = run_plan(plan, b, level, s2, true, true, true);
        if (!blas) {
          CHECK(same_bits(all, one));
        } else {
          // OpenBLAS: bit-identical with its SkylakeX and Prescott kernels (row blocks of 16, see
          // attention.cpp), not with its Haswell/Zen ones (OPENBLAS_CORETYPE=Haswell: up to 2.2e-7
          // relative): a row's rounding depends on the call there. Within 1e-5 relative instead.
          const double d = max_rel_diff(all, one);
          INFO("max relative difference " << d);
          CHECK(d <= 1e-5);
        }
      }
    }
  });
}

TEST_CASE("seeded weights are deterministic and follow the documented formula", "[attention][plan]") {
  const AttentionWeights a = seeded_attention_weights(8, 2, 3, 5, 77), b = seeded_attention_weights(8, 2, 3, 5, 77);
  const AttentionWeights c = seeded_attention_weights(8, 2, 3, 5, 78, false);
  CHECK(a.w_q == b.w_q);
  CHECK(a.w_o == b.w_o);
  CHECK(a.s_w_v == b.s_w_v);
  CHECK(a.w_q != c.w_q);
  CHECK(c.w_o.empty());
  CHECK(a.b_q.empty());
  CHECK_NOTHROW(a.validate("seeded"));
  CHECK_NOTHROW(c.validate("seeded"));
  // Element 4 of w_v (matrix 2): a * (2u - 1), a over the stacked Q/K/V: fan_out = 2*heads*d_k + heads*d_v = 22.
  auto sm = [](std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const double u = double(sm(sm(77 ^ sm(2)) + 4) >> 40) / 16777216.0;
  const double lim = std::sqrt(6.0 / (8 + (2 * 6 + 10)));
  CHECK(a.w_v[4] == static_cast<float>(lim * (2 * u - 1)));
  for (float v : a.w_q) CHECK(std::fabs(v) <= lim);
  // A value depends on (seed, matrix, index) only: more heads leave the baseline unchanged.
  const AttentionWeights big = seeded_attention_weights(8, 4, 3, 5, 77);
  CHECK(big.s_w_q == a.s_w_q);
}

TEST_CASE("AttentionWeights::validate names what is wrong", "[attention][plan]") {
  const AttentionWeights ok = seeded_attention_weights(6, 2, 3, 3, 1);
  auto fails_with = [](const AttentionWeights& w, const std::string& part) {
    try {
      w.validate("model.safetensors");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("model.safetensors") != std::string::npos);
      CHECK(msg.find(part) != std::string::npos);
      return;
    }
    FAIL("no error for " << part);
  };
  AttentionWeights w = ok;
  w.w_q.pop_back();
  fails_with(w, "w_q has 35 values, expected 36");
  w = ok, w.b_k.assign(5, 0.0f);
  fails_with(w, "b_k");
  w = ok, w.s_w_v.resize(7);
  fails_with(w, "s_w_v");
  w = ok, w.w_o.assign(3, 0.0f);
  fails_with(w, "w_o");
  w = ok, w.heads = 0;
  fails_with(w, "positive");
  w = ok, w.w_k[3] = std::numeric_limits<float>::quiet_NaN();
  fails_with(w, "w_k[3] is not finite");
  w = ok, w.w_o.clear(), w.b_o.assign(6, 0.0f);
  fails_with(w, "b_o");
  CHECK_THROWS_AS(AttentionPlan(w, {}), Error);
  // Each weight finite, the baseline's folded W_Q^T W_K past f32's range: refused when planned.
  w = ok;
  for (auto& v : w.s_w_q) v = 3e20f;
  for (auto& v : w.s_w_k) v = 3e20f;
  CHECK_NOTHROW(w.validate("x"));
  try {
    AttentionPlan plan(w, {});
    FAIL("no error for an overflowing baseline");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("W_Q^T W_K") && Catch::Contains("s_w_q"));
  }
}

TEST_CASE("AttentionPlan refuses a report over the memory budget", "[attention][plan]") {
  const AttentionPlan plan(seeded_attention_weights(8, 2, 4, 4, 1), {});
  const Batch b = make_batch({3, 500, 2}, 8, 1);
  AttentionScratch scratch;
  std::vector<double> ctx(3 * 2 * 3), hs(3 * kHeadStats * 3), ps(kPairStats * 3);
  AttentionOut out;
  out.context = ctx.data(), out.head_stats = hs.data(), out.pair_stats = ps.data(), out.stride = 3;
  const std::size_t budget = plan.report_bytes(499);
  CHECK(plan.report_bytes(500) > budget);
  CHECK(plan.report_bytes(3) < budget);
  try {
    plan.run(b.x.data(), b.off.data(), 3, 2, b.axp.data(), SimdLevel::scalar, out, scratch, budget);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("500 tokens") != std::string::npos);
    CHECK(msg.find(std::to_string(budget)) != std::string::npos);
  }
  CHECK_NOTHROW(plan.run(b.x.data(), b.off.data(), 3, 2, b.axp.data(), SimdLevel::scalar, out, scratch,
                         plan.report_bytes(500)));
  std::vector<float> y(64);
  out.output = y.data();  // no w_o: refused
  const AttentionPlan no_out(seeded_attention_weights(8, 2, 4, 4, 1, false), {});
  std::uint64_t zero = 0;
  out.output_offset = &zero;
  CHECK_THROWS_AS(no_out.run(b.x.data(), b.off.data(), 1, 2, b.axp.data(), SimdLevel::scalar, out, scratch), Error);
}

TEST_CASE("statistic names", "[attention]") {
  CHECK(head_stat_name(kEntropy) == "entropy");
  CHECK(head_stat_name(kFirstWeight) == "first_weight");
  CHECK(pair_stat_name(kJensenShannon) == "js_divergence");
  CHECK(pair_stat_name(kOutputDistance) == "output_distance");
  CHECK(pair_stat_name(kPairStats) == "?");
}

TEST_CASE("project_rows: every level vs the scalar reference, rows independent of the call's row count", "[attention]") {
  // With the GELU epilogue too (gelu = true: GELU has slope <= 1.13, and the levels' fused
  // polynomial differs from the reference's by a few ulp: + 16·u·Σ|terms|).
  // Shapes hitting every tail: rows past the micro-kernel's (1..9, 17, 67: partial row tiles),
  // columns within and past a panel (1, 13, 47..49, 100: partial vectors, the stack-tile path),
  // K below and above the prefetch spread (1, 5, 96: with few row tiles a tile prefetches more
  // lines of the next panel than it has iterations), with a next matrix to prefetch and without.
  // Tolerance: each element is bias + K products summed in k order, the reference unfused, the
  // levels with FMA: |Δ| <= (K + 2)·u·Σ|terms|.
  const auto levels = levels_under_test();
  const std::size_t Ms[] = {1, 2, 3, 5, 8, 9, 17, 67};
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
