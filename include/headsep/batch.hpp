// headsep — the data model: reports as spans of tokens, structure of arrays.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace headsep {

/// What a report source produces, known once it is opened.
struct Schema {
  std::vector<std::string> feature_names;   ///< numeric feature columns, index = ReportBatch::features
  std::vector<std::string> scenario_names;  ///< may grow while streaming; batches refer to it by index
  std::uint32_t given_heads = 0;            ///< N when the data itself carries single + N head weights
  bool names_scenarios = false;             ///< the data names each report's scenarios (batches fill `scenarios`)
  std::uint32_t d_model = 0;                ///< width of the token embeddings batches carry, 0 = none
};

/// A chunk of reports in structure-of-arrays form.
///
/// Report r owns tokens [token_offset[r], token_offset[r+1]). Every report of a batch is
/// evaluated under the same scenario list (`scenarios`); a source starts a new batch when the
/// list changes, so the engine can weight and reduce a whole batch per scenario.
struct ReportBatch {
  std::uint64_t first_report = 0;                ///< global index of report 0 (stable across chunking)
  std::vector<std::uint64_t> token_offset{0};    ///< n_reports + 1 entries
  std::vector<std::vector<double>> features;     ///< [feature][token]
  std::vector<std::string> report_ids;           ///< [report]; empty = synthetic ids "#<index>"
  std::vector<std::string> token_names;          ///< [token]; empty = unnamed tokens
  std::vector<std::uint32_t> scenarios;          ///< Schema::scenario_names indices, output order; empty = the weighting's own
  /// Weights carried by the data: given_weights[j * (heads + 1) + h][token] for scenarios[j],
  /// h = 0 the single-head baseline, 1..heads the heads. Empty when the source has none.
  std::vector<std::vector<double>> given_weights;
  std::uint64_t source_rows = 0;                 ///< input rows that produced this batch (for the seed header)
  /// Token embeddings, row-major [token][d_model] (Schema::d_model wide), for attention schemes.
  std::vector<float> embeddings;
  /// Embeddings borrowed instead (in-memory sources, open_array_source): when set, `embeddings` is
  /// empty and this points at the batch's token 0 in the caller's [token][d_model] array (size
  /// floats), valid for the run. Readers go through embedding_data() / embedding_size().
  const float* embeddings_view = nullptr;
  std::size_t embeddings_view_size = 0;

  const float* embedding_data() const noexcept { return embeddings_view ? embeddings_view : embeddings.data(); }
  std::size_t embedding_size() const noexcept { return embeddings_view ? embeddings_view_size : embeddings.size(); }
  std::size_t n_reports() const noexcept { return token_offset.size() - 1; }
  std::size_t n_tokens() const noexcept { return static_cast<std::size_t>(token_offset.back()); }
  std::size_t report_length(std::size_t r) const noexcept {
    return static_cast<std::size_t>(token_offset[r + 1] - token_offset[r]);
  }
  /// Id shown to users: the data's id, or "#<global index>" for synthetic sets.
  std::string report_id(std::size_t r) const {
    return report_ids.empty() ? "#" + std::to_string(first_report + r) : report_ids[r];
  }
  /// Name of token t (a batch-wide index): the data's, or "t<position in its report r>".
  std::string token_name(std::size_t r, std::size_t t) const {
    return token_names.empty() ? "t" + std::to_string(t - token_offset[r]) : token_names[t];
  }
  void clear() {
    first_report = 0;
    token_offset.assign(1, 0);
    for (auto& f : features) f.clear();
    report_ids.clear();
    token_names.clear();
    scenarios.clear();
    for (auto& g : given_weights) g.clear();
    source_rows = 0;
    embeddings.clear();
    embeddings_view = nullptr;
    embeddings_view_size = 0;
  }
};

/// Weights of one scenario over a batch: row 0 is the single-head baseline, rows 1..heads the
/// heads, each a contiguous array over the batch's tokens (so kernels stream them).
/// Per-query attention (every token a query with its own row) uses layout per_query, where
/// row h holds, per report r of length n, an n x n block at query_offset[r] (query-major).
struct WeightBlock {
  enum class Layout : std::uint8_t { per_token, per_query };
  Layout layout = Layout::per_token;
  std::uint32_t heads = 0;
  std::uint32_t slots = 1;                       ///< > 1: every scenario slot at once (Weighting::all_slots)
  std::vector<std::vector<double>> rows;         ///< [slots * (heads + 1)][token] (per_token), slot-major
  std::vector<std::uint64_t> query_offset;       ///< per_query only: n_reports + 1
  /// Set by the engine for slots after the first when Weighting::shared_baseline(): rows[0]
  /// still holds this batch's baseline, and weights() leaves it as it is.
  bool keep_baseline = false;

  /// Sizes the rows without clearing them: a weighting fills every token of every row.
  /// `shared`: the baseline rows of slots s > 0 stay empty (the scheme shares slot 0's).
  void resize(std::uint32_t n_heads, std::size_t n_tokens, std::uint32_t n_slots = 1, bool shared = false) {
    heads = n_heads, slots = n_slots;
    rows.resize(std::size_t(n_slots) * (n_heads + 1));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i].resize(shared && i > n_heads && i % (n_heads + 1) == 0 ? 0 : n_tokens);
  }
};

/// Number of head pairs (i < j) among n heads.
constexpr std::size_t pair_count(std::size_t heads) noexcept { return heads * (heads - (heads > 0)) / 2; }

/// Metrics of one scenario over a batch, structure of arrays over reports.
struct MetricBlock {
  std::uint32_t heads = 0, axes = 0;
  std::size_t n = 0;
  std::vector<double> context;     ///< [(h * axes + c) * n + r], h = 0 the single-head baseline
  std::vector<double> difference;  ///< [((h - 1) * axes + c) * n + r], head h minus single
  std::vector<double> pairwise;    ///< [p * n + r], pairs (1,2), (1,3), ..., (N-1,N)
  std::vector<double> separation;  ///< [r]: the single distance for N = 2, mean of pairs for N > 2, 0 for N = 1
  /// Attention schemes only (else empty): the head-diversity metrics of attention.hpp,
  /// head_stats[(h * kHeadStats + s) * n + r] for h = 0..N, pair_stats[(p * kPairStats + s) * n + r].
  std::uint32_t head_stat_count = 0, pair_stat_count = 0;  ///< kHeadStats, kPairStats, or 0
  std::vector<double> head_stats;
  std::vector<double> pair_stats;

  void resize(std::uint32_t n_heads, std::uint32_t n_axes, std::size_t n_reports) {
    heads = n_heads, axes = n_axes, n = n_reports;
    context.resize(std::size_t(n_heads + 1) * n_axes * n_reports);
    difference.resize(std::size_t(n_heads) * n_axes * n_reports);
    pairwise.resize(pair_count(n_heads) * n_reports);
    separation.resize(n_reports);
    head_stats.resize(std::size_t(n_heads + 1) * head_stat_count * n_reports);
    pair_stats.resize(pair_count(n_heads) * pair_stat_count * n_reports);
  }
  bool attention() const noexcept { return head_stat_count != 0; }
  double head_stat(std::uint32_t h, std::uint32_t s, std::size_t r) const {
    return head_stats[(std::size_t(h) * head_stat_count + s) * n + r];
  }
  double pair_stat(std::size_t p, std::uint32_t s, std::size_t r) const {
    return pair_stats[(p * pair_stat_count + s) * n + r];
  }
  double ctx(std::uint32_t h, std::uint32_t c, std::size_t r) const { return context[(std::size_t(h) * axes + c) * n + r]; }
  double diff(std::uint32_t h, std::uint32_t c, std::size_t r) const { return difference[(std::size_t(h - 1) * axes + c) * n + r]; }
  double pair(std::size_t p, std::size_t r) const { return pairwise[p * n + r]; }
};

}  // namespace headsep
