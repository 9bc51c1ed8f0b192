// What a scenario plugin returned for one chunk, checked as a whole before the engine reads it:
// offsets, sizes against the schema, duplicate scenarios, non-finite feature values.
#include "host/chunk_check.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "headsep/plugin_host.hpp"
#include "host/text_checks.hpp"
#include "support/float_bits.hpp"

namespace headsep::host {

namespace {

namespace lim = plugin_limits;

// True when some x[i] is inf or NaN: headsep/finite.hpp's branch-free pass, inlined into an AVX2
// clone as well (every feature and embedding value of every chunk goes through here).
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
bool any_nonfinite(const double* x, std::uint64_t n) { return any_non_finite(x, n); }

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
bool any_nonfinite32(const float* x, std::uint64_t n) { return any_non_finite(x, n); }

// Every feature value must be finite. Called only when a branch-free pass found one that is not.
[[noreturn]] void throw_nonfinite(const ReportBatch& b, const Schema& schema, std::size_t f, const std::string& where) {
  const auto& x = b.features[f];
  for (std::size_t r = 0; r < b.n_reports(); ++r)
    for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t)
      if (!std::isfinite(x[t])) {
        char v[32];
        std::snprintf(v, sizeof v, "%g", x[t]);
        throw PluginError(where + ": report '" + b.report_id(r) + "' (report " + std::to_string(r + 1) +
                          " of the chunk): feature '" + schema.feature_names[f] + "' of token " +
                          std::to_string(t - b.token_offset[r] + 1) +
                          (detail::is_unwritten(x[t]) ? std::string(" was not written (the buffer feature() returned must be filled)")
                                                      : std::string(" is ") + v + " (feature values must be finite)"));
      }
  throw PluginError(where + ": feature '" + schema.feature_names[f] + "' holds a non-finite value");
}

// True when every x[i] is finite and >= 0 (-0.0 included): one OR over the float_bits tests.
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
bool valid_weights(const double* x, std::uint64_t n) {
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits |= detail::nonfinite_bit(x[i]) | detail::negative_bit(x[i]);
  return !(bits >> 63);
}

// The report and token of global token t.
std::string token_at(const ReportBatch& b, std::uint64_t t) {
  std::size_t r = static_cast<std::size_t>(std::upper_bound(b.token_offset.begin(), b.token_offset.end(), t) -
                                           b.token_offset.begin()) - 1;
  return "report '" + b.report_id(r) + "' (report " + std::to_string(r + 1) + " of the chunk), token " +
         std::to_string(t - b.token_offset[r] + 1);
}

[[noreturn]] void throw_bad_given(const ReportBatch& b, const Schema& schema, const ChunkSink& sink, std::size_t i,
                                  const std::string& where) {
  const std::size_t rows = std::size_t(schema.given_heads) + 1, slot = i / rows, row = i % rows;
  const auto& x = b.given_weights[i];
  for (std::uint64_t t = 0; t < x.size(); ++t)
    if (!(x[t] >= 0.0 && std::isfinite(x[t]))) {
      char v[32];
      std::snprintf(v, sizeof v, "%g", x[t]);
      throw PluginError(where + ": " + token_at(b, t) + ", scenario '" + shown(sink.scenarios.at(slot)) + "': given " +
                        (row ? "head" + std::to_string(row) : std::string("single")) + " weight " +
                        (detail::is_unwritten(x[t]) ? std::string("was not written (the buffer given_weights() returned must be filled)")
                                                    : std::string("is ") + v + " (weights must be finite and >= 0)"));
    }
  throw PluginError(where + ": given weight row " + std::to_string(i) + " holds a bad value");
}

[[noreturn]] void throw_bad_embedding(const ReportBatch& b, std::uint32_t d_model, const std::string& where) {
  const auto& x = b.embeddings;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) {
      char v[32];
      std::snprintf(v, sizeof v, "%g", double(x[i]));
      throw PluginError(where + ": " + token_at(b, i / d_model) + ": embedding value " + std::to_string(i % d_model + 1) +
                        " of " + std::to_string(d_model) +
                        (detail::is_unwritten(x[i]) ? std::string(" was not written (the buffer embeddings() returned must be filled)")
                                                    : std::string(" is ") + v + " (embeddings must be finite)"));
    }
  throw PluginError(where + ": an embedding holds a non-finite value");
}

}  // namespace

void check_chunk(const ChunkSink& sink, const ReportBatch& batch, const Schema& schema, const std::string& where) {
  auto bad = [&](const std::string& what) { return PluginError(where + " is malformed: " + what); };
  if (!sink.offsets_set) throw bad("token_offsets() was never called");
  const auto& off = batch.token_offset;
  for (std::size_t r = 0; r <= sink.n_reports; ++r)  // poisoned by token_offsets()
    if (off[r] == kUnwrittenOffset)  // the poison value: left unwritten, or written as 2^64 - 1 (past any chunk)
      throw bad("token offset " + std::to_string(r) + " of " + std::to_string(sink.n_reports + 1) +
                " is 2^64 - 1: it was not written, or was written past the limit of " +
                std::to_string(lim::max_chunk_tokens) + " tokens per chunk (the array token_offsets() returned must be "
                "filled with offsets 0..tokens)");
  if (off[0] != 0) throw bad("token_offset[0] must be 0");
  // Branch-free and SSE2-vectorisable (no 64-bit compares): with every offset below 2^63, a
  // decrease sets the top bit of the difference; the exact search runs only when a top bit is set.
  std::uint64_t top = 0;
  for (std::size_t r = 0; r < sink.n_reports; ++r) top |= (off[r + 1] - off[r]) | off[r + 1];
  for (std::size_t r = 0; (top >> 63) && r < sink.n_reports; ++r)
    if (off[r + 1] < off[r]) throw bad("token offsets decrease at report " + std::to_string(r + 1));
  if (off.back() > lim::max_chunk_tokens)
    throw bad(std::to_string(off.back()) + " tokens (a chunk holds at most " + std::to_string(lim::max_chunk_tokens) + ")");
  const std::uint64_t n_tokens = off.back();
  for (std::size_t f = 0; f < schema.feature_names.size(); ++f) {
    if (!sink.feature_set[f]) throw bad("feature '" + schema.feature_names[f] + "' was not written");
    if (batch.features[f].size() != n_tokens)
      throw bad("feature '" + schema.feature_names[f] + "' has " + std::to_string(batch.features[f].size()) +
                " values for " + std::to_string(n_tokens) + " tokens");
  }
  if (!batch.report_ids.empty() && batch.report_ids.size() != sink.n_reports)
    throw bad(std::to_string(batch.report_ids.size()) + " report ids for " + std::to_string(sink.n_reports) + " reports");
  if (!batch.token_names.empty() && batch.token_names.size() != n_tokens)
    throw bad(std::to_string(batch.token_names.size()) + " token names for " + std::to_string(n_tokens) + " tokens");
  if (schema.d_model) {
    if (!sink.embeddings_set) throw bad("embeddings() was never called (the schema declares d_model " + std::to_string(schema.d_model) + ")");
    if (batch.embeddings.size() != n_tokens * schema.d_model)
      throw bad("embeddings for " + std::to_string(batch.embeddings.size() / schema.d_model) + " tokens, not " +
                std::to_string(n_tokens));
  }
  if (schema.given_heads) {
    if (sink.scenarios.empty()) throw bad("given weights need the chunk's scenarios (scenario() was never called)");
    const std::size_t rows = sink.scenarios.size() * (std::size_t(schema.given_heads) + 1);
    if (batch.given_weights.size() != rows)
      throw bad("expected given weights for " + std::to_string(sink.scenarios.size()) + " scenarios x " +
                std::to_string(std::size_t(schema.given_heads) + 1) + " rows");
    for (std::size_t i = 0; i < rows; ++i)
      if (batch.given_weights[i].size() != n_tokens)
        throw bad("given weight row " + std::to_string(i) + " has " + std::to_string(batch.given_weights[i].size()) +
                  " values for " + std::to_string(n_tokens) + " tokens");
  } else if (!batch.given_weights.empty()) {
    throw bad("given weights written but the schema declares no given heads");
  }
  if (sink.scenarios.size() > 1) {
    std::vector<std::string_view> sorted(sink.scenarios.begin(), sink.scenarios.end());
    std::sort(sorted.begin(), sorted.end());
    if (auto it = std::adjacent_find(sorted.begin(), sorted.end()); it != sorted.end())
      throw bad("scenario '" + shown(*it) + "' is listed twice (each scenario is evaluated once per report)");
  }
  // Feature values must be finite (the search for the culprit only on failure); so must given
  // weights (and >= 0) and embeddings, which are this generator's as much as its features are.
  for (std::size_t f = 0; f < schema.feature_names.size(); ++f)
    if (any_nonfinite(batch.features[f].data(), n_tokens)) throw_nonfinite(batch, schema, f, where);
  for (std::size_t i = 0; i < batch.given_weights.size(); ++i)
    if (!valid_weights(batch.given_weights[i].data(), n_tokens)) throw_bad_given(batch, schema, sink, i, where);
  if (schema.d_model && any_nonfinite32(batch.embeddings.data(), batch.embeddings.size()))
    throw_bad_embedding(batch, schema.d_model, where);
}

}  // namespace headsep::host
