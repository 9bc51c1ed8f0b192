// headsep — a transformer whose every attention head is measured as it runs, whatever its
// architecture: BERT-family encoders (bert.hpp: bert, roberta, xlm-roberta, distilbert) and the
// decoder families of runtime/model/families.cpp (gpt2, gpt_neox, llama, mistral, mixtral, qwen2,
// qwen3, olmo2, phi3, gemma, gemma2, gemma3_text), chosen from config.json's model_type by
// load_model (docs/MODEL.md).
//
//   std::unique_ptr<Architecture> m = load_model("tiny-llama/");   // config.json + safetensors
//   ModelScratch s;                                                 // per thread
//   std::vector<AttentionOut> layers(m->shape().layers);           // per layer: metrics (+ maps)
//   m->forward(ids, token_offset, n_reports, axes, axis, level, layers, hidden, s);
//
// Head 0 of every layer's metrics is the single-head baseline, heads 1..H the query heads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"
#include "headsep/profile.hpp"  // ForwardClock

namespace headsep {

/// What the driver needs to know of a model, whatever its architecture.
struct ModelShape {
  std::string model_type;  ///< config.json's ("bert", "gpt2", "llama", "gemma2", ...)
  std::uint32_t vocab_size = 0, hidden = 0, layers = 0;
  std::uint32_t heads = 0;     ///< query heads per layer (H)
  std::uint32_t kv_heads = 0;  ///< key/value heads (= H unless grouped-query or multi-query attention)
  std::uint32_t head_dim = 0;
  /// Longest report the model runs (max_position_embeddings).
  std::uint32_t max_positions = 0;
  bool causal = false;  ///< decoders: query q sees keys 0..q
  /// Per layer its sliding window (AttentionConfig::window: query q sees keys (q - w, q]), 0 for
  /// full causal attention; empty when no layer has one (Mistral: every layer; Qwen2 with
  /// use_sliding_window: the layers from max_window_layers; a config's layer_types says per layer).
  std::vector<std::uint32_t> sliding_window;
  /// Attention-logit soft-capping (AttentionConfig::softcap: Gemma-2's attn_logit_softcapping), 0 = none.
  float attn_softcap = 0.0f;
  /// The key/value head (0-based) that query head h (1..H) reads.
  std::uint32_t kv_head(std::uint32_t h) const noexcept { return (h - 1) / (heads / kv_heads); }
};

/// Per-thread working memory of a forward pass, reused across calls.
struct ModelScratch {
  std::vector<float> x, qkv, ctx, h1, h2, inter, heads_out, rope;
  std::vector<float> direction;  ///< a group's direction-axis values at the current layer
  AttentionScratch attention;
  ForwardClock clock;  ///< on while a profiled run measures (ModelBatch)
};

/// Direction axes (docs/METRICS.md): the last `count` of a forward's context axes are not given per
/// token but computed at each layer l from the residual stream entering it, value(t) = h_l(t) · u_l
/// (h_l = transformers' hidden_states[l]), the product summed in double (a fixed order) and rounded to f32.
/// `u` holds [layers][count][hidden]. Every family computes them in the shared attend step
/// (model::attend_reports), so a token's value never depends on its group.
struct DirectionAxes {
  std::uint32_t count = 0;
  const float* u = nullptr;
};

/// How load_model holds a model's nn.Linear weights (docs/MODEL.md, "Weight dtype"). Embeddings,
/// norms and biases are f32 whatever it says.
enum class WeightDType : std::uint8_t {
  automatic,  ///< "auto": as the folder stores them: bf16 and f16 stay so; f32 and f64 become f32
  f32,        ///< "f32": every one widened to f32 (exact for bf16 and f16)
  bf16,       ///< "bf16": every one held as bf16 (an f32 weight rounded to nearest even)
};
std::string_view to_string(WeightDType t) noexcept;  ///< "auto", "f32", "bf16"
/// "auto", "f32" or "bf16"; anything else is a UsageError naming them.
WeightDType parse_weight_dtype(std::string_view name);

/// What a loaded model's weights take in memory (`run --profile` prints it).
struct WeightMemory {
  std::uint64_t held = 0;  ///< bytes of weights in memory: packed products, embeddings, norms
  std::uint64_t file = 0;  ///< bytes of the safetensors tensors they came from
  std::string linear;      ///< the products' dtypes: "f32", "bf16", "f16", or several joined by '+'
  std::uint64_t rss_loaded = 0, peak_loaded = 0;  ///< the process's resident set and its peak when loaded (0: unknown)
};

namespace model {
class GroupPool;  // runtime/model/weights.hpp
}

class Architecture {
 public:
  Architecture();
  virtual ~Architecture();
  virtual const ModelShape& shape() const noexcept = 0;
  virtual const std::string& name() const noexcept = 0;  ///< the folder's name

  /// Forward pass for reports [0, n_reports): ids of report r at ids[token_offset[r] ..
  /// token_offset[r+1]); axis[c][token] the context axes (indexed like ids). `layers` has
  /// shape().layers entries (AttentionOut's layout with heads = H plus the baseline; head_stats,
  /// pair_stats when H > 1, context with axes; stride >= n_reports; `output` unused). Optional:
  /// `hidden` [token][hidden] gets the last hidden state, `all_hidden` (layers+1 blocks, block 0
  /// the embeddings) every one, as transformers' output_hidden_states (decoders: the last after
  /// the final norm). `directions`: the last directions->count of the `axes` are direction axes
  /// (their `axis` entries unused). Throws Error for an id outside the vocabulary or a report over
  /// max_positions. Thread-safe (const) with distinct scratch; results never depend on which
  /// reports share a call. A call of several groups (~512 tokens each) runs them in parallel on
  /// oneTBB's threads, each on a scratch of the model's own (one per thread that ran one).
  virtual void forward(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t n_reports,
                       std::uint32_t axes, const float* const* axis, SimdLevel level,
                       const std::vector<AttentionOut>& layers, float* hidden, ModelScratch& scratch,
                       float* all_hidden = nullptr, const DirectionAxes* directions = nullptr) const = 0;

  /// The token embedding table [vocab_size][hidden] (before positions or norms): the semantic
  /// axes' vectors (docs/METRICS.md).
  virtual const float* input_embeddings() const noexcept = 0;

  /// Multiply-adds x 2 of one forward pass over reports of these lengths (products and the
  /// attention of heads 1..H; baseline and metrics not counted), for GFLOP/s.
  virtual double flops(const std::uint64_t* token_offset, std::size_t n_reports) const noexcept = 0;

  /// What the loader recognised in the folder, one line each (`headsep info --model DIR`): the
  /// family's description, norms, positions, windows ... Empty: shape() says all.
  virtual std::vector<std::string> recognised() const { return {}; }

  /// The weights' memory; {} (file = 0) where the architecture does not count it.
  virtual WeightMemory weight_memory() const { return {}; }

 protected:
  std::shared_ptr<model::GroupPool> group_pool_;  ///< scratch of the groups run in parallel (model::run_groups)
};

/// Reads DIR/config.json's model_type and loads the model: an encoder (BertModel) or a decoder
/// family's row (docs/MODEL.md's table); anything else is refused naming the file and the
/// supported types. Weights
/// from model.safetensors or the shards model.safetensors.index.json lists, f32/f16/bf16/f64
/// converted to f32 (docs/MODEL.md), a decoder's nn.Linear weights held as `dtype` says. Every
/// tensor is checked before anything runs.
std::unique_ptr<Architecture> load_model(const std::filesystem::path& dir, WeightDType dtype = WeightDType::automatic);

// ---- layers the architectures share (runtime/model/layers.cpp) ------------------------------

/// LayerNorm in place, row by row (rows x d): x += residual first when not null, then
/// (x - mean) / sqrt(var + eps) · g + b, mean and variance summed in double. At `level`: the scalar
/// reference sums in one chain, the vector levels in 8 interleaved partial sums (within rounding).
void layer_norm_rows(SimdLevel level, float* x, const float* residual, std::size_t rows, std::size_t d, const float* g,
                     const float* b, double eps);

/// RMSNorm (Llama) from `x` into `y`, row by row: y = x / sqrt(mean(x²) + eps) · g, the mean in double.
void rms_norm_rows(const float* x, float* y, std::size_t rows, std::size_t d, const float* g, double eps) noexcept;

/// BERT's GELU, 0.5 x (1 + erf(x / √2)), in place (vectorised; |error| < 1e-6 vs the exact one).
void gelu_inplace(float* x, std::size_t n) noexcept;

/// GPT-2's GELU ("gelu_new"), 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), in place (vectorised, as
/// x / (1 + e^(-2u)) with a polynomial e^x: within 3e-7 relative of the exact one).
void gelu_tanh_inplace(float* x, std::size_t n) noexcept;

/// GeGLU: as swiglu_rows with GELU for SiLU: the tanh form (`tanh`) or the erf form.
void geglu_rows(bool tanh, const float* gu, float* out, std::size_t rows, std::size_t n) noexcept;

/// SwiGLU: row r of `gu` holds [gate (n) | up (n)]; out[r][i] = silu(gate) · up, silu(x) = x / (1 + e^-x)
/// (vectorised, the polynomial e^x of gelu_tanh_inplace).
void swiglu_rows(const float* gu, float* out, std::size_t rows, std::size_t n) noexcept;

}  // namespace headsep
