// Private: what the row writers (row_writers.cpp) and the attention-map writer (attention_writer.cpp)
// share: rows formatted on worker threads and written in batch order, and a report's tokens as JSON.
#pragma once
#include <cstddef>
#include <string>

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

}  // namespace headsep
