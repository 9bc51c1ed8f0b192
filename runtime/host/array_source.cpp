// Embeddings a caller holds in memory as a random-access ReportSource (open_array_source,
// array_input.hpp): the `tensor` plugin's reports, checks and messages without a file. Batches
// borrow the caller's array (ReportBatch::embeddings_view), so X is read in place, never copied.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "headsep/array_input.hpp"
#include "headsep/error.hpp"
#include "headsep/finite.hpp"

namespace headsep {
namespace {

std::string describe(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf"; }

class ArraySource final : public ReportSource {
 public:
  explicit ArraySource(ArrayEmbeddings x) : x_(std::move(x)) {
    if (x_.d_model == 0 || x_.d_model > (1u << 20))
      fail("d_model " + std::to_string(x_.d_model) + " is not in 1..1048576");
    if (!x_.data && x_.tokens) fail("no data for " + std::to_string(x_.tokens) + " tokens");
    if (x_.uniform) {
      if (!x_.offsets.empty()) fail("give either n tokens per report or offsets, not both");
      if (x_.tokens % x_.uniform) fail(std::to_string(x_.tokens) + " tokens are not reports of " + std::to_string(x_.uniform));
      reports_ = x_.tokens / x_.uniform;
    } else {
      check_offsets();
      reports_ = x_.offsets.size() - 1;
    }
    if (!x_.report_ids.empty() && x_.report_ids.size() != reports_)
      fail(std::to_string(x_.report_ids.size()) + " report ids for " + std::to_string(reports_) + " reports");
    if (x_.features && x_.n_features == 0) fail("features: 0 columns");
    if (!x_.features && x_.n_features) fail("features: " + std::to_string(x_.n_features) + " columns but no data");
    if (!x_.feature_names.empty() && x_.feature_names.size() != x_.n_features)
      fail("features: " + std::to_string(x_.feature_names.size()) + " names for " + std::to_string(x_.n_features) + " columns");
    bind_columns();
    for (const auto& c : columns_) schema_.feature_names.push_back(c.name);
    schema_.d_model = x_.d_model;
  }

  const Schema& schema() const override { return schema_; }
  std::string label() const override { return x_.label; }
  std::uint64_t total_reports() const override { return reports_; }
  bool random_access() const override { return true; }

  bool next(ReportBatch& batch, std::size_t max_reports) override {
    if (max_reports == 0 || next_ >= reports_) return false;
    const std::uint64_t n = std::min<std::uint64_t>(max_reports, reports_ - next_);
    produce(next_, n, batch);
    next_ += n;
    return true;
  }

  // Concurrent for distinct batches: reads only immutable members and the caller's arrays.
  bool fill(std::uint64_t index, std::size_t chunk_reports, ReportBatch& batch) const override {
    batch.clear();
    if (chunk_reports == 0 || index >= (reports_ + chunk_reports - 1) / chunk_reports) return false;
    const std::uint64_t first = index * chunk_reports;
    produce(first, std::min<std::uint64_t>(chunk_reports, reports_ - first), batch);
    return true;
  }

 private:
  /// Reports [first, first + n) into `batch`: offsets, the embeddings view, feature columns, ids.
  void produce(std::uint64_t first, std::uint64_t n, ReportBatch& batch) const {
    batch.clear();
    batch.first_report = first;
    batch.token_offset.resize(n + 1);
    const std::uint64_t t0 = begin_of(first);
    for (std::uint64_t r = 0; r <= n; ++r) batch.token_offset[r] = begin_of(first + r) - t0;
    const std::uint64_t tokens = batch.token_offset[n];
    const std::size_t d = x_.d_model;
    batch.embeddings_view = x_.data + t0 * d;  // in place: the caller's array, never copied
    batch.embeddings_view_size = tokens * d;
    if (const std::size_t bad = first_non_finite(batch.embeddings_view, tokens * d); bad < tokens * d)
      not_finite(x_.label, first, batch.token_offset, bad / d, "component " + std::to_string(bad % d),
                 batch.embeddings_view[bad]);
    batch.features.resize(columns_.size());
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const Column& col = columns_[c];
      auto& f = batch.features[c];
      f.resize(tokens);
      if (col.embedding) {
        for (std::uint64_t t = 0; t < tokens; ++t) f[t] = double(x_.data[(t0 + t) * d + col.index]);
      } else {
        const double* p = x_.features + t0 * x_.n_features + col.index;
        for (std::uint64_t t = 0; t < tokens; ++t) f[t] = p[t * x_.n_features];
        for (std::uint64_t t = 0; t < tokens; ++t)
          if (!std::isfinite(f[t])) not_finite("features", first, batch.token_offset, t, "column '" + col.name + "'", f[t]);
      }
    }
    if (!x_.report_ids.empty())
      batch.report_ids.assign(x_.report_ids.begin() + std::ptrdiff_t(first), x_.report_ids.begin() + std::ptrdiff_t(first + n));
    batch.source_rows = tokens;
  }

  struct Column {
    std::string name;
    bool embedding = false;  // x[i]: component i of the embeddings, else column i of the features
    std::uint64_t index = 0;
  };

  [[noreturn]] void fail(const std::string& what) const { throw UsageError(x_.label + ": " + what); }

  void check_offsets() const {
    const auto& o = x_.offsets;
    if (o.empty()) fail("report boundaries missing: x is [T, d_model], so give offsets [B+1] (or x as [B, n, d_model])");
    if (o[0] != 0) fail("offsets[0] = " + std::to_string(o[0]) + ", expected 0");
    for (std::size_t i = 1; i < o.size(); ++i)
      if (o[i] <= o[i - 1])
        fail("offsets[" + std::to_string(i) + "] = " + std::to_string(o[i]) + " after offsets[" + std::to_string(i - 1) +
             "] = " + std::to_string(o[i - 1]) +
             (o[i] == o[i - 1] ? ": report " + std::to_string(i - 1) + " has no tokens" : ": offsets must increase"));
    if (o.back() != x_.tokens)
      fail("offsets[" + std::to_string(o.size() - 1) + "] = " + std::to_string(o.back()) + ", but x has " +
           std::to_string(x_.tokens) + " token rows");
  }

  /// The columns the axes read: feature names, or x[i] (as the tensor plugin's `features`).
  void bind_columns() {
    std::vector<std::string> names = x_.feature_names;
    if (names.empty())
      for (std::uint32_t i = 0; i < x_.n_features; ++i) names.push_back("f" + std::to_string(i));
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i].empty()) fail("feature column " + std::to_string(i) + " has an empty name");
      for (std::size_t j = 0; j < i; ++j)
        if (names[j] == names[i]) fail("feature column '" + names[i] + "' named twice");
    }
    if (x_.columns.empty()) {
      for (std::uint64_t i = 0; i < names.size(); ++i) columns_.push_back({names[i], false, i});
      return;
    }
    for (const auto& w : x_.columns) {
      if (std::any_of(columns_.begin(), columns_.end(), [&](const Column& c) { return c.name == w; })) continue;
      if (auto it = std::find(names.begin(), names.end(), w); it != names.end()) {
        columns_.push_back({w, false, static_cast<std::uint64_t>(it - names.begin())});
        continue;
      }
      std::uint64_t k = 0;
      if (w.size() > 3 && w.compare(0, 2, "x[") == 0 && w.back() == ']') {
        auto [ptr, ec] = std::from_chars(w.data() + 2, w.data() + w.size() - 1, k);
        if (ec == std::errc() && ptr == w.data() + w.size() - 1 && k < x_.d_model) {
          columns_.push_back({w, true, k});
          continue;
        }
      }
      std::string have;
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
      fail("column '" + w + "' (asked for by the axes) is not available: " +
           (names.empty() ? std::string("there are no feature columns; give features, or ")
                          : "the features are " + have + "; or ") +
           "use embedding components x[0]..x[" + std::to_string(x_.d_model - 1) + "], e.g. axes 'a=x[0];b=x[1]'");
    }
  }

  std::uint64_t begin_of(std::uint64_t r) const noexcept { return x_.uniform ? r * x_.uniform : x_.offsets[r]; }

  [[noreturn]] void not_finite(const std::string& what, std::uint64_t first, const std::vector<std::uint64_t>& off,
                               std::uint64_t token, const std::string& where, double v) const {
    const std::uint64_t r = static_cast<std::uint64_t>(std::upper_bound(off.begin(), off.end(), token) - off.begin()) - 1;
    const std::uint64_t g = first + r;
    throw Error(what + ": row " + std::to_string(begin_of(g) + (token - off[r])) + " (report " +
                (x_.report_ids.empty() ? "#" + std::to_string(g) : "'" + x_.report_ids[g] + "'") + ", token " +
                std::to_string(token - off[r]) + "), " + where + ": " + describe(v) + " (values must be finite)");
  }

  ArrayEmbeddings x_;
  Schema schema_;
  std::uint64_t reports_ = 0;
  std::vector<Column> columns_;
  std::uint64_t next_ = 0;  // next(): the next report
};

}  // namespace

std::unique_ptr<ReportSource> open_array_source(ArrayEmbeddings x) { return std::make_unique<ArraySource>(std::move(x)); }

}  // namespace headsep
