#include "headsep/stats.hpp"

#include "kernels/metrics_simd.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace headsep {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// Magnitudes below this count as zero: keeps every indexed value a normal double.
constexpr double kZeroThreshold = kernels::kSketchZero;
__extension__ typedef unsigned __int128 u128;
}  // namespace

// m[g]->add(x[g], n) for g < G in one loop: each row's sums are one chain of dependent adds (the
// order is what makes add() bit-identical however a stream is cut), so G rows side by side keep G
// chains in flight at once.
template <std::size_t G>
void Moments::add_group(Moments* const* m, const double* const* x, std::size_t n) noexcept {
  if (n == 0) return;
  double shift[G], s1[G], s2[G], lo[G], hi[G];
  for (std::size_t g = 0; g < G; ++g) {
    Moments& a = *m[g];
    if (a.n_ == 0) a.shift_ = a.min_ = a.max_ = x[g][0];
    shift[g] = a.shift_, s1[g] = a.s1_, s2[g] = a.s2_, lo[g] = a.min_, hi[g] = a.max_;
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t g = 0; g < G; ++g) {
      const double v = x[g][i], d = v - shift[g];
      s1[g] += d;
      s2[g] += d * d;
      lo[g] = std::min(lo[g], v);
      hi[g] = std::max(hi[g], v);
    }
  for (std::size_t g = 0; g < G; ++g) {
    Moments& a = *m[g];
    a.s1_ = s1[g], a.s2_ = s2[g], a.min_ = lo[g], a.max_ = hi[g], a.n_ += n;
  }
}

void Moments::add(const double* x, std::size_t n) noexcept {
  Moments* self = this;
  add_group<1>(&self, &x, n);
}

void Moments::add_rows(Moments* const* m, const double* const* x, std::size_t k, std::size_t n) noexcept {
  std::size_t j = 0;
  for (; j + 4 <= k; j += 4) add_group<4>(m + j, x + j, n);
  // The rest as one group too: a row alone is one chain of dependent adds, ~4x the time per value.
  switch (k - j) {
    case 3: add_group<3>(m + j, x + j, n); break;
    case 2: add_group<2>(m + j, x + j, n); break;
    case 1: add_group<1>(m + j, x + j, n); break;
    default: break;
  }
}

void Moments::merge(const Moments& other) noexcept {
  if (other.n_ == 0) return;
  if (n_ == 0) return void(*this = other);
  // Centre both parts on their own means, combine (Chan et al.), re-centre on the combined mean.
  const double na = double(n_), nb = double(other.n_), nn = na + nb;
  const double mean_a = shift_ + s1_ / na, mean_b = other.shift_ + other.s1_ / nb;
  const double m2_a = std::max(0.0, s2_ - s1_ * s1_ / na), m2_b = std::max(0.0, other.s2_ - other.s1_ * other.s1_ / nb);
  const double delta = mean_b - mean_a;
  shift_ = mean_a + delta * (nb / nn);
  s1_ = 0.0;
  s2_ = m2_a + m2_b + delta * delta * (na * (nb / nn));
  n_ += other.n_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double Moments::mean() const noexcept { return n_ == 0 ? kNaN : shift_ + s1_ / double(n_); }
double Moments::variance() const noexcept {
  if (n_ < 2) return 0.0;
  const double v = (s2_ - s1_ * s1_ / double(n_)) / double(n_);
  // Sums overflowed by values past ~1e154 give inf - inf: max(0, NaN) read that as 0, a wrong
  // std. Non-finite stays non-finite, for the summary's check to refuse by name.
  if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
  return std::max(0.0, v);
}
double Moments::stddev() const noexcept { return std::sqrt(variance()); }
double Moments::min() const noexcept { return n_ == 0 ? kNaN : min_; }
double Moments::max() const noexcept { return n_ == 0 ? kNaN : max_; }

void QuantileSketch::Store::grow(int32_t lo, int32_t hi) {
  const bool empty = counts.empty();
  const int64_t cur_lo = offset, cur_hi = int64_t(offset) + int64_t(counts.size()) - 1;
  int64_t new_lo = empty ? lo : std::min<int64_t>(lo, cur_lo);
  int64_t new_hi = empty ? hi : std::max<int64_t>(hi, cur_hi);
  // Slack in the growth direction amortises reallocation while the range is still being found.
  const int64_t slack = 32 + (new_hi - new_lo) / 4;
  if (empty || lo < cur_lo) new_lo -= slack;
  if (empty || hi > cur_hi) new_hi += slack;
  std::vector<uint64_t> grown(static_cast<std::size_t>(new_hi - new_lo + 1), 0);
  if (!empty) std::copy(counts.begin(), counts.end(), grown.begin() + (cur_lo - new_lo));
  counts.swap(grown);
  offset = static_cast<int32_t>(new_lo);
}

void QuantileSketch::Store::add(int32_t index, uint64_t c) {
  if (index < offset || int64_t(index) - offset >= int64_t(counts.size())) grow(index, index);
  counts[static_cast<std::size_t>(int64_t(index) - offset)] += c;
}

void QuantileSketch::Store::merge(const Store& other) {
  std::size_t first = 0, last = other.counts.size();
  while (first < last && other.counts[first] == 0) ++first;
  while (last > first && other.counts[last - 1] == 0) --last;
  if (first == last) return;
  const int64_t lo = int64_t(other.offset) + int64_t(first);
  const int64_t hi = int64_t(other.offset) + int64_t(last) - 1;
  if (counts.empty() || lo < offset || hi >= int64_t(offset) + int64_t(counts.size()))
    grow(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
  for (std::size_t i = first; i < last; ++i)
    counts[static_cast<std::size_t>(int64_t(other.offset) + int64_t(i) - offset)] += other.counts[i];
}

QuantileSketch::QuantileSketch(double relative_accuracy, std::size_t exact_capacity)
    : accuracy_(relative_accuracy), capacity_(exact_capacity), subdivisions_(1) {
  if (!(relative_accuracy >= 1e-6 && relative_accuracy < 1.0))
    throw std::invalid_argument("QuantileSketch: relative_accuracy must be in [1e-6, 1)");
  // Worst bucket error is 1/(2N+1); N >= (1-a)/(2a) makes that <= a.
  subdivisions_ = std::max(1, static_cast<int32_t>(std::ceil((1.0 - relative_accuracy) /
                                                             (2.0 * relative_accuracy))));
}

int32_t QuantileSketch::index_of(double magnitude) const noexcept {
  // Exponent and mantissa bits give the octave and the linear position inside it: buckets are
  // equal-width within an octave, which is what makes this exact without a logarithm.
  const uint64_t bits = std::bit_cast<uint64_t>(magnitude);
  const int32_t exponent = static_cast<int32_t>(bits >> 52) - 1023;
  const uint64_t mantissa = bits & ((uint64_t(1) << 52) - 1);
  const auto sub = static_cast<int32_t>((u128(mantissa) * u128(subdivisions_)) >> 52);
  return exponent * subdivisions_ + sub;
}

double QuantileSketch::representative(int32_t index) const noexcept {
  const int64_t n = subdivisions_;
  const int64_t e = (index >= 0 ? index : index - (n - 1)) / n;  // floor division
  const int64_t k = index - e * n;
  // Bucket is 2^e * [(n+k)/n, (n+k+1)/n); 2*lo*hi/(lo+hi) balances the relative error at both ends.
  const double num = 2.0 * double(n + k) * double(n + k + 1);
  const double den = double(n) * double(2 * n + 2 * k + 1);
  return std::ldexp(num / den, static_cast<int>(e));
}

void QuantileSketch::sketch_add(double x) {
  const double m = std::fabs(x);
  if (m < kZeroThreshold) ++zero_count_;
  else (x > 0 ? positive_ : negative_).add(index_of(m), 1);
}

void QuantileSketch::to_sketch() {
  for (double v : values_) sketch_add(v);
  exact_ = false;
  values_.clear();
  values_.shrink_to_fit();
}

void QuantileSketch::add(double x) {
  if (!std::isfinite(x)) throw std::domain_error("QuantileSketch::add: value must be finite");
  if (exact_ && values_.size() < capacity_) {
    values_.push_back(x);
  } else {
    if (exact_) to_sketch();
    sketch_add(x);
  }
  ++n_;
  if (x < min_) min_ = x;
  if (x > max_) max_ = x;
}

void QuantileSketch::add(const double* x, std::size_t n) { add(x, n, default_level()); }

void QuantileSketch::extremes(const double* x, std::size_t n, SimdLevel level, double& lo, double& hi) {
  // Finiteness and the extremes in one vector pass (kernels::finite_extremes). The order of
  // comparisons cannot change a non-zero extreme (equal non-zero doubles have equal bits); a zero
  // extreme takes the first zero in sequence order (-0.0 vs +0.0), so that rare case runs the
  // sequential loop.
  double new_lo = lo, new_hi = hi;
  if (!kernels::finite_extremes(x, n, new_lo, new_hi, level))
    throw std::domain_error("QuantileSketch::add: value must be finite");
  if (new_lo == 0.0 || new_hi == 0.0) {
    new_lo = lo, new_hi = hi;
    for (std::size_t k = 0; k < n; ++k) new_lo = std::min(new_lo, x[k]), new_hi = std::max(new_hi, x[k]);
  }
  lo = new_lo, hi = new_hi;
}

void QuantileSketch::add(const double* x, std::size_t n, SimdLevel level) {
  double new_min = min_, new_max = max_;
  extremes(x, n, level, new_min, new_max);
  std::size_t i = 0;
  if (exact_) {
    const std::size_t take = std::min(n, capacity_ > values_.size() ? capacity_ - values_.size() : std::size_t(0));
    values_.insert(values_.end(), x, x + take);
    i = take;
    if (i < n) to_sketch();
  }
  add_to_stores(x + i, n - i, level, new_min, new_max);
  n_ += n;
  min_ = new_min;
  max_ = new_max;
}

QuantileSketch::RowTally QuantileSketch::add_buckets(const double* x, std::size_t n, SimdLevel level) {
  if (capacity_ != 0) throw std::logic_error("QuantileSketch::add_buckets: the sketch keeps exact values (capacity > 0)");
  // The row's own extremes, as a fresh sketch's add() finds them (so add_tally() merges the
  // bits merge() would have merged).
  RowTally t{n, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  extremes(x, n, level, t.min, t.max);
  if (n == 0) return t;
  if (exact_) to_sketch();  // capacity 0: nothing kept yet
  min_ = std::min(min_, t.min), max_ = std::max(max_, t.max);
  add_to_stores(x, n, level, min_, max_);
  n_ += n;
  return t;
}

void QuantileSketch::add_tally(const RowTally& t) {
  if (t.n == 0) return;
  if (exact_) to_sketch();
  n_ += t.n;
  min_ = std::min(min_, t.min);
  max_ = std::max(max_, t.max);
}

void QuantileSketch::merge_buckets(const QuantileSketch& other) {
  if (other.subdivisions_ != subdivisions_)
    throw std::invalid_argument("QuantileSketch::merge_buckets: relative accuracies differ");
  if (other.exact_ && !other.values_.empty())
    throw std::logic_error("QuantileSketch::merge_buckets: the other sketch keeps exact values");
  if (&other == this || other.exact_) return;  // itself, or no buckets yet
  if (exact_) to_sketch();
  positive_.merge(other.positive_);
  negative_.merge(other.negative_);
  zero_count_ += other.zero_count_;
}

void QuantileSketch::add_to_stores(const double* x, std::size_t n, SimdLevel level, double new_min, double new_max) {
  std::size_t i = 0;
  if (subdivisions_ >= 4096) {  // the index product may pass 2^64: the general path
    for (; i < n; ++i) sketch_add(x[i]);
  } else {
    // The buckets' keys a block at a time (kernels::bucket_keys: the index arithmetic in vectors),
    // then one increment each, branching on the sign (most metrics keep one: the branch is
    // predicted), each store's offset, size and counts in scalar locals, reloaded only when a
    // store grows. They were stack arrays indexed by the sign, kept in memory and reloaded per
    // value: Summary::prepare 0.202 -> 0.183 s per 4 M reports of the main job (Xeon, 1 thread).
    // A branchless select on the sign was faster on a random-sign row (bench_engine
    // BM_sketch_add mode 0/1) but slower on the main job's rows; arrays indexed by the sign in
    // place of the branch were ~20 % slower on Zen 3.
    Store* const store[2] = {&positive_, &negative_};
    uint64_t zeros = 0;
    int64_t off0 = 0, off1 = 0;
    uint64_t size0 = 0, size1 = 0, *data0 = nullptr, *data1 = nullptr;
    const auto bind = [&] {
      off0 = positive_.offset, off1 = negative_.offset;
      size0 = positive_.counts.size(), size1 = negative_.counts.size();
      data0 = positive_.counts.data(), data1 = negative_.counts.data();
    };
    bind();
    constexpr std::size_t kBlock = 512;
    int64_t key[kBlock];
    while (i < n) {
      const std::size_t m = std::min(kBlock, n - i);
      kernels::bucket_keys(x + i, m, subdivisions_, key, level);
      for (std::size_t j = 0; j < m; ++j) {
        const auto s = static_cast<std::size_t>(key[j] & 3);
        if (s == 2) {
          ++zeros;
          continue;
        }
        const int64_t index = key[j] >> 2;  // floor: the key is 4 * index + s
        if (s == 0) {
          if (const auto pos = static_cast<uint64_t>(index - off0); pos < size0) {
            ++data0[pos];
            continue;
          }
        } else if (const auto pos = static_cast<uint64_t>(index - off1); pos < size1) {
          ++data1[pos];
          continue;
        }
        // Out of the store's range: grow once for every key of this store left in the block,
        // and up to the row's largest magnitude of this sign (known from its extremes). A fresh
        // sketch otherwise found its range a bucket at a time, a reallocation and copy each.
        const double top = s == 0 ? new_max : -new_min;
        int64_t lo = index, hi = top >= kZeroThreshold ? std::max<int64_t>(index, index_of(top)) : index;
        for (std::size_t t = j + 1; t < m; ++t)
          if (static_cast<std::size_t>(key[t] & 3) == s) lo = std::min(lo, key[t] >> 2), hi = std::max(hi, key[t] >> 2);
        store[s]->grow(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
        store[s]->add(static_cast<int32_t>(index), 1);
        bind();
      }
      i += m;
    }
    zero_count_ += zeros;
  }
}

void QuantileSketch::merge(const QuantileSketch& other) {
  if (other.subdivisions_ != subdivisions_)
    throw std::invalid_argument("QuantileSketch::merge: relative accuracies differ");
  if (&other == this) return merge(QuantileSketch(other));
  if (other.n_ == 0) return;
  if (exact_ && other.exact_ && n_ + other.n_ <= capacity_) {
    values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  } else {
    if (exact_) to_sketch();
    if (other.exact_) {
      for (double v : other.values_) sketch_add(v);
    } else {
      positive_.merge(other.positive_);
      negative_.merge(other.negative_);
      zero_count_ += other.zero_count_;
    }
  }
  n_ += other.n_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double QuantileSketch::min() const noexcept { return n_ == 0 ? kNaN : min_; }
double QuantileSketch::max() const noexcept { return n_ == 0 ? kNaN : max_; }

double QuantileSketch::quantile(double q) const {
  if (n_ == 0) throw std::domain_error("QuantileSketch::quantile: empty sketch");
  if (!(q >= 0.0 && q <= 1.0)) throw std::domain_error("QuantileSketch::quantile: q not in [0,1]");
  const double rank = q * static_cast<double>(n_ - 1);
  if (exact_) {
    std::vector<double> v(values_);
    const auto lo = static_cast<std::size_t>(rank);
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(lo), v.end());
    const double a = v[lo];
    if (lo + 1 >= v.size()) return a;
    const double b = *std::min_element(v.begin() + std::ptrdiff_t(lo) + 1, v.end());
    const double t = rank - static_cast<double>(lo), d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;  // numpy's _lerp: exact at both ends
  }
  uint64_t cum = 0;
  const auto reaches = [&](uint64_t c) { return c != 0 && double(cum += c) > rank; };
  for (std::size_t i = negative_.counts.size(); i-- > 0;)
    if (reaches(negative_.counts[i]))
      return std::clamp(-representative(negative_.offset + int32_t(i)), min_, max_);
  if (reaches(zero_count_)) return std::clamp(0.0, min_, max_);
  for (std::size_t i = 0; i < positive_.counts.size(); ++i)
    if (reaches(positive_.counts[i]))
      return std::clamp(representative(positive_.offset + int32_t(i)), min_, max_);
  return max_;  // only reachable through rounding of rank for counts beyond 2^53
}

std::vector<HistogramBin> histogram(const QuantileSketch& s, double min, double max,
                                    std::size_t bins) {
  if (bins == 0 || !std::isfinite(min) || !std::isfinite(max) || min > max)
    throw std::invalid_argument("histogram: need bins >= 1 and finite min <= max");
  if (min == max) min -= 0.5, max += 0.5;
  const double span = max - min;
  if (!std::isfinite(span)) throw std::invalid_argument("histogram: range too wide");
  std::vector<HistogramBin> out(bins);
  for (std::size_t i = 0; i < bins; ++i) {
    out[i].lo = i == 0 ? min : out[i - 1].hi;
    out[i].hi = i + 1 == bins ? max : min + span * (double(i + 1) / double(bins));
    out[i].count = 0;
  }
  const auto place = [&](double v, uint64_t c) {
    if (c == 0 || !(v >= min && v <= max)) return;
    auto i = std::min(bins - 1, static_cast<std::size_t>((v - min) / span * double(bins)));
    // The arithmetic guess can be one off near an edge; the stored edges are authoritative.
    while (i > 0 && v < out[i].lo) --i;
    while (i + 1 < bins && v >= out[i].hi) ++i;
    out[i].count += c;
  };
  if (s.exact_) {
    for (double v : s.values_) place(v, 1);
    return out;
  }
  for (std::size_t i = 0; i < s.negative_.counts.size(); ++i)
    place(std::clamp(-s.representative(s.negative_.offset + int32_t(i)), s.min_, s.max_),
          s.negative_.counts[i]);
  if (s.zero_count_ != 0) place(std::clamp(0.0, s.min_, s.max_), s.zero_count_);
  for (std::size_t i = 0; i < s.positive_.counts.size(); ++i)
    place(std::clamp(s.representative(s.positive_.offset + int32_t(i)), s.min_, s.max_),
          s.positive_.counts[i]);
  return out;
}

namespace {
using Item = std::pair<double, uint64_t>;
/// Total order: larger value first, smaller index first among equal values.
bool better(const Item& a, const Item& b) noexcept {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}
}  // namespace

TopK::TopK(std::size_t k) : k_(k) { heap_.reserve(std::min<std::size_t>(k, 4096)); }

void TopK::add(double value, uint64_t index) {
  if (std::isnan(value)) throw std::domain_error("TopK::add: NaN value");
  if (k_ == 0) return;
  const Item item{value, index};
  if (heap_.size() < k_) {
    heap_.push_back(item);
    std::push_heap(heap_.begin(), heap_.end(), better);  // front() = weakest kept
  } else if (better(item, heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), better);
    heap_.back() = item;
    std::push_heap(heap_.begin(), heap_.end(), better);
  }
}

void TopK::add(const double* values, std::size_t n, uint64_t first_index) {
  std::size_t i = 0;
  for (; i < n && heap_.size() < k_; ++i) add(values[i], first_index + i);
  if (k_ == 0) {
    for (; i < n; ++i)
      if (std::isnan(values[i])) throw std::domain_error("TopK::add: NaN value");
    return;
  }
  double weakest = heap_.front().first;
  for (; i < n; ++i) {
    // Below the weakest kept value: not better whatever the index (indices only break ties).
    if (values[i] < weakest) continue;
    add(values[i], first_index + i);  // NaN throws there
    weakest = heap_.front().first;
  }
}

void TopK::merge(const TopK& other) {
  if (&other == this) return merge(TopK(other));
  for (const Item& it : other.heap_) add(it.first, it.second);
}

std::vector<std::pair<double, uint64_t>> TopK::sorted() const {
  std::vector<Item> out(heap_);
  std::sort(out.begin(), out.end(), better);
  return out;
}

}  // namespace headsep
