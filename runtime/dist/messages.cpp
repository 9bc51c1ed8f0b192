// headsep — the scale-out messages (messages.hpp): a chunk's results, a chunk rank 0 read.
//
// What travels is a chunk's finished results, not partial aggregates: the summary's moments are
// shifted sums added report by report (stats.hpp), so no merge of per-rank moments reproduces a
// single process bit for bit; the metric rows themselves do, through the very same sinks. The
// rows are ~8 bytes per value (a summary-only run sends only the rows the summary reads), far
// less than the computing that made them (docs/DISTRIBUTED.md has the numbers and a cost model).
#include "dist/messages.hpp"

#include "headsep/batch.hpp"

namespace headsep::dist::detail {

// ---- a chunk's results: worker -> rank 0 -------------------------------------------------

std::string encode_result(const BatchResult& res, bool full) {
  const ReportBatch& b = *res.batch;
  Out o;
  o.u64(kData);
  o.u64(res.index);
  o.u64(b.first_report);
  o.u64(b.source_rows);
  o.u64(full);
  o.vec(b.token_offset);
  o.strs(b.report_ids);
  if (full) o.strs(b.token_names);
  o.u64(res.metrics.size());
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const MetricBlock& m = res.metrics[j];
    o.str(*res.scenario_names[j]);
    o.u64(m.heads), o.u64(m.axes), o.u64(m.n), o.u64(m.head_stat_count), o.u64(m.pair_stat_count);
    // The summary reads separation, differences and the attention statistics; contexts and
    // pairwise separations only go to per-report rows.
    if (full) o.vec(m.context), o.vec(m.pairwise);
    o.vec(m.difference), o.vec(m.separation), o.vec(m.head_stats), o.vec(m.pair_stats);
  }
  o.u64(res.dumps.size());
  for (const AttentionDump& d : res.dumps) {
    o.u64(d.heads), o.u64(d.d_model);
    o.vec(d.reports), o.vec(d.queries), o.vec(d.n_queries), o.vec(d.maps_offset), o.vec(d.maps);
    o.vec(d.output_offset), o.vec(d.output);
  }
  o.vec(res.layers);  // a model run's (run_model): the slots' layers, the token ids (per-report outputs)
  if (full) o.vec(res.token_ids);
  o.vec(res.report_status);
  o.u64(res.tokens_without_axis_value);
  return o.take();
}

std::string end_mark() {
  Out o;
  o.u64(kEnd);
  return o.take();
}

// Returns false for an end mark.
bool decode_result(const std::string& msg, int from, std::uint64_t& index, ReportBatch& b, BatchResult& res,
                   std::vector<std::string>& names) {
  In in(msg, from);
  if (in.u64() == kEnd) {
    in.done();
    return false;
  }
  index = in.u64();
  b.clear();
  b.features.clear();
  b.given_weights.clear();
  b.first_report = in.u64();
  b.source_rows = in.u64();
  const bool full = in.u64() != 0;
  in.vec(b.token_offset);
  if (b.token_offset.empty()) throw Error("message from rank " + std::to_string(from) + " is corrupt (no token offsets)");
  in.strs(b.report_ids);
  if (full) in.strs(b.token_names);
  const std::uint64_t slots = in.u64();
  if (slots > 1u << 20) throw Error("message from rank " + std::to_string(from) + " is corrupt (slots)");
  res.metrics.resize(slots);
  names.resize(slots);
  for (std::uint64_t j = 0; j < slots; ++j) {
    MetricBlock& m = res.metrics[j];
    names[j] = in.str();
    m.heads = static_cast<std::uint32_t>(in.u64()), m.axes = static_cast<std::uint32_t>(in.u64());
    m.n = in.u64();
    m.head_stat_count = static_cast<std::uint32_t>(in.u64()), m.pair_stat_count = static_cast<std::uint32_t>(in.u64());
    if (full) in.vec(m.context), in.vec(m.pairwise);
    else m.context.clear(), m.pairwise.clear();
    in.vec(m.difference), in.vec(m.separation), in.vec(m.head_stats), in.vec(m.pair_stats);
    if (m.n != b.n_reports() || m.separation.size() != m.n)
      throw Error("message from rank " + std::to_string(from) + " is corrupt (metric rows)");
  }
  res.dumps.resize(in.u64());
  for (AttentionDump& d : res.dumps) {
    d.heads = static_cast<std::uint32_t>(in.u64()), d.d_model = static_cast<std::uint32_t>(in.u64());
    in.vec(d.reports), in.vec(d.queries), in.vec(d.n_queries), in.vec(d.maps_offset), in.vec(d.maps);
    in.vec(d.output_offset), in.vec(d.output);
  }
  in.vec(res.layers);
  if (full) in.vec(res.token_ids);
  else res.token_ids.clear();
  in.vec(res.report_status);
  res.tokens_without_axis_value = in.u64();
  if (res.layers.size() != (res.layers.empty() ? 0 : slots) ||
      (!res.token_ids.empty() && res.token_ids.size() != b.n_tokens()) ||
      (!res.report_status.empty() && res.report_status.size() != b.n_reports()))
    throw Error("message from rank " + std::to_string(from) + " is corrupt (layers, token ids)");
  in.done();
  return true;
}

// ---- a chunk read by rank 0 (sequential sources): rank 0 -> worker ------------------------

std::string encode_batch(std::uint64_t index, const ReportBatch& b, const std::vector<std::string>& scenario_names) {
  Out o;
  o.u64(kData);
  o.u64(index);
  o.u64(b.first_report);
  o.u64(b.source_rows);
  o.vec(b.token_offset);
  o.u64(b.features.size());
  for (const auto& f : b.features) o.vec(f);
  o.strs(b.report_ids);
  o.strs(b.token_names);
  o.strs(scenario_names);
  o.u64(b.given_weights.size());
  for (const auto& g : b.given_weights) o.vec(g);
  o.vec(b.embeddings);
  return o.take();
}

// ---- the CSV as byte ranges (--mpi-csv ranges): a worker's message names its block ----------

std::string wrap_block(std::uint64_t block, std::string inner) {
  Out o;
  o.u64(kBlockData);
  o.u64(block);
  o.str(inner);
  return o.take();
}

}  // namespace headsep::dist::detail
