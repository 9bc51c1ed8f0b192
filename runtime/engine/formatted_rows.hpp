// Private: what the row writers (row_writers.cpp), the attention-map writer (attention_writer.cpp)
// and the in-memory rows (row_columns.cpp) share: rows formatted on worker threads and written in
// batch order, a report's tokens as JSON, and the numeric columns of a CSV row, in order.
#pragma once
#include <charconv>
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

/// A decoder row's key/value fields (RunInfo::kv_head_of), constant over a run: query head h's
/// key/value head (JSONL `kv_head`, CSV `headH_kv_head`), and whether pair (i, j)'s two heads
/// read the same one (`shared_kv`, `headI_headJ_shared_kv`: true/false).
struct KvHead {
  std::uint32_t index;
};
struct SharedKv {
  bool shared;
};

/// What a row column holds: a metric (float64), a KvHead or a SharedKv.
enum class RowColumnKind : std::uint8_t { metric, kv_head, shared_kv };

/// The numeric columns of a CSV row (after report_id, scenario, tokens), in the CSV writer's
/// order: contexts (single, head1..N) per axis, differences per head and axis, head_separation,
/// pairwise separations (N > 2), then for attention schemes the head and pair statistics (a
/// decoder's kv_head after each query head's, shared_kv after each pair's). `kinds`, when given,
/// gets each column's kind. Throws Error when info.kv_head_of is neither empty nor H long (a bug).
std::vector<std::string> row_column_names(const RunInfo& info, std::vector<RowColumnKind>* kinds = nullptr);

// v in decimal, without a temporary string (rows are formatted per row on worker threads).
inline void append_uint(std::string& s, std::uint32_t v) {
  char buf[10];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  s.append(buf, end);
}

/// for_each_row_value's attention statistics: heads 0..N, then pairs (a decoder's KvHead after a
/// query head's, SharedKv after a pair's; kv = RunInfo::kv_head_of).
template <class F>
inline void for_each_attention_value(const MetricBlock& m, std::size_t r, std::uint32_t N,
                                     const std::vector<std::uint32_t>& kv, F& f) {
  for (std::uint32_t h = 0; h <= N; ++h) {
    for (std::uint32_t k = 0; k < m.head_stat_count; ++k) f(m.head_stat(h, k, r));
    if (h && !kv.empty()) f(KvHead{kv[h - 1]});
  }
  std::size_t p = 0;
  for (std::uint32_t i = 1; i <= N; ++i)
    for (std::uint32_t j = i + 1; j <= N; ++j, ++p) {
      for (std::uint32_t k = 0; k < m.pair_stat_count; ++k) f(m.pair_stat(p, k, r));
      if (!kv.empty()) f(SharedKv{kv[i - 1] == kv[j - 1]});
    }
}

/// Calls f(value) for each column of row (report r of block m), in row_column_names()'s order:
/// what the CSV writer formats and the in-memory rows keep. f takes a double (a metric), a
/// KvHead and a SharedKv (decoders only: info.kv_head_of not empty).
template <class F>
inline void for_each_row_value(const MetricBlock& m, std::size_t r, const RunInfo& info, F&& f) {
  const std::uint32_t C = static_cast<std::uint32_t>(info.axis_names.size()), N = info.heads;
  for (std::uint32_t h = 0; h <= N; ++h)
    for (std::uint32_t c = 0; c < C; ++c) f(m.ctx(h, c, r));
  for (std::uint32_t h = 1; h <= N; ++h)
    for (std::uint32_t c = 0; c < C; ++c) f(m.diff(h, c, r));
  f(m.separation[r]);
  if (N > 2)
    for (std::size_t p = 0; p < pair_count(N); ++p) f(m.pair(p, r));
  if (m.attention()) for_each_attention_value(m, r, N, info.kv_head_of, f);
}

}  // namespace headsep
