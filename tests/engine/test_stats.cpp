#include <bit>
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include "headsep/stats.hpp"
using namespace headsep;

namespace {
// kind 0: uniform [0,1000); 1: lognormal(0,2); 2: normal(0,5) with 10% exact zeros; 3: normal(1000,7)
std::vector<double> draw(int kind, std::size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0, 1000);
  std::lognormal_distribution<double> ln(0, 2); std::normal_distribution<double> nd(0, 5), big(1000, 7);
  std::vector<double> v(n);
  for (auto& x : v) x = kind == 0 ? u(g) : kind == 1 ? ln(g) : kind == 3 ? big(g) : (g() % 10 == 0 ? 0.0 : nd(g));
  return v;
}
double lerp_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = q * double(v.size() - 1);
  const auto lo = std::size_t(h);
  return lo + 1 < v.size() ? v[lo] + (h - double(lo)) * (v[lo + 1] - v[lo]) : v[lo];
}
bool rel_close(double a, double b, double tol) { return std::fabs(a - b) <= tol * std::max(std::fabs(a), std::fabs(b)); }
const std::vector<std::size_t> kCuts = {0, 1, 17, 4000, 4100, 23000, 60001};  // uneven parts
const std::vector<double> kQs = {0, 1e-3, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1};

template <class T, class AddFn>
std::vector<T> split(const std::vector<double>& v, const T& proto, AddFn add) {
  std::vector<T> parts;
  for (std::size_t p = 0; p + 1 < kCuts.size(); ++p) {
    parts.push_back(proto);
    for (std::size_t i = kCuts[p]; i < kCuts[p + 1]; ++i) add(parts.back(), v[i], i);
  }
  return parts;
}
/// Forward, reverse, shuffled and pairwise-tree merges of the same parts.
template <class T>
std::vector<T> merge_orders(const std::vector<T>& parts) {
  std::vector<std::size_t> idx(parts.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<T> out;
  auto fold = [&] { T acc = parts[idx[0]]; for (std::size_t i = 1; i < idx.size(); ++i) acc.merge(parts[idx[i]]); out.push_back(acc); };
  fold();
  std::reverse(idx.begin(), idx.end()); fold();
  std::shuffle(idx.begin(), idx.end(), std::mt19937_64(7)); fold();
  std::vector<T> level(parts);  // pairwise tree: level[i] absorbs level[i + step]
  for (std::size_t step = 1; step < level.size(); step *= 2)
    for (std::size_t i = 0; i + step < level.size(); i += 2 * step) level[i].merge(level[i + step]);
  out.push_back(level[0]);
  return out;
}
}  // namespace

TEST_CASE("Moments match a two-pass computation and merge in any order", "[stats]") {
  const auto v = draw(3, kCuts.back(), 1);
  long double sum = 0, ss = 0;  // reference: two passes in extended precision
  for (double x : v) sum += x;
  const double mean = double(sum / v.size());
  for (double x : v) ss += (long double)(x - mean) * (x - mean);
  const double var = double(ss / v.size());
  Moments all; for (double x : v) all.add(x);
  auto parts = split(v, Moments{}, [](Moments& m, double x, std::size_t) { m.add(x); });
  parts.push_back(Moments{});  // an empty part must be harmless
  auto results = merge_orders(parts);
  results.push_back(all);
  for (const auto& m : results) {
    CHECK((m.count() == v.size() && rel_close(m.mean(), mean, 1e-12) && rel_close(m.variance(), var, 1e-12)));
    CHECK(rel_close(m.stddev(), std::sqrt(var), 1e-12));
    CHECK((m.min() == *std::min_element(v.begin(), v.end()) && m.max() == *std::max_element(v.begin(), v.end())));
  }
  Moments k;
  for (double x : {2, 4, 4, 4, 5, 5, 7, 9}) k.add(x);
  CHECK((k.mean() == Approx(5.0) && k.variance() == Approx(4.0) && k.stddev() == Approx(2.0)));
  Moments e;
  CHECK((e.count() == 0 && e.variance() == 0.0 && std::isnan(e.mean()) && std::isnan(e.min())));
  e.add(3.5);
  CHECK((e.variance() == 0.0 && e.mean() == 3.5 && e.min() == 3.5 && e.max() == 3.5));
}

namespace {
// The accumulator stats.hpp held before the unification (Welford's update, one division per
// value): the reference for accuracy and speed below.
struct Welford {
  uint64_t n = 0;
  double mean = 0, m2 = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / double(n);
    m2 += d * (x - mean);
  }
};
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
}  // namespace

TEST_CASE("Moments: a row at once is bit-identical to value by value, however the stream is cut", "[stats]") {
  const auto v = draw(1, 20000, 8);
  Moments one;
  for (double x : v) one.add(x);
  for (std::size_t row : {std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(20000)}) {
    Moments rows;
    for (std::size_t i = 0; i < v.size(); i += row) rows.add(v.data() + i, std::min(row, v.size() - i));
    rows.add(v.data(), 0);  // an empty row changes nothing
    CHECK(rows.count() == one.count());
    CHECK(same_bits(rows.mean(), one.mean()));
    CHECK(same_bits(rows.variance(), one.variance()));
    CHECK((rows.min() == one.min() && rows.max() == one.max()));
  }
}

TEST_CASE("Moments::add_rows is bit-identical to add() row by row, any row count and length", "[stats]") {
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  for (std::size_t k : {std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(5), std::size_t(9)})
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000)}) {
      std::vector<std::vector<double>> rows(k);
      std::vector<Moments> one(k), many(k);
      std::vector<Moments*> ptr;
      std::vector<const double*> row;
      for (std::size_t j = 0; j < k; ++j) {
        rows[j] = draw(int(j % 4), n, 100 + j);
        if (j % 2) one[j].add(5.0), many[j].add(5.0);  // some already hold a value (shift set)
        ptr.push_back(&many[j]), row.push_back(rows[j].data());
      }
      for (int pass = 0; pass < 2; ++pass) {  // twice: the second pass adds to non-empty accumulators
        for (std::size_t j = 0; j < k; ++j) one[j].add(rows[j].data(), n);
        Moments::add_rows(ptr.data(), row.data(), k, n);
      }
      for (std::size_t j = 0; j < k; ++j) {
        INFO("k " << k << ", n " << n << ", row " << j);
        CHECK(one[j].count() == many[j].count());
        if (!one[j].count()) continue;
        CHECK(bits(one[j].mean()) == bits(many[j].mean()));
        CHECK(bits(one[j].variance()) == bits(many[j].variance()));
        CHECK(bits(one[j].min()) == bits(many[j].min()));
        CHECK(bits(one[j].max()) == bits(many[j].max()));
      }
    }
}

TEST_CASE("Moments stay accurate on a large mean (the shift), at least as well as Welford's update", "[stats]") {
  // 1e9 + N(0, 1): plain sums of x and x^2 would lose every digit of the variance here.
  std::mt19937_64 g(9);
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> v(100000);
  for (auto& x : v) x = 1e9 + nd(g);
  long double sum = 0, ss = 0;
  for (double x : v) sum += x;
  const long double mean = sum / v.size();
  for (double x : v) ss += (x - mean) * (x - mean);
  const double var = double(ss / v.size());
  Moments m;
  m.add(v.data(), v.size());
  Welford w;
  for (double x : v) w.add(x);
  const double err_m = std::fabs(m.variance() - var) / var, err_w = std::fabs(w.m2 / double(w.n) - var) / var;
  INFO("relative error of the variance: Moments " << err_m << ", Welford " << err_w);
  CHECK(rel_close(m.mean(), double(mean), 1e-15));
  CHECK(err_m < 1e-9);
  CHECK(err_m <= err_w);  // here the shifted sums are the more accurate of the two
}

// Not run by default: `test_core "[.bench]" -s` prints ns per value for the summary's pattern
// (one row per metric and batch, added in order) with shifted sums and with Welford's update.
TEST_CASE("Moments vs Welford: time per value on rows of 8192", "[.bench]") {
  const auto v = draw(1, 8192, 12);
  const int reps = 4000;  // 32.8 M values
  double sink = 0;
  auto time = [&](auto&& body) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (double(reps) * v.size());
  };
  const double shifted = time([&] {
    Moments m;
    for (int r = 0; r < reps; ++r) m.add(v.data(), v.size());
    sink += m.variance();
  });
  const double welford = time([&] {
    Welford w;
    for (int r = 0; r < reps; ++r)
      for (double x : v) w.add(x);
    sink += w.m2;
  });
  WARN("ns per value: shifted sums (Moments) " << shifted << ", Welford " << welford << " (" << welford / shifted
                                               << "x); checksum " << sink);
  CHECK(sink > 0);
}

TEST_CASE("Exact-mode quantiles follow numpy's linear interpolation", "[stats]") {
  QuantileSketch s;
  for (double x : {5, 3, 1, 4, 2}) s.add(x);
  REQUIRE(s.exact());
  CHECK((s.quantile(0.5) == Approx(3.0) && s.quantile(0.1) == Approx(1.4) && s.quantile(0.9) == Approx(4.6)));
  CHECK((s.quantile(0.0) == 1.0 && s.quantile(1.0) == 5.0 && s.quantile(0.25) == 2.0));
  const auto v = draw(2, 1001, 2);
  QuantileSketch r; for (double x : v) r.add(x);
  REQUIRE(r.exact());
  for (double q : kQs) CHECK(r.quantile(q) == Approx(lerp_quantile(v, q)).epsilon(1e-12).margin(1e-12));
  QuantileSketch a(0.005, 10);
  for (int i = 0; i < 6; ++i) a.add(i);
  QuantileSketch c = a;
  c.merge(a);  // 12 > 10: switches to sketch mode
  CHECK((c.count() == 12 && !c.exact()));
  for (int i = 6; i < 10; ++i) a.add(i);
  CHECK(a.exact());  // exactly at capacity
  a.add(10);
  CHECK_FALSE(a.exact());
}

TEST_CASE("Sketch-mode quantiles are within the relative accuracy", "[stats]") {
  const double acc = 0.005;
  const int kinds[] = {0, 1, 2, -1};  // -1: all negative (negated lognormal)
  const std::size_t sizes[] = {200000, 1000000, 100000, 100000};
  for (int t = 0; t < 4; ++t) {
    auto v = draw(kinds[t] < 0 ? 1 : kinds[t], sizes[t], 10 + t);
    if (kinds[t] < 0) for (double& x : v) x = -x;
    QuantileSketch s(acc); for (double x : v) s.add(x);
    REQUIRE((!s.exact() && s.count() == v.size()));
    std::sort(v.begin(), v.end());
    for (double q : kQs) {
      const double x = v[std::size_t(q * double(v.size() - 1))], est = s.quantile(q);
      INFO("kind " << kinds[t] << " q " << q << " exact order statistic " << x << " sketch " << est);
      CHECK(std::fabs(est - x) <= acc * std::fabs(x));
      CHECK(std::fabs(est - lerp_quantile(v, q)) <= 2 * acc * std::fabs(x) + 1e-9);
    }
  }
}

TEST_CASE("Sketch merges are bit-identical in any order", "[stats]") {
  const auto v = draw(2, kCuts.back(), 3);
  QuantileSketch seq; for (double x : v) seq.add(x);
  auto parts = split(v, QuantileSketch{}, [](QuantileSketch& s, double x, std::size_t) { s.add(x); });
  CHECK((parts.front().exact() && !parts.back().exact()));
  for (const auto& m : merge_orders(parts)) {
    CHECK((m.count() == seq.count() && !m.exact()));
    for (double q : kQs) CHECK(m.quantile(q) == seq.quantile(q));
    const auto h1 = histogram(m, m.min(), m.max(), 17), h2 = histogram(seq, seq.min(), seq.max(), 17);
    for (std::size_t i = 0; i < h1.size(); ++i) CHECK(h1[i].count == h2[i].count);
  }
}

TEST_CASE("Histogram counts", "[stats]") {
  QuantileSketch k;
  for (int i = 0; i < 10; ++i) k.add(i);
  for (const auto& b : histogram(k, 0, 10, 5)) CHECK(b.count == 2);
  const auto h = histogram(k, 2, 5, 3);  // out-of-range values dropped, last bin closed
  CHECK((h[0].count == 1 && h[1].count == 1 && h[2].count == 2 && h[0].lo == 2 && h[2].hi == 5));
  CHECK_THROWS_AS(histogram(k, 0, 10, 0), std::invalid_argument);
  CHECK_THROWS_AS(histogram(k, 1, 0, 3), std::invalid_argument);
  const double acc = 0.005;
  for (std::size_t n : {3000u, 100000u}) {
    const auto v = draw(2, n, 4);
    QuantileSketch s(acc); for (double x : v) s.add(x);
    CHECK(s.exact() == (n <= 4096));
    const auto bins = histogram(s, s.min(), s.max(), 13);
    uint64_t total = 0;
    for (std::size_t i = 0; i < bins.size(); ++i) {
      uint64_t direct = 0, near_edge = 0;
      for (double x : v) {
        direct += x >= bins[i].lo && (x < bins[i].hi || (i + 1 == bins.size() && x == bins[i].hi));
        near_edge += std::fabs(x - bins[i].lo) <= acc * std::fabs(x) || std::fabs(x - bins[i].hi) <= acc * std::fabs(x);
      }
      if (s.exact()) CHECK(bins[i].count == direct);
      else CHECK(std::llabs((long long)bins[i].count - (long long)direct) <= (long long)near_edge);
      total += bins[i].count;
    }
    CHECK(total == s.count());
  }
}

TEST_CASE("TopK matches a full sort, with ties, in any merge order", "[stats]") {
  std::mt19937_64 g(5);
  std::vector<double> v(kCuts.back()); for (auto& x : v) x = double(int(g() % 60) - 20);  // heavy ties
  for (std::size_t k : {std::size_t(37), std::size_t(1), std::size_t(0), std::size_t(100000)}) {
    std::vector<std::pair<double, uint64_t>> ref;
    for (std::size_t i = 0; i < v.size(); ++i) ref.emplace_back(v[i], i);
    std::sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    ref.resize(std::min(k, ref.size()));
    TopK all(k); for (std::size_t i = 0; i < v.size(); ++i) all.add(v[i], i);
    CHECK((all.k() == k && all.sorted() == ref));
    // The range form, in pieces (a non-empty heap first), gives the same items.
    TopK range(k);
    range.add(v.data(), 7, 0);
    range.add(v.data() + 7, v.size() - 7, 7);
    CHECK(range.sorted() == ref);
    for (const auto& m : merge_orders(split(v, TopK(k), [](TopK& t, double x, std::size_t i) { t.add(x, i); })))
      CHECK(m.sorted() == ref);
  }
  CHECK_THROWS_AS(TopK(3).add(std::nan(""), 1), std::domain_error);
  const double with_nan[] = {1, 2, 3, 4, std::nan("")};
  CHECK_THROWS_AS(TopK(2).add(with_nan, 5, 0), std::domain_error);  // NaN after the heap is full
  CHECK_THROWS_AS(TopK(0).add(with_nan, 5, 0), std::domain_error);
}

TEST_CASE("QuantileSketch edge cases", "[stats]") {
  QuantileSketch e;
  CHECK_THROWS_AS(e.quantile(0.5), std::domain_error);
  CHECK_THROWS_AS(e.add(INFINITY), std::domain_error);
  CHECK_THROWS_AS(e.add(std::nan("")), std::domain_error);
  CHECK_THROWS_AS(QuantileSketch(0.0), std::invalid_argument);
  CHECK_THROWS_AS(QuantileSketch(0.01).merge(QuantileSketch(0.001)), std::invalid_argument);
  for (std::size_t cap : {std::size_t(4096), std::size_t(0)}) {  // exact and sketch mode
    QuantileSketch one(0.005, cap);
    one.add(-7.25);
    CHECK(one.exact() == (cap > 0));
    for (double q : {0.0, 0.3, 1.0}) CHECK(one.quantile(q) == -7.25);
    CHECK_THROWS_AS(one.quantile(1.5), std::domain_error);
    QuantileSketch z(0.005, cap);
    for (int i = 0; i < 1000; ++i) z.add(i % 2 ? 0.0 : 1e-310);  // below 1e-300 counts as zero
    CHECK((z.quantile(0.25) == 0.0 && z.quantile(1.0) == (cap ? 1e-310 : 0.0)));  // sketch: 1e-310 -> zero bucket
    const auto h = histogram(z, 0, 0, 4);
    CHECK((h.front().lo == -0.5 && h.back().hi == 0.5 && h[2].count == 1000));
  }
}

TEST_CASE("adding a row at once equals adding value by value", "[stats]") {
  std::mt19937_64 g(3);
  std::normal_distribution<double> nd(0, 5);
  std::vector<double> v(10000);
  for (auto& x : v) x = nd(g);
  for (std::size_t cap : {std::size_t(0), std::size_t(100), std::size_t(4096), std::size_t(20000)}) {
    QuantileSketch one(0.005, cap), many(0.005, cap);
    for (double x : v) one.add(x);
    many.add(v.data(), 3);  // crosses the capacity inside a row for some caps
    many.add(v.data() + 3, v.size() - 3);
    CHECK(one.count() == many.count());
    CHECK(one.exact() == many.exact());
    CHECK(one.min() == many.min());
    CHECK(one.max() == many.max());
    for (double q : {0.0, 0.01, 0.5, 0.99, 1.0}) CHECK(one.quantile(q) == many.quantile(q));
  }
  QuantileSketch s;
  const double bad[] = {1.0, std::nan("")};
  CHECK_THROWS_AS(s.add(bad, 2), std::domain_error);
  // A bad value deep in a long row, at every level: refused before anything is added.
  for (auto level : supported_levels())
    for (double b : {std::nan(""), std::numeric_limits<double>::infinity()}) {
      QuantileSketch t(0.005, 0);
      t.add(v.data(), 100, level);
      std::vector<double> row(v.begin(), v.begin() + 1000);
      row[777] = b;
      INFO(to_string(level));
      CHECK_THROWS_AS(t.add(row.data(), row.size(), level), std::domain_error);
      CHECK(t.count() == 100);
      CHECK(t.max() == *std::max_element(v.begin(), v.begin() + 100));
    }
}

TEST_CASE("a row at once keeps the bits of min, max and buckets at every SIMD level: signed zeros, tails, both index paths", "[stats]") {
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  std::mt19937_64 g(11);
  std::normal_distribution<double> nd(0, 5);
  for (double accuracy : {0.005, 1e-4}) {  // N = 100 (64-bit index product) and N = 5000 (general path)
    for (int shape = 0; shape < 4; ++shape) {
      for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(7), std::size_t(4103)}) {
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          const double r = nd(g);
          // 0: signed zeros are the extremes (min -0.0 or +0.0 by which comes first); 1: zeros
          // mixed with negatives; 2: mixed signs, some zeros and subnormal magnitudes; 3: plain.
          v[i] = shape == 0   ? (g() % 2 ? 0.0 : -0.0) + (g() % 3 == 0 ? std::fabs(r) : 0.0)
                 : shape == 1 ? (g() % 2 ? -0.0 : 0.0) - (g() % 3 == 0 ? std::fabs(r) : 0.0)
                 : shape == 2 ? (g() % 5 == 0 ? (g() % 2 ? 1e-310 : -0.0) : r)
                              : r;
        }
        QuantileSketch one(accuracy, 0);
        for (double x : v) one.add(x);
        for (auto level : supported_levels()) {  // the row's buckets found by each level's vectors
          QuantileSketch many(accuracy, 0);
          many.add(v.data(), v.size(), level);
          INFO("accuracy " << accuracy << ", shape " << shape << ", n " << n << ", " << to_string(level));
          CHECK(one.count() == many.count());
          CHECK(bits(one.min()) == bits(many.min()));
          CHECK(bits(one.max()) == bits(many.max()));
          for (double q : kQs) CHECK(bits(one.quantile(q)) == bits(many.quantile(q)));
          for (int k = 0; k <= 400; ++k) CHECK(bits(one.quantile(k / 400.0)) == bits(many.quantile(k / 400.0)));
        }
      }
    }
  }
}

TEST_CASE("buckets filled apart (add_buckets, merge_buckets) and tallies in order (add_tally) equal add(), bit for bit",
          "[stats]") {
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  std::mt19937_64 g(17);
  std::normal_distribution<double> nd(0, 3);
  // Rows as Summary's batches: an exact-mode head (the first 4096 values), then rows whose
  // buckets go to one of three "thread" sketches by a shuffled assignment, their tallies merged in
  // row order. Signed zeros as a row's extremes test the tallies' first-zero-in-order rule.
  std::vector<std::vector<double>> rows;
  for (std::size_t r = 0; r < 40; ++r) {
    std::vector<double> row(r == 7 ? 0 : 300 + r * 17);
    for (auto& x : row) x = r % 5 == 3 ? (g() % 2 ? 0.0 : -0.0) : g() % 11 == 0 ? (g() % 2 ? -0.0 : 0.0) : nd(g);
    rows.push_back(row);
  }
  for (auto level : supported_levels()) {
    QuantileSketch seq(0.005, 4096), split(0.005, 4096);
    std::vector<QuantileSketch> threads(3, QuantileSketch(0.005, 0));
    std::size_t seen = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto& row = rows[r];
      seq.add(row.data(), row.size(), level);
      if (seen + row.size() <= 4096) {
        QuantileSketch part(0.005, 4096);
        part.add(row.data(), row.size(), level);
        split.merge(part);
      } else {
        split.add_tally(threads[(r * 7) % 3].add_buckets(row.data(), row.size(), level));
      }
      seen += row.size();
    }
    for (const auto& t : threads) split.merge_buckets(t);
    INFO(to_string(level));
    CHECK(!split.exact());
    CHECK(split.count() == seq.count());
    CHECK(bits(split.min()) == bits(seq.min()));
    CHECK(bits(split.max()) == bits(seq.max()));
    for (int k = 0; k <= 400; ++k) CHECK(bits(split.quantile(k / 400.0)) == bits(seq.quantile(k / 400.0)));
    const auto h1 = histogram(split, split.min(), split.max(), 17), h2 = histogram(seq, seq.min(), seq.max(), 17);
    for (std::size_t i = 0; i < h1.size(); ++i) CHECK(h1[i].count == h2[i].count);
  }
  // Buckets only where no exact values are kept: refused, not silently dropped.
  QuantileSketch keeps(0.005, 10), bucket(0.005, 0);
  const double two[] = {1.0, 2.0};
  CHECK_THROWS_AS(keeps.add_buckets(two, 2, SimdLevel::scalar), std::logic_error);
  keeps.add(two, 2);
  CHECK_THROWS_AS(bucket.merge_buckets(keeps), std::logic_error);
  CHECK_THROWS_AS(bucket.add_buckets(std::vector<double>{1.0, std::nan("")}.data(), 2, SimdLevel::scalar), std::domain_error);
  CHECK_THROWS_AS(bucket.merge_buckets(QuantileSketch(0.01, 0)), std::invalid_argument);
}
