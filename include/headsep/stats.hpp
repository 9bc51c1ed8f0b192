#pragma once
/// @file
/// @brief Mergeable one-pass summaries (moments, quantiles, histograms, top-k) for per-scenario
/// aggregation. Each worker thread fills its own accumulators; the partial results are merged in
/// a fixed (chunk) order, so the final summary does not depend on thread scheduling.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "headsep/kernels.hpp"

namespace headsep {

/// @brief Count, mean, population variance, min and max without storing values, so summaries of
/// millions of reports cost O(1) memory. The one moment accumulator of the project (Summary
/// uses it for every metric of every scenario).
///
/// Shifted sums: values are taken relative to the first value seen (the shift), and the sums of
/// d = x - shift and d*d are kept. Adding is two additions and a multiplication per value, no
/// division (Welford's update divides per value, ~4x slower on a row; the summary adds a row per
/// metric and batch in the engine's serial stage). The shift keeps s2 - s1^2/n well-conditioned
/// when the first value is typical of the data: the relative error of the variance grows with
/// (first value - mean)^2 / variance, not with mean^2 / variance as plain sums do.
///
/// Determinism: add() in a fixed order gives bit-identical results run to run; add(row, n) is
/// bit-identical to n calls of add(x), so how a stream is cut into rows does not matter.
/// merge() combines two accumulators exactly in the mean-centred form (Chan et al.) and re-centres
/// on the combined mean; merging in a fixed order is deterministic too.
class Moments {
 public:
  void add(double x) noexcept { add(&x, 1); }
  /// @brief Same result, bit for bit, as n calls of add(x[i]) in order.
  void add(const double* x, std::size_t n) noexcept;
  /// @brief m[j]->add(x[j], n) for j < k, bit for bit, faster (independent rows overlap).
  /// The k accumulators must be distinct.
  static void add_rows(Moments* const* m, const double* const* x, std::size_t k, std::size_t n) noexcept;
  void merge(const Moments& other) noexcept;
  uint64_t count() const noexcept { return n_; }
  /// @brief NaN when empty, so an empty scenario cannot masquerade as a zero mean.
  double mean() const noexcept;
  /// @brief Population variance (ddof=0, as numpy.std's default); 0 when count < 2.
  double variance() const noexcept;
  double stddev() const noexcept;
  /// @brief min() and max() are NaN when empty.
  double min() const noexcept;
  double max() const noexcept;

 private:
  uint64_t n_ = 0;
  double shift_ = 0.0, s1_ = 0.0, s2_ = 0.0;  ///< sums of (x - shift) and (x - shift)^2
  double min_ = 0.0, max_ = 0.0;
  template <std::size_t G>
  static void add_group(Moments* const* m, const double* const* x, std::size_t n) noexcept;
};

struct HistogramBin;

/// @brief Quantiles of an unbounded stream in bounded memory, with a relative-error guarantee
/// that holds for metrics spanning several decades (where rank-error sketches are poor in the tails).
///
/// Small streams are kept exactly (quantile() then matches numpy's default 'linear' method), so
/// the seed data and tests see exact numbers. Once the count would exceed exact_capacity (on add
/// or merge) the values move into DDSketch-style buckets: separate stores for positive and
/// negative magnitudes plus a zero count (|x| < 1e-300 counts as zero).
///
/// Buckets: each binary octave [2^e, 2^(e+1)) is split into N equal-width sub-buckets, with
/// N = ceil((1 - a) / (2a)) for the requested accuracy a. The index comes from the exponent and
/// mantissa bits (no logarithm per add); a bucket [lo, hi) is represented by 2*lo*hi/(lo+hi),
/// the DDSketch representative (2*gamma^i/(gamma+1) in the purely logarithmic case).
/// Stated error: in sketch mode quantile(q) is within relative error 1/(2N+1) <= a of the order
/// statistic x_(floor(q*(n-1))) (0-based), hence within a of the interval between the two order
/// statistics that the exact interpolation uses. Values are clamped to [min, max].
///
/// Merging adds integer bucket counts, so sketch-mode results are bit-identical for any split and
/// merge order, provided all parts use the same parameters. Memory: while exact, up to
/// exact_capacity doubles; after that, dense arrays spanning the used bucket range, about
/// 3.3*N counters per decade of |x| (N = 100 for a = 0.005), never more than ~2030*N per sign.
/// add() allocates only while a store's range grows, not in the steady state.
class QuantileSketch {
 public:
  /// @throws std::invalid_argument unless 1e-6 <= relative_accuracy < 1.
  explicit QuantileSketch(double relative_accuracy = 0.005, std::size_t exact_capacity = 4096);
  /// @brief Finite x only (any sign, zero allowed); @throws std::domain_error otherwise.
  void add(double x);
  /// @brief Adds n values at once (the engine's per-batch rows): one finiteness check and
  /// one mode check for the whole row, the buckets found `level`'s vectors at a time
  /// (default_level() without it). Same result as n calls of add(), at every level.
  void add(const double* x, std::size_t n);
  void add(const double* x, std::size_t n, SimdLevel level);
  /// @throws std::invalid_argument when the bucket layouts (relative accuracies) differ.
  void merge(const QuantileSketch& other);

  /// A row's count and extremes without its buckets (see add_buckets()).
  struct RowTally {
    uint64_t n;
    double min, max;
  };
  /// @brief Buckets and tallies apart, for a caller that fills buckets on several threads and
  /// must keep the rest in order (Summary: one bucket sketch per thread and scenario, the count
  /// and extremes merged per batch in report order). add_buckets() adds a row to this sketch
  /// (exact_capacity 0) and returns the row's own tally; add_tally() adds a tally to a sketch,
  /// merge_buckets() another sketch's buckets and zero count only. A sketch given every row's
  /// tally and every row's buckets equals one given the rows: same counts, extremes, quantiles.
  /// @throws std::domain_error as add(); std::logic_error when a sketch still keeps exact values
  /// where buckets are required (add_buckets() on, merge_buckets() from).
  RowTally add_buckets(const double* x, std::size_t n, SimdLevel level);
  void add_tally(const RowTally& tally);
  void merge_buckets(const QuantileSketch& other);
  uint64_t count() const noexcept { return n_; }
  /// @brief True while all values are still stored, i.e. quantiles are exact.
  bool exact() const noexcept { return exact_; }
  /// @brief q in [0,1]. Exact mode: linear interpolation between order statistics at rank
  /// q*(n-1). Sketch mode: see the class comment for the bound.
  /// @throws std::domain_error when empty or q is outside [0,1].
  double quantile(double q) const;
  /// @brief The accuracy asked for; the guaranteed bound 1/(2N+1) is at most this.
  double relative_accuracy() const noexcept { return accuracy_; }
  /// @brief Exact extremes of the values seen (NaN when empty).
  double min() const noexcept;
  double max() const noexcept;

 private:
  /// @brief Dense counters for bucket indices [offset, offset + counts.size()).
  struct Store {
    std::vector<uint64_t> counts;
    int32_t offset = 0;
    void add(int32_t index, uint64_t c);
    void grow(int32_t lo, int32_t hi);
    void merge(const Store& other);
  };
  int32_t index_of(double magnitude) const noexcept;
  double representative(int32_t index) const noexcept;
  void sketch_add(double x);
  /// lo/hi (the extremes so far) extended by x[0, n), as add(x) one by one would leave them.
  /// @throws std::domain_error unless every x is finite.
  static void extremes(const double* x, std::size_t n, SimdLevel level, double& lo, double& hi);
  /// The buckets of x[0, n) (sketch mode), new_min/new_max the extremes after them (growth bounds).
  void add_to_stores(const double* x, std::size_t n, SimdLevel level, double new_min, double new_max);
  void to_sketch();
  friend std::vector<HistogramBin> histogram(const QuantileSketch&, double, double, std::size_t);

  double accuracy_;
  std::size_t capacity_;
  int32_t subdivisions_;  ///< N sub-buckets per binary octave
  bool exact_ = true;
  uint64_t n_ = 0;
  uint64_t zero_count_ = 0;
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
  std::vector<double> values_;  ///< exact mode only
  Store positive_, negative_;   ///< sketch mode only; negative_ indexed by |x|
};

/// @brief One histogram bin [lo, hi); the last bin also includes hi.
struct HistogramBin {
  double lo, hi;
  uint64_t count;
};

/// @brief Equal-width histogram over [min, max] of the values seen by a sketch, so plots and
/// reports need no second pass over the data. Values outside [min, max] are dropped (as
/// numpy.histogram does); with min = s.min(), max = s.max() the counts sum to s.count().
/// If min == max the range becomes [min - 0.5, max + 0.5] (numpy's convention).
/// Exact in exact mode. In sketch mode each value is placed by its bucket's representative
/// (clamped to [s.min(), s.max()]), so a value within relative_accuracy of a bin edge may land
/// in the neighbouring bin; totals are still exact.
/// @throws std::invalid_argument when bins == 0, min > max or either bound is not finite.
std::vector<HistogramBin> histogram(const QuantileSketch& s, double min, double max,
                                    std::size_t bins);

/// @brief The k largest (value, index) pairs, so the worst reports of a scenario can be named.
/// Ties are broken by the smaller index, making the selection a total order: the result is the
/// same for any split and merge order. Memory is O(k); add allocates nothing once k items are held.
class TopK {
 public:
  explicit TopK(std::size_t k);
  /// @throws std::domain_error for NaN (it has no place in the order).
  void add(double value, uint64_t index);
  /// add(values[i], first_index + i) for i in [0, n), in that order (the same result): values
  /// below the weakest kept one are skipped with one compare each.
  void add(const double* values, std::size_t n, uint64_t first_index);
  void merge(const TopK& other);
  /// @brief Descending value, ascending index on ties.
  std::vector<std::pair<double, uint64_t>> sorted() const;
  std::size_t k() const noexcept { return k_; }
  std::size_t size() const noexcept { return heap_.size(); }

 private:
  std::size_t k_;
  std::vector<std::pair<double, uint64_t>> heap_;  ///< min-heap: the weakest kept item on top
};

}  // namespace headsep
