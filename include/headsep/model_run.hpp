// headsep — a real model's heads over a report stream: every (layer, head) of a BERT encoder
// measured on every report, aggregated per scenario.
//
//   BertModel m = BertModel::load(dir);
//   ModelSummary s = run_model(*source, m, axes, {.threads = 2});   // source: text / ops-text
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
// Batches run in parallel (oneTBB), sums are merged in batch order: results do not depend on the
// thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/bert.hpp"
#include "headsep/kernels.hpp"
#include "headsep/source.hpp"

namespace headsep {

struct ModelRunOptions {
  unsigned threads = 0;             ///< 0 = all cores
  std::size_t chunk_reports = 128;  ///< reports per batch
  SimdLevel simd = SimdLevel::scalar;
  std::size_t top = 3;              ///< heads listed per relation pair
};

struct ModelSummary {
  struct Scenario {
    std::string name;
    std::uint64_t reports = 0, tokens = 0;
    // Sums over reports (means = sum / reports).
    std::vector<double> head;   ///< [(l*(H+1) + h)*kHeadStats + s]
    std::vector<double> ctx;    ///< [(l*(H+1) + h)*C + c]
    std::vector<double> pair;   ///< [(l*P + p)*kPairStats + s]
    std::vector<double> dist;   ///< [l*P + p] context distance of the pair
  };
  std::string model;
  std::uint32_t layers = 0, heads = 0;
  std::vector<std::string> axes;
  std::vector<Scenario> scenarios;
  std::size_t top = 3;
  double seconds = 0, gflop = 0;
  unsigned threads = 0;
  std::string simd;

  std::string json() const;
  std::string table() const;
};

/// Throws Error naming the report on bad input (no token_id column, an id that is not an
/// integer of the vocabulary, a report over the model's positions).
ModelSummary run_model(ReportSource& source, const BertModel& model, const AxisMap& axes, const ModelRunOptions& options);

}  // namespace headsep
