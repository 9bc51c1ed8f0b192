// headsep — a real model's heads over a report stream: every (layer, head) of a model (BERT
// encoder, GPT-2 or Llama-family decoder: architecture.hpp) measured on every report, aggregated
// per scenario.
//
//   std::unique_ptr<Architecture> m = load_model(dir);
//   ModelSummary s = run_model(*source, *m, axes, {.threads = 2});   // source: text / ops-text
//   std::cout << s.table();  write(s.json());
//
// The source must give each token's vocabulary id as the feature `token_id` (the text and
// ops-text generators do) and the context axes' feature columns (their lexicon's). Per report and
// layer: the metrics of attention.hpp for the layer's baseline (head 0: the layer's projections as
// one full-width head) and heads 1..H, and for every pair of heads of the layer; contexts on
// each axis. Per scenario, means over reports of:
//  - per layer x head: entropy, confidence, self/prev/first weight; context per axis; difference
//    from the layer's baseline per axis; separation = mean context distance to the other heads
//    of its layer; js = mean Jensen-Shannon divergence to the other heads of its layer;
//  - per layer: separation (mean pairwise context distance, the seed's head_separation) and
//    every pair's statistics;
//  - which heads separate which relations most: for each pair of axes (a, b), the heads with the
//    largest mean (difference[a] - difference[b]) — leaning to a over b relative to the baseline.
// Distributions over reports (QuantileSketch, merged exactly): per layer x head the report's
// entropy (mean over its queries) and separation (mean context distance to the other heads of
// its layer). The top reports by the report's separation (the mean over layers and head pairs
// of the pairs' context distance; ties to the smaller report index), and with keep_maps their
// attention maps (every layer and head, the first map_tokens queries x keys).
// Batches run in parallel (oneTBB), sums are merged in batch order: results do not depend on the
// thread count.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/architecture.hpp"
#include "headsep/context_axes.hpp"
#include "headsep/kernels.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"
#include "headsep/stats.hpp"

namespace headsep {

class Profiler;  // headsep/profile.hpp

struct ModelRunOptions {
  unsigned threads = 0;             ///< 0 = all cores
  std::size_t chunk_reports = 128;  ///< reports per batch
  SimdLevel simd = SimdLevel::scalar;
  std::size_t top = 3;              ///< heads listed per relation pair
  std::size_t top_reports = 10;     ///< reports ranked per scenario (ModelSummary::Scenario::top; CLI --top)
  /// Keep the attention maps of the top reports (each recomputed alone, with maps): the report's.
  bool keep_maps = false;
  std::size_t map_tokens = 32;      ///< queries and keys kept per map (a longer report's first ones)
  /// Where the run's time goes (headsep/profile.hpp), filled when run_model returns; null = off.
  Profiler* profiler = nullptr;
  /// Per-report results, as the engine's run() hands them to its sinks (run.hpp): per batch one
  /// BatchResult whose slots are the layers (BatchResult::layers, every layer, in order; one
  /// MetricBlock each with the baseline as head 0, heads 1..H, attention statistics), the batch's
  /// token ids (BatchResult::token_ids). prepare() on worker threads, consume() in batch order, so
  /// what a sink sees does not depend on the thread or rank count. model_run_info() is their
  /// RunInfo (make_writer: --per-report rows). Empty = none.
  std::vector<ResultSink*> sinks;
  /// Reports whose attention maps go to the sinks (BatchResult::dumps, one AttentionDump per slot,
  /// every query, no output projection; each kept report recomputed alone with maps). Called on
  /// worker threads; null = none. `dump_layers`: the layers whose maps are kept (empty = all).
  std::function<bool(const ReportBatch& batch, std::size_t report)> dump_reports;
  std::vector<std::uint32_t> dump_layers;
  /// Scale-out (runtime/dist/, MPI), as RunOptions::exchange: chunks another process computed
  /// arrive as finished results (their metrics and dumps), whose sums are taken here. Null: alone.
  ChunkExchange* exchange = nullptr;
  /// The source's truncation length and where it came from (headsep/model_tokenizer.hpp), for
  /// the summary; 0 = not known (a source that is not a text generator).
  std::uint32_t max_tokens = 0;
  std::string max_tokens_from;
  /// What an empty text becomes: the tokenizer's own special tokens for "" (e.g. "[CLS] [SEP]",
  /// "<s>"), for the run's note on empty reports; empty when unknown or when it adds none.
  std::string empty_text_tokens;
  bool progress = false;  ///< progress bar on stderr, as RunOptions::progress (callers check it is a terminal)
  /// Semantic and direction axes (headsep/context_axes.hpp), after the AxisMap's axes in every
  /// output (rows, summary, maps): their values come from the model, not from feature columns.
  ModelAxes model_axes;
  /// As RunOptions::stop: set to true from any thread, the input stage takes no further batch and
  /// run_model throws Interrupted (the Python module on Ctrl-C). Null: never stopped.
  const std::atomic<bool>* stop = nullptr;
};

/// The attention maps of one report, every layer and head: maps[((l*(H+1) + h)*keys + q)*keys + k]
/// for queries and keys 0..keys-1 (the report's first `keys` tokens), h = 0 the layer's baseline.
struct ModelMap {
  std::string id;
  std::uint64_t index = 0;
  double separation = 0;            ///< the ranking value (ModelSummary::Scenario::top)
  std::uint32_t n = 0, keys = 0;    ///< the report's length, tokens kept
  std::vector<std::string> tokens;  ///< the first `keys` tokens
  std::vector<float> maps;
};

struct ModelSummary {
  struct Scenario {
    std::string name;
    std::uint64_t reports = 0, tokens = 0;
    /// Reports whose text had no token ([CLS] [SEP] only: measured like any report, docs/MODEL.md)
    /// and reports cut at the truncation length, from the source's text_status feature.
    std::uint64_t empty_reports = 0, truncated_reports = 0;
    /// Tokens whose value is 0 on every axis (direction axes count as a value: h · u is 0 only by
    /// accident), the "no silent zeros" check (docs/METRICS.md).
    std::uint64_t tokens_without_axis_value = 0;
    // Sums over reports (means = sum / reports).
    std::vector<double> head;   ///< [(l*(H+1) + h)*kHeadStats + s]
    std::vector<double> ctx;    ///< [(l*(H+1) + h)*C + c]
    std::vector<double> pair;   ///< [(l*P + p)*kPairStats + s]
    std::vector<double> dist;   ///< [l*P + p] context distance of the pair
    // Distributions over reports.
    std::vector<QuantileSketch> entropy;     ///< [l*(H+1) + h]: the report's entropy of head h
    std::vector<QuantileSketch> separation;  ///< [l*H + h-1]: mean distance to the layer's other heads
    TopK top{0};                             ///< reports by separation (mean over layers and pairs)
    std::map<std::uint64_t, std::string> top_ids;
    std::map<std::uint64_t, ModelMap> maps;  ///< keep_maps: the maps of the reports in `top`
  };
  std::string model;
  std::uint32_t layers = 0, heads = 0;
  /// A decoder (ModelShape: model_type other than "bert"): causal heads, key/value heads and which
  /// one each query head reads (kv_head_of[h-1]), written to the summary; empty for BERT.
  std::string decoder_type;
  std::uint32_t kv_heads = 0;
  std::vector<std::uint32_t> kv_head_of;
  std::vector<std::uint32_t> sliding_window;  ///< ModelShape's, per layer (empty: none)
  std::vector<std::string> axes;
  std::vector<Scenario> scenarios;
  std::size_t top = 3;
  double seconds = 0, gflop = 0;
  unsigned threads = 0;
  std::string simd;
  std::uint32_t max_tokens = 0;  ///< ModelRunOptions::max_tokens
  std::string max_tokens_from;
  std::string empty_text_tokens;  ///< ModelRunOptions::empty_text_tokens

  std::string json() const;
  std::string table() const;
};

/// Throws Error naming the report on bad input (no token_id column, an id that is not an
/// integer of the vocabulary, a report over the model's positions).
ModelSummary run_model(ReportSource& source, const Architecture& model, const AxisMap& axes, const ModelRunOptions& options);

/// What a sink of ModelRunOptions::sinks needs up front (make_writer's RunInfo): the axes (the
/// AxisMap's, then `model_axes`'), the model's heads per layer, attention statistics, its layers.
RunInfo model_run_info(const Architecture& model, const AxisMap& axes, const ModelAxes& model_axes = {});

}  // namespace headsep
