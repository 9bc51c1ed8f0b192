// Private: what the row writers (row_writers.cpp), the attention-map writer (attention_writer.cpp)
// and the in-memory rows (row_columns.cpp) share: rows formatted on worker threads and written in
// batch order, a report's tokens as JSON, and the numeric columns of a CSV row, in order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/batch.hpp"
#include "headsep/run.hpp"
#include "support/text_util.hpp"

namespace headsep {

// Rows are formatted on worker threads (prepare) and written in batch order (consume).
struct FormattedRows : SinkPartial {
  std::string bytes;
};

// Report r's tokens as a JSON array (used whole in JSONL, as one field in CSV).
inline void append_json_tokens(std::string& s, const ReportBatch& b, std::size_t r) {
  s += '[';
  for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
    if (t != b.token_offset[r]) s += ',';
    append_json_string(s, b.token_name(r, t));
  }
  s += ']';
}

// A model run's (BatchResult::token_ids) report r's vocabulary ids as a JSON array.
inline void append_json_token_ids(std::string& s, const BatchResult& res, std::size_t r) {
  const ReportBatch& b = *res.batch;
  s += '[';
  for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
    if (t != b.token_offset[r]) s += ',';
    s += std::to_string(res.token_ids.at(t));
  }
  s += ']';
}

/// The numeric columns of a CSV row (after report_id, scenario, tokens), in the CSV writer's
/// order: contexts (single, head1..N) per axis, differences per head and axis, head_separation,
/// pairwise separations (N > 2), then for attention schemes the head and pair statistics.
std::vector<std::string> row_column_names(const RunInfo& info);

/// Calls f(value) for each numeric column of row (report r of block m), in row_column_names()'s
/// order: what the CSV writer formats and the in-memory rows keep.
template <class F>
inline void for_each_row_value(const MetricBlock& m, std::size_t r, std::uint32_t C, std::uint32_t N, F&& f) {
  for (std::uint32_t h = 0; h <= N; ++h)
    for (std::uint32_t c = 0; c < C; ++c) f(m.ctx(h, c, r));
  for (std::uint32_t h = 1; h <= N; ++h)
    for (std::uint32_t c = 0; c < C; ++c) f(m.diff(h, c, r));
  f(m.separation[r]);
  if (N > 2)
    for (std::size_t p = 0; p < pair_count(N); ++p) f(m.pair(p, r));
  if (m.attention()) {
    for (std::uint32_t h = 0; h <= N; ++h)
      for (std::uint32_t k = 0; k < m.head_stat_count; ++k) f(m.head_stat(h, k, r));
    for (std::size_t p = 0; p < pair_count(N); ++p)
      for (std::uint32_t k = 0; k < m.pair_stat_count; ++k) f(m.pair_stat(p, k, r));
  }
}

}  // namespace headsep
