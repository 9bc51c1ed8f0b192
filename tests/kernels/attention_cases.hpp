// Shared by test_attention_kernel.cpp and test_attention_plan.cpp: the levels under test, one
// report's projected Q/K/V and axes (Case), the kernel run on it (run_kernel) and a level's
// outputs compared with the scalar reference (compare) within these tolerances:
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
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"

#include "levels_under_test.hpp"

namespace attention_test {

using namespace headsep;

inline constexpr double kU = 1.0 / 16777216.0;  // 2^-24
inline constexpr double kSentinel = -12345.5;
inline const float* const kNoAxis[1] = {nullptr};

using kernel_test::levels_under_test;

inline std::size_t pairs(std::size_t H) { return H ? H * (H - 1) / 2 : 0; }

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

inline Case make_case(std::uint32_t n, std::uint32_t heads, std::uint32_t dk0, std::uint32_t dk, std::uint32_t dv0,
                      std::uint32_t dv, std::uint32_t axes, AttentionConfig config, std::uint64_t seed,
                      std::size_t pad = 0, float amp = 1.5f) {
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

inline Result run_kernel(const Case& c, SimdLevel level, AttentionScratch& scratch, bool maps = true,
                         bool head_out = true) {
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

inline bool untouched(const std::vector<double>& v) {
  for (std::size_t i = 0; i + 1 < v.size(); i += 3)
    if (v[i] != kSentinel || v[i + 2] != kSentinel) return false;
  return v.back() == kSentinel || v.size() % 3 == 0;
}

/// Tolerances of the file header for one case.
struct Tol {
  double delta = 0, L = 0, xmax = 0, vmax = 0, nu = 0, sub = 0;
  std::size_t dv = 0;
};

inline Tol tolerance(const Case& c) {
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
inline double out_norm(const Case& c, const Result& r, std::size_t h) {
  std::size_t off = 0;
  for (std::size_t g = 0; g < h; ++g) off += c.nq() * c.dv[g];
  double s = 0;
  for (std::size_t i = 0; i < c.nq() * c.dv[h]; ++i) s += double(r.ho[off + i]) * r.ho[off + i];
  return std::sqrt(s);
}

/// "" or the first output of `got` outside the tolerance around `ref`.
inline std::string compare(const Case& c, const Result& ref, const Result& got) {
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

inline std::string describe(const Case& c) {
  std::ostringstream os;
  static const char* modes[] = {"all", "first", "last", "index"};
  os << "n=" << c.n << " heads=" << c.heads << " dk0=" << c.dk[0] << " dk=" << c.dk.back() << " dv0=" << c.dv[0]
     << " dv=" << c.dv.back() << " ld=" << c.ld << " axes=" << c.axes << " query=" << modes[int(c.config.query)]
     << "(" << c.config.query_index << ")" << (c.config.mask == MaskKind::causal ? " causal" : "")
     << (c.config.window ? " window=" + std::to_string(c.config.window) : std::string());
  return os.str();
}

}  // namespace attention_test
