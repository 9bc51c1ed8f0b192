// Every compiled and supported SIMD level (and every strategy) against the scalar reference.
//
// f64: bit-identical (NaN compared as NaN). f32: every output of report r agrees within
//   tol_r = 8 * (len_r + 6) * eps_f32 * M_r,  M_r = max over (h, c) of sum_t |w_h[t] * x_c[t]|,
// i.e. a rounding error per token of the dot products, propagated through the difference,
// pairwise (1-Lipschitz in the context difference) and mean.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headsep/batch.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "kernels/metrics_scalar.hpp"
#include "kernels/metrics_simd.hpp"

#include "levels_under_test.hpp"

using namespace headsep;
using headsep::kernels::Strategy;

namespace {

using kernel_test::levels_under_test;

constexpr std::size_t kLead = 7;  // tokens before report 0: offsets are absolute indices

/// One scenario's inputs: token offsets, axes and weights (stored in double, cast per precision).
struct Case {
  std::size_t n = 0, len = 0, heads = 0, axes = 0;
  bool uniform = true;
  std::vector<std::uint64_t> off;
  std::vector<std::vector<double>> axis, weight;
};

/// Ragged lengths are uniform in [min_len, 2 * len]; `after` tokens follow the last report (0:
/// the rows end with it, so a kernel that read past a batch's tokens would fault under ASan).
Case make_case(std::size_t n, std::size_t len, bool uniform, std::size_t heads, std::size_t axes, std::uint64_t seed,
               std::size_t min_len = 0, std::size_t after = 3) {
  Case k{n, len, heads, axes, uniform, {}, {}, {}};
  std::mt19937_64 rng(seed);
  k.off.push_back(kLead);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t l = uniform ? len : std::uniform_int_distribution<std::size_t>(min_len, 2 * len)(rng);
    k.off.push_back(k.off.back() + l);
  }
  const std::size_t tokens = k.off.back() + after;
  std::uniform_real_distribution<double> wd(0.0, 1.0), xd(-3.0, 3.0);
  k.axis.assign(axes, std::vector<double>(tokens));
  k.weight.assign(heads + 1, std::vector<double>(tokens));
  for (auto& a : k.axis)
    for (auto& v : a) v = xd(rng);
  for (auto& w : k.weight)
    for (auto& v : w) v = wd(rng);
  return k;
}

template <class T>
struct Run {
  std::vector<std::vector<T>> axis, weight;
  std::vector<const T*> axis_p, weight_p;
  std::vector<T> context, difference, pairwise, separation;
  KernelArgs<T> args;

  Run(const Case& k, std::size_t stride, T fill) {
    for (auto& a : k.axis) axis.emplace_back(a.begin(), a.end());
    for (auto& w : k.weight) weight.emplace_back(w.begin(), w.end());
    for (auto& a : axis) axis_p.push_back(a.data());
    for (auto& w : weight) weight_p.push_back(w.data());
    context.assign((k.heads + 1) * k.axes * stride, fill);
    difference.assign(k.heads * k.axes * stride, fill);
    pairwise.assign(pair_count(k.heads) * stride, fill);
    separation.assign(stride, fill);
    args.n_reports = k.n;
    args.token_offset = k.off.data();
    args.uniform_length = k.uniform ? static_cast<std::uint32_t>(k.len) : 0;
    args.axes = static_cast<std::uint32_t>(k.axes);
    args.heads = static_cast<std::uint32_t>(k.heads);
    args.axis = axis_p.data();
    args.weight = weight_p.data();
    args.context = context.data();
    args.difference = difference.data();
    args.pairwise = pairwise.data();
    args.separation = separation.data();
    args.stride = stride;
  }
  /// All outputs of report r (or of padding column r >= n), in a fixed order.
  std::vector<T> column(std::size_t r) const {
    std::vector<T> v;
    const std::size_t S = args.stride;
    for (std::size_t i = 0; i < context.size() / S; ++i) v.push_back(context[i * S + r]);
    for (std::size_t i = 0; i < difference.size() / S; ++i) v.push_back(difference[i * S + r]);
    for (std::size_t i = 0; i < pairwise.size() / S; ++i) v.push_back(pairwise[i * S + r]);
    v.push_back(separation[r]);
    return v;
  }
};

template <class T>
bool same(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>>(a) ==
         std::bit_cast<std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>>(b);
}

double magnitude(const Case& k, std::size_t r) {
  double m = 0;
  for (auto& w : k.weight)
    for (auto& x : k.axis) {
      double s = 0;
      for (auto t = k.off[r]; t < k.off[r + 1]; ++t) s += std::fabs(float(w[t]) * double(float(x[t])));
      m = std::max(m, s);
    }
  return m;
}

/// Runs `level` with `how` and the scalar reference on the same case; returns "" or what differs.
/// `given`: the level gets the reference's baseline contexts with baseline_given set and a NaN
/// baseline weight row, so a path that recomputed (or read) the baseline would differ.
template <class T>
std::string compare(const Case& k, SimdLevel level, Strategy how, bool given = false) {
  const std::size_t stride = k.n + 5;  // strided rows: padding columns must stay untouched
  const T fill = T(-12345.5);
  Run<T> ref(k, stride, fill), got(k, stride, fill);
  kernels::metrics_scalar(ref.args, 0, k.n);
  if (given) {
    for (std::size_t r = 0; r < k.n; ++r)
      for (std::size_t c = 0; c < k.axes; ++c) got.context[c * stride + r] = ref.context[c * stride + r];
    for (auto& w : got.weight[0]) w = std::numeric_limits<T>::quiet_NaN();
    got.args.baseline_given = true;
  }
  bool flagged = false;
  got.args.nonfinite = &flagged;
  kernels::compute_metrics(got.args, level, how);
  // KernelArgs::nonfinite: set whenever a context or the separation is not finite (the engine
  // then scans the batch), clear when every output is finite.
  bool any_bad = false, all_finite = true;
  for (std::size_t r = 0; r < k.n; ++r) {
    const auto e = ref.column(r);
    for (std::size_t i = 0; i < e.size(); ++i) all_finite = all_finite && std::isfinite(e[i]);
    any_bad = any_bad || !std::isfinite(ref.separation[r]);
    for (std::size_t i = 0; i < (k.heads + 1) * k.axes; ++i) any_bad = any_bad || !std::isfinite(ref.context[i * stride + r]);
  }
  if (any_bad && !flagged) return "a non-finite context or separation was not flagged";
  if (all_finite && flagged) return "every output is finite but the kernel flagged one";
  for (std::size_t r = 0; r < stride; ++r) {
    const auto e = ref.column(r), g = got.column(r);
    const double tol = std::is_same_v<T, float> && r < k.n
        ? 8.0 * double(k.off[r + 1] - k.off[r] + 6) * std::numeric_limits<float>::epsilon() * magnitude(k, r)
        : 0.0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      const bool ok = tol == 0.0 ? same(e[i], g[i]) : std::fabs(double(e[i]) - double(g[i])) <= tol;
      if (!ok) {
        std::ostringstream os;
        os.precision(17);
        os << "report " << r << (r >= k.n ? " (padding)" : "") << " output " << i << ": scalar " << e[i]
           << " vs " << g[i] << " (tol " << tol << ")";
        return os.str();
      }
    }
  }
  return "";
}

template <class T>
void sweep() {
  const auto levels = levels_under_test();
  const std::size_t counts[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100};
  const std::size_t lengths[] = {1, 2, 3, 4, 7, 8, 9, 16, 17, 33};
  const Strategy strategies[] = {Strategy::automatic, Strategy::transpose, Strategy::gather, Strategy::shuffle,
                                 Strategy::tokens};
  std::size_t runs = 0, failures = 0;
  std::uint64_t seed = 1;
  for (std::size_t n : counts)
    for (std::size_t len : lengths)
      for (bool uniform : {true, false})
        for (std::size_t heads : {1, 2, 3, 5})
          for (std::size_t axes : {1, 2, 3}) {
            const Case k = make_case(n, len, uniform, heads, axes, seed++);
            for (auto level : levels)
              for (auto how : strategies)
                for (bool given : {false, true}) {
                  if (given && heads != 2 && heads != 5) continue;
                  ++runs;
                  const std::string err = compare<T>(k, level, how, given);
                  if (!err.empty() && ++failures <= 10)
                    FAIL_CHECK(to_string(level) << " " << kernels::to_string(how) << " n=" << n << " len=" << len
                                                << (uniform ? " uniform" : " ragged") << " heads=" << heads
                                                << " axes=" << axes << (given ? " baseline given" : "") << ": " << err);
                }
          }
  INFO(runs << " kernel runs");
  CHECK(failures == 0);
}

/// One multi-slot call (KernelArgs::slots) against one call per slot, same level and strategy:
/// every slot's outputs bit-identical (f32 too: a slot's operations are the same either way).
/// `shared`: slots >= 1 get a NaN baseline weight row, which the multi-slot call must not read
/// (their baseline contexts are slot 0's); their separate calls get slot 0's baseline contexts
/// with baseline_given, as the engine did before multi-slot calls.
template <class T>
std::string compare_slots(const Case& k0, std::size_t slots, SimdLevel level, Strategy how, bool shared) {
  const std::size_t stride = k0.n + 3;
  const T fill = T(-777.25);
  std::vector<Case> ks(slots, k0);
  std::mt19937_64 rng(k0.n * 131 + slots);
  std::uniform_real_distribution<double> wd(0.0, 1.0);
  for (std::size_t s = 1; s < slots; ++s)
    for (auto& w : ks[s].weight)
      for (auto& v : w) v = wd(rng);
  if (shared)
    for (std::size_t s = 1; s < slots; ++s)
      for (auto& v : ks[s].weight[0]) v = std::numeric_limits<double>::quiet_NaN();
  // One call per slot.
  std::vector<std::unique_ptr<Run<T>>> one, all;
  for (std::size_t s = 0; s < slots; ++s) {
    one.push_back(std::make_unique<Run<T>>(ks[s], stride, fill));
    if (shared && s) {
      for (std::size_t r = 0; r < k0.n; ++r)
        for (std::size_t c = 0; c < k0.axes; ++c) one[s]->context[c * stride + r] = one[0]->context[c * stride + r];
      one[s]->args.baseline_given = true;
    }
    kernels::compute_metrics(one[s]->args, level, how);
  }
  // One call for all.
  for (std::size_t s = 0; s < slots; ++s) all.push_back(std::make_unique<Run<T>>(ks[s], stride, fill));
  std::vector<const T*> rows;
  std::vector<SlotOut<T>> more;
  for (std::size_t s = 0; s < slots; ++s) {
    rows.insert(rows.end(), all[s]->weight_p.begin(), all[s]->weight_p.end());
    if (s) more.push_back({all[s]->context.data(), all[s]->difference.data(), all[s]->pairwise.data(), all[s]->separation.data()});
  }
  KernelArgs<T> a = all[0]->args;
  a.weight = rows.data();
  a.slots = static_cast<std::uint32_t>(slots);
  a.more = more.data();
  a.shared_baseline = shared;
  kernels::compute_metrics(a, level, how);
  for (std::size_t s = 0; s < slots; ++s)
    for (std::size_t r = 0; r < stride; ++r) {
      const auto e = one[s]->column(r), g = all[s]->column(r);
      for (std::size_t i = 0; i < e.size(); ++i)
        if (!same(e[i], g[i])) {
          std::ostringstream os;
          os.precision(17);
          os << "slot " << s << " report " << r << " output " << i << ": alone " << e[i] << " vs together " << g[i];
          return os.str();
        }
    }
  return "";
}

}  // namespace

TEST_CASE("f64 kernels are bit-identical to the scalar reference at every level", "[kernels]") { sweep<double>(); }

TEST_CASE("a multi-slot kernel call equals one call per slot, at every level and strategy", "[kernels]") {
  const auto levels = levels_under_test();
  const Strategy strategies[] = {Strategy::automatic, Strategy::transpose, Strategy::gather, Strategy::shuffle,
                                 Strategy::tokens};
  std::size_t runs = 0, failures = 0;
  std::uint64_t seed = 99;
  for (std::size_t n : {0, 1, 7, 8, 9, 17, 33})
    for (std::size_t len : {1, 3, 5, 9, 17})
      for (bool uniform : {true, false})
        for (std::size_t heads : {1, 2, 3})
          for (std::size_t axes : {1, 2, 4}) {
            const Case k = make_case(n, len, uniform, heads, axes, seed++);
            for (std::size_t slots : {2, 3, 17})  // 17: past the kernels' native slot count
              for (bool shared : {false, true})
                for (auto level : levels)
                  for (auto how : strategies) {
                    if (slots == 17 && (how != Strategy::automatic || n > 9)) continue;
                    ++runs;
                    const std::string d = compare_slots<double>(k, slots, level, how, shared);
                    const std::string f = compare_slots<float>(k, slots, level, how, shared);
                    const std::string& err = d.empty() ? f : d;
                    if (!err.empty() && ++failures <= 10)
                      FAIL_CHECK(to_string(level) << " " << kernels::to_string(how) << " n=" << n << " len=" << len
                                                  << (uniform ? " uniform" : " ragged") << " heads=" << heads
                                                  << " axes=" << axes << " slots=" << slots
                                                  << (shared ? " shared baseline" : "") << (d.empty() ? " f32: " : " f64: ")
                                                  << err);
                  }
          }
  INFO(runs << " multi-slot runs");
  CHECK(runs > 1000);
  CHECK(failures == 0);
}

TEST_CASE("f32 kernels agree with the scalar reference within the stated tolerance", "[kernels]") { sweep<float>(); }

TEST_CASE("f64 special values (signed zeros, infinities, NaN, subnormals) match the reference", "[kernels]") {
  const double specials[] = {0.0, -0.0, 1.0, -1.0, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::denorm_min(), 1e308, -1e308, 3.0};
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(specials) - 1);
  for (auto level : levels_under_test())
    for (bool uniform : {true, false})
      for (std::size_t len : {1, 3, 8, 17})
      for (std::size_t n : {32, 37}) {  // 32: no scalar tail at any level (the kernels' own non-finite flag)
        Case k = make_case(n, len, uniform, 3, 2, 7 + len + n);
        for (auto* rows : {&k.axis, &k.weight})
          for (auto& row : *rows)
            for (auto& v : row)
              if (rng() % 3 == 0) v = specials[pick(rng)];
        for (auto how : {Strategy::automatic, Strategy::transpose, Strategy::gather, Strategy::shuffle}) {
          const std::string err = compare<double>(k, level, how);
          INFO(to_string(level) << " " << kernels::to_string(how) << " len=" << len << ": " << err);
          CHECK(err.empty());
        }
      }
}

TEST_CASE("the main job's shape (ragged 3-6 tokens, rows ending at the last report): every level and strategy "
          "equals the scalar reference, alone and as 3 slots with a shared baseline",
          "[kernels]") {
  // The contiguous loads of the ragged path read past a report's end (masked) and must stop at
  // the batch's last token: `after` = 0 puts the end of every row there. Lengths 3..6 are the
  // main job's; 0..8 and 7..8 cover empty reports and odd and even longest lengths up to 8.
  const double specials[] = {0.0, -0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                             -1.0, 1e308};
  std::mt19937_64 rng(27);
  std::size_t runs = 0, failures = 0;
  std::uint64_t seed = 2700;
  for (std::size_t n : {4, 8, 9, 16, 33, 64, 203})
    for (auto [lo, len] : {std::pair<std::size_t, std::size_t>{3, 3}, {0, 4}, {7, 4}})
      for (std::size_t heads : {1, 2, 3})
        for (std::size_t axes : {1, 2, 3})
          for (bool special : {false, true}) {
            Case k = make_case(n, len, false, heads, axes, seed++, lo, 0);
            if (special)  // a few, so that most reports stay finite and the rest of the row matters
              for (auto* rows : {&k.axis, &k.weight})
                for (auto& row : *rows)
                  for (auto& v : row)
                    if (rng() % 16 == 0) v = specials[rng() % std::size(specials)];
            for (auto level : levels_under_test())
              for (auto how : {Strategy::automatic, Strategy::gather, Strategy::shuffle, Strategy::transpose}) {
                ++runs;
                std::string err = compare<double>(k, level, how, heads == 2);
                if (err.empty()) err = compare_slots<double>(k, 3, level, how, true);
                if (!err.empty() && ++failures <= 10)
                  FAIL_CHECK(to_string(level) << " " << kernels::to_string(how) << " n=" << n << " lengths " << lo << ".."
                                              << 2 * len << " heads=" << heads << " axes=" << axes
                                              << (special ? " special values" : "") << ": " << err);
              }
          }
  INFO(runs << " kernel runs");
  CHECK(failures == 0);
}

TEST_CASE("weight validation: every level agrees with the scalar bit test (finite and >= 0, -0.0 allowed)", "[kernels]") {
  const double bad[] = {-1e-300, -1.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                        std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN()};
  const double good[] = {0.0, -0.0, std::numeric_limits<double>::denorm_min(), 1.0, std::numeric_limits<double>::max()};
  std::mt19937_64 rng(5);
  std::size_t checked = 0;
  for (std::size_t n = 0; n <= 70; ++n)
    for (int round = 0; round < 12; ++round) {
      std::vector<double> w(n);
      for (auto& v : w) v = good[rng() % std::size(good)];
      // round 0: all good; else one bad value at a random place (tails included), sometimes two.
      if (round > 0 && n > 0) {
        w[rng() % n] = bad[rng() % std::size(bad)];
        if (round % 3 == 0) w[n - 1] = bad[rng() % std::size(bad)];
      }
      const bool expect = kernels::valid_weights(w.data(), n, SimdLevel::scalar);
      CHECK(expect == (round == 0 || n == 0));
      for (auto level : levels_under_test()) {
        INFO(to_string(level) << " n=" << n << " round " << round);
        CHECK(kernels::valid_weights(w.data(), n, level) == expect);
        ++checked;
      }
    }
  CHECK(checked > 800);
}

TEST_CASE("sketch bucket keys: every level equals the scalar reference, which follows the definition", "[kernels]") {
  const double dmax = std::numeric_limits<double>::max(), dmin = std::numeric_limits<double>::min();
  const double special[] = {0.0, -0.0, 1e-300, -1e-300, 1.0000000000000001e-300, 9.99e-301, -9.99e-301,
                            std::numeric_limits<double>::denorm_min(), dmin, -dmin, 1.0, -1.0, 2.0, 0.5, 1.5,
                            std::nextafter(2.0, 0.0), std::nextafter(1.0, 2.0), dmax, -dmax, 1e300, -3.75};
  std::mt19937_64 rng(17);
  std::normal_distribution<double> nd(0, 3);
  std::size_t checked = 0;
  for (std::int64_t N : {1, 2, 7, 100, 4095}) {
    // The definition, on values whose bucket is known: 2^e (first bucket of octave e), and
    // 2^e (1 + k/N) (first value of sub-bucket k).
    for (int e : {-990, -3, 0, 1, 1023}) {  // 2^-990 ~ 1e-298: above the zero bucket
      for (std::int64_t k : {std::int64_t(0), N / 2, N - 1}) {
        const double x = std::ldexp(1.0 + double(k) / double(N), e);
        // (1 + k/N) rounds to the nearest double: its bucket is k or, rounded down, k - 1.
        std::int64_t key = 0, neg = 0;
        kernels::bucket_keys(&x, 1, N, &key, SimdLevel::scalar);
        const double mx = -x;
        kernels::bucket_keys(&mx, 1, N, &neg, SimdLevel::scalar);
        INFO("N " << N << " e " << e << " k " << k);
        CHECK((key & 3) == 0);
        CHECK((neg & 3) == 1);
        CHECK((neg >> 2) == (key >> 2));
        const std::int64_t index = key >> 2;
        CHECK((index == e * N + k || index == e * N + k - 1));
        if (k == 0) CHECK(index == e * N);
      }
    }
    for (std::size_t n = 0; n <= 70; ++n) {
      std::vector<double> x(n);
      for (auto& v : x)
        v = rng() % 4 == 0 ? special[rng() % std::size(special)] : std::ldexp(nd(rng), int(rng() % 40) - 20);
      std::vector<std::int64_t> expect(n, -7);
      kernels::bucket_keys(x.data(), n, N, expect.data(), SimdLevel::scalar);
      for (std::size_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) < kernels::kSketchZero) CHECK(expect[i] == 2);
      for (auto level : levels_under_test()) {
        std::vector<std::int64_t> got(n + 1, -7);  // one past the end: must stay untouched
        kernels::bucket_keys(x.data(), n, N, got.data(), level);
        INFO(to_string(level) << " N " << N << " n " << n);
        CHECK(std::equal(expect.begin(), expect.end(), got.begin()));
        CHECK(got[n] == -7);
        ++checked;
      }
    }
  }
  CHECK(checked >= 5 * 71);
}

TEST_CASE("row extremes and finiteness: every level equals the scalar reference", "[kernels]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double bad[] = {inf, -inf, nan, -nan};
  const auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  std::mt19937_64 rng(23);
  std::normal_distribution<double> nd(0, 3);
  std::size_t checked = 0;
  for (std::size_t n = 0; n <= 90; ++n)
    for (int round = 0; round < 6; ++round) {
      std::vector<double> x(n);
      for (auto& v : x) v = nd(rng) * (rng() % 7 == 0 ? 1e300 : 1.0);
      if (round % 2 && n) x[rng() % n] = bad[rng() % std::size(bad)];  // odd rounds: one bad value anywhere
      const double lo0 = round < 4 ? std::numeric_limits<double>::infinity() : -0.5, hi0 = round < 4 ? -lo0 : 0.5;
      double lo = lo0, hi = hi0;
      const bool finite = kernels::finite_extremes(x.data(), n, lo, hi, SimdLevel::scalar);
      CHECK(finite == !(round % 2 && n));
      if (finite) {
        double l = lo0, h = hi0;
        for (double v : x) l = std::min(l, v), h = std::max(h, v);
        CHECK(bits(lo) == bits(l));
        CHECK(bits(hi) == bits(h));
      }
      for (auto level : levels_under_test()) {
        double vlo = lo0, vhi = hi0;
        INFO(to_string(level) << " n " << n << " round " << round);
        CHECK(kernels::finite_extremes(x.data(), n, vlo, vhi, level) == finite);
        if (finite) {
          CHECK(bits(vlo) == bits(lo));
          CHECK(bits(vhi) == bits(hi));
        }
        ++checked;
      }
    }
  CHECK(checked >= 91 * 6);
}

TEST_CASE("every built level is listed, unsupported levels fail with a clear error", "[kernels]") {
  const auto built = compiled_levels(), sup = supported_levels();
  REQUIRE(!built.empty());
  CHECK(built.front() == SimdLevel::scalar);
  CHECK(sup.front() == SimdLevel::scalar);
  for (auto l : sup) CHECK(std::find(built.begin(), built.end(), l) != built.end());
  const Case k = make_case(20, 3, true, 2, 2, 99);
  for (auto l : {SimdLevel::scalar, SimdLevel::sse2, SimdLevel::avx2, SimdLevel::avx512}) {
    Run<double> run(k, k.n, 0.0);
    if (std::find(sup.begin(), sup.end(), l) != sup.end()) {
      CHECK_NOTHROW(compute_metrics(run.args, l));
    } else {
      WARN("SIMD level " << to_string(l) << " not supported here: checking that it is refused");
      CHECK_THROWS_AS(compute_metrics(run.args, l), UsageError);
      CHECK_THROWS_WITH(compute_metrics(run.args, l), Catch::Contains(std::string(to_string(l))));
    }
  }
}

TEST_CASE("HEADSEP_SIMD forces a level, and refuses unknown or unsupported ones", "[kernels]") {
  const char* old = std::getenv("HEADSEP_SIMD");
  const std::string saved = old ? old : "";
  ::setenv("HEADSEP_SIMD", "scalar", 1);
  CHECK(default_level() == SimdLevel::scalar);
  ::setenv("HEADSEP_SIMD", "avx9000", 1);
  CHECK_THROWS_AS(default_level(), UsageError);
  const auto sup = supported_levels();
  for (auto l : compiled_levels())
    if (std::find(sup.begin(), sup.end(), l) == sup.end()) {
      ::setenv("HEADSEP_SIMD", std::string(to_string(l)).c_str(), 1);
      CHECK_THROWS_AS(default_level(), UsageError);
    }
  ::unsetenv("HEADSEP_SIMD");
  CHECK(default_level() == sup.back());
  if (old) ::setenv("HEADSEP_SIMD", saved.c_str(), 1);
}
