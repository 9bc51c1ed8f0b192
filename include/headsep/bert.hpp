// headsep — a BERT-family encoder (f32, or bf16/f16 weights: docs/MODEL.md "Weight dtype") whose
// every attention head is measured as it runs.
//
//   BertModel m = BertModel::load("all-minilm-l6-v2/");        // config.json + model.safetensors
//   BertScratch s;                                             // per thread
//   std::vector<BertLayerOut> layers(m.config().layers);       // per layer: metrics (+ maps)
//   m.forward(ids, token_offset, n_reports, axes, axis, level, layers, hidden, s);
//
// Per report (n tokens, never padded; positions 0..n-1, token type 0):
//   X = LayerNorm(word[id] + position[t] + type[0])
//   per layer: QKV = X Wqkvᵀ + b (one packed product);  per head h = 1..H the fused attention
//   kernel (scores → softmax → A·V → every metric of attention.hpp, A never leaving the tile);
//   C = concat_h(O_h);  X1 = LayerNorm(X + C Woᵀ + bo);  X = LayerNorm(X1 + GELU(X1 W1ᵀ + b1) W2ᵀ + b2)
// GELU is BERT's exact "gelu", 0.5 x (1 + erf(x / √2)) (erf by a rational approximation, |error| < 1e-6).
// The single-head baseline of every layer (head 0 of its metrics) is the layer's own projections
// as one head of full width: softmax(Q Kᵀ / √d_model) with Q, K, V the concatenation of every
// head's — what the layer would attend to with one head. It does not feed the next layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"

namespace headsep {

/// What config.json says (the fields headsep reads; everything else is ignored).
struct BertConfig {
  std::uint32_t vocab_size = 0, hidden = 0, layers = 0, heads = 0, intermediate = 0;
  std::uint32_t max_positions = 0, type_vocab_size = 0;
  double layer_norm_eps = 1e-12;
  /// "bert", "roberta", "xlm-roberta" (BERT's layers; positions from padding_idx + 1) or
  /// "distilbert" (its own names and keys, no token types).
  std::string model_type = "bert";
  /// RoBERTa: token t's position is padding_idx + 1 + (non-padding tokens before it), a padding
  /// token's padding_idx (transformers' create_position_ids_from_input_ids); max_positions is
  /// max_position_embeddings - padding_idx - 1. BERT: positions 0..n-1.
  bool roberta_positions = false;
  std::uint32_t padding_idx = 0;
  std::uint32_t head_dim() const noexcept { return heads ? hidden / heads : 0; }
  /// Parses and checks config.json text: model_type "bert" (or a Bert* architecture), hidden_act
  /// "gelu", absolute positions, positive sizes, hidden divisible by heads. Throws Error naming
  /// `file` and the field.
  static BertConfig parse(const std::string& json_text, const std::string& file);
};

/// Per layer, where its head metrics (and optionally its maps) go: AttentionOut's layout with
/// heads = H plus the baseline (head 0). Every layer is always measured (the metrics cost little
/// next to the products): head_stats, pair_stats and (with axes) context must be set.
/// AttentionOut::output is not used.
using BertLayerOut = AttentionOut;

/// Per-thread working memory, reused across calls (every architecture's).
using BertScratch = ModelScratch;

class BertModel final : public Architecture {
 public:
  /// Loads DIR/config.json and DIR/model.safetensors. Every tensor the encoder needs is checked
  /// (name, dtype readable as f32, shape from the config, finite values) before anything runs;
  /// a mismatch throws Error naming the file and tensor. Tensor names may carry a "bert." prefix.
  /// `dtype` (docs/MODEL.md, "Weight dtype"): auto holds a BF16 (F16) folder's products and
  /// embedding tables in bf16 (f16), bf16 rounds an f32 folder's, f32 widens every one.
  static BertModel load(const std::filesystem::path& dir, WeightDType dtype = WeightDType::automatic);

  const BertConfig& config() const noexcept { return cfg_; }
  const ModelShape& shape() const noexcept override { return shape_; }
  const std::string& name() const noexcept override { return name_; }

  /// Forward pass for reports [0, n_reports): ids of report r at ids[token_offset[r] ..
  /// token_offset[r+1]); axis[c][token] the context axes (indexed like ids). `layers` has
  /// config().layers entries (stride >= n_reports). Optional: `hidden` [token][hidden] gets the
  /// last layer's output; `all_hidden` (layers+1 blocks of [token][hidden], block 0 the
  /// embeddings) every layer's; their rows count from token_offset[0]. Throws Error when an id is out of
  /// the vocabulary or a report is longer than max_positions. Thread-safe (const) with distinct scratch.
  void forward(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t n_reports, std::uint32_t axes,
               const float* const* axis, SimdLevel level, const std::vector<BertLayerOut>& layers, float* hidden,
               BertScratch& scratch, float* all_hidden = nullptr,
               const DirectionAxes* directions = nullptr) const override;
  /// (A bf16/f16 table is widened here, once, when first asked: only the semantic axes read it.)
  const float* input_embeddings() const noexcept override;
  WeightMemory weight_memory() const override { return memory_; }

  /// Multiply-adds x 2 of one forward pass over reports of these lengths (the products and the
  /// attention of heads 1..H; the baseline and metrics not counted), for GFLOP/s.
  double flops(const std::uint64_t* token_offset, std::size_t n_reports) const noexcept override;

 private:
  struct Weights;  // bert.cpp: the packed products, norms and tables, each in the dtype it is held in
  void run_group(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t r0, std::size_t r1,
                 std::uint32_t axes, const float* const* axis, SimdLevel level, const std::vector<BertLayerOut>& layers,
                 float* hidden, float* all_hidden, std::size_t total_tokens, const DirectionAxes* directions,
                 BertScratch& s) const;

  BertConfig cfg_;
  ModelShape shape_;
  std::string name_;
  std::shared_ptr<Weights> held_;
  WeightMemory memory_;
  std::vector<std::uint32_t> cols_;  // the kernel's head table: q_col, k_col, v_col, dk, dv (5 rows of H+1)
};

/// "bert", "roberta", "xlm-roberta", "distilbert": the model_types BertModel loads.
bool is_encoder_model_type(const std::string& model_type);

// layer_norm_rows and gelu_inplace: headsep/architecture.hpp (shared by every architecture).

}  // namespace headsep
