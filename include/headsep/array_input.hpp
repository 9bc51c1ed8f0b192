// headsep — attention over arrays a caller holds in memory (Python's headsep.attention): what the
// `tensor` scenario generator and the `qkv` scheme do for files, without a file.
//
//   ArrayEmbeddings x{data, tokens, d_model};                    // [B, n, d]: x.uniform = n
//   auto source = open_array_source(x);                          // reads `data` in place
//   ArrayAttention a; a.heads = 4; a.weights.tensors = {{"in_proj_weight", {w, {12, 4}}}, ...};
//   auto weighting = make_array_attention(a, source->schema());  // the plan qkv would build
//   run(*source, *weighting, AxisMap::bind(specs, source->schema().feature_names), options, sinks);
//
// Every check of the file path is made here too, before any worker thread starts: shapes,
// offsets, report ids, tensor names (a misspelt one is an error), finite weights; finite
// embeddings and features are checked per batch on the engine's threads, naming the report.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headsep/source.hpp"

namespace headsep {

/// Token embeddings X owned by the caller, row-major [tokens][d_model] float32. Batches point into
/// `data` (ReportBatch::embeddings_view): nothing is copied, so `data` (and `features`) must stay
/// alive and unchanged until the run that reads them returns.
struct ArrayEmbeddings {
  const float* data = nullptr;
  std::uint64_t tokens = 0;
  std::uint32_t d_model = 0;
  /// Reports: `uniform` tokens each (x was [B, n, d_model]), or, when uniform is 0, report r =
  /// rows [offsets[r], offsets[r+1]) (x [T, d_model] with offsets [B+1]: offsets[0] = 0,
  /// increasing — no empty report — and offsets[B] = tokens).
  std::uint64_t uniform = 0;
  std::vector<std::uint64_t> offsets;
  /// Optional report ids, one per report (else "#<index>", as the `tensor` plugin names them).
  std::vector<std::string> report_ids;
  /// Optional feature columns for the context axes, row-major [tokens][n_features] float64, named
  /// by feature_names (else f0, f1, ...).
  const double* features = nullptr;
  std::uint32_t n_features = 0;
  std::vector<std::string> feature_names;
  /// Columns to read, as the `tensor` plugin's `features` parameter (what the axes use): feature
  /// names, or x[i] = embedding component i. Empty: every feature column.
  std::vector<std::string> columns;
  /// Names the data in messages (e.g. "x").
  std::string label = "x";
};

/// A random-access ReportSource over `x` (checked here: shapes, offsets, ids, columns). Each batch's
/// embeddings are a view of x.data; its feature columns are converted to f64 per batch, and every
/// value it hands over is checked finite (the error names the row, report, token and component).
std::unique_ptr<ReportSource> open_array_source(ArrayEmbeddings x);

/// A float32 array the caller owns, row-major (a NumPy array or a torch tensor's storage).
struct ArrayRef {
  const float* data = nullptr;
  std::vector<std::uint64_t> shape;
};

/// Projection weights: named arrays in torch.nn.MultiheadAttention's state_dict layout
/// (in_proj_weight [3d, d] or q_proj_weight/k_proj_weight/v_proj_weight [d, d], optional
/// in_proj_bias [3d], out_proj.weight [d, d], optional out_proj.bias [d]; docs/SAFETENSORS.md,
/// layout 1), or a safetensors file (either layout of docs/SAFETENSORS.md), as qkv's -p weights.
struct ArrayWeights {
  std::map<std::string, ArrayRef> tensors;
  std::string path;  ///< a safetensors file instead of tensors
  bool empty() const noexcept { return tensors.empty() && path.empty(); }
};

/// What qkv's parameters say, for arrays.
struct ArrayAttention {
  std::uint32_t heads = 0;
  std::string query = "all";  ///< all, first, last or a token index (negative from the end), as qkv's `query`
  bool causal = false;
  ArrayWeights weights;       ///< required
  /// The single-head baseline: a 1-head MultiheadAttention of the same d_model. Empty: qkv's rule
  /// (the weights file's `single.*` tensors, else seeded from `seed`, docs/ATTENTION.md).
  ArrayWeights baseline;
  std::uint64_t seed = 1;     ///< qkv's `seed` (the default baseline's initialisation)
  std::string scenario = "qkv";  ///< the scenario the results are reported under
  std::string label = "headsep.attention";  ///< names the scheme in messages
};

/// The qkv scheme over arrays: the same AttentionPlan, with the same checks, as `qkv` given the
/// same weights in a safetensors file. Throws Error naming the tensor at fault.
std::unique_ptr<Weighting> make_array_attention(const ArrayAttention& attention, const Schema& schema);

}  // namespace headsep
