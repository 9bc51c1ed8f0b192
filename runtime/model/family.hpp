// Private: a decoder family as data (TransformerLens' "architecture adapter", as a table row).
// One row names a model_type's config keys, its tensors and its switches (norm kind and
// placement, positions, activation, fused layouts, q/k norms, windows); families.cpp holds the
// table, family_config.cpp reads a config.json through a row into a DecoderSpec, and
// table_decoder.cpp is the one implementation every row feeds. A family that only renames or
// toggles is one row (docs/MODEL.md lists them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace headsep::model {

enum class NormKind : std::uint8_t {
  layer_norm,   ///< (x - mean) / sqrt(var + eps) · g + b (GPT-2, GPT-NeoX)
  rms,          ///< x / sqrt(mean(x²) + eps) · g (Llama and most)
  rms_one_plus  ///< Gemma's: x / sqrt(mean(x²) + eps) · (1 + w)
};

/// The MLP's activation (gated families apply it to the gate: act(gate) · up).
enum class Activation : std::uint8_t {
  gelu_erf,   ///< "gelu": 0.5 x (1 + erf(x / √2))
  gelu_tanh,  ///< "gelu_new", "gelu_pytorch_tanh"
  silu        ///< "silu" / "swish"
};

/// How the query, key and value projections are stored.
enum class QkvLayout : std::uint8_t {
  separate,  ///< q, k, v: nn.Linear [out][in] each
  rows,      ///< one [Q | K | V][in] (Phi-3's qkv_proj)
  per_head,  ///< one [H][q | k | v][in], interleaved per head (GPT-NeoX's query_key_value)
  conv1d     ///< one Conv1D [in][Q | K | V] (GPT-2's c_attn; every GPT-2 linear is [in][out])
};

/// Per-layer sliding windows when the config has no layer_types (which always decide).
enum class WindowRule : std::uint8_t {
  none,          ///< never (a sliding_window key is ignored, as transformers does)
  every_layer,   ///< Mistral, Phi-3
  qwen,          ///< use_sliding_window, then the layers from max_window_layers
  gemma2,        ///< even layers (0, 2, ...) slide
  gemma3         ///< every layer but each sliding_window_pattern-th (default 6)
};

/// A bias that is always there, never, or when a config key (with its default) says so.
struct BiasRule {
  const char* key = nullptr;  ///< nullptr: `fixed` decides
  bool fixed = false;
};

struct Family {
  const char* model_type;
  const char* summary;  ///< one line for `headsep info --model` and errors
  // ---- config.json keys (nullptr: not read) ----
  const char* hidden = "hidden_size";
  const char* layers = "num_hidden_layers";
  const char* heads = "num_attention_heads";
  const char* kv_heads = "num_key_value_heads";  ///< nullptr: = heads
  const char* head_dim = "head_dim";             ///< nullptr: hidden / heads
  const char* intermediate = "intermediate_size";
  const char* positions = "max_position_embeddings";
  const char* eps = "rms_norm_eps";
  double eps_default = 1e-6;
  const char* act = "hidden_act";
  const char* act_default = "silu";
  bool gelu_means_tanh = false;  ///< "gelu" is the tanh form (Gemma's legacy configs, as transformers reads them)
  std::uint32_t intermediate_per_hidden = 0;  ///< intermediate absent or null: this × hidden (GPT-2: 4); 0 = required
  // ---- tensors: `prefix` is optional in a folder (a base model's save lacks it) ----
  const char* prefix = "model.";
  const char* embed = "embed_tokens";
  const char* learned_positions = nullptr;  ///< GPT-2's wpe; nullptr: rotary
  const char* final_norm = "norm";
  const char* layer = "layers.";  ///< + the layer number + "."
  QkvLayout qkv_layout = QkvLayout::separate;
  const char* q = "self_attn.q_proj";  ///< or the fused projection's name
  const char* k = "self_attn.k_proj";
  const char* v = "self_attn.v_proj";
  const char* o = "self_attn.o_proj";
  const char* q_norm = nullptr;  ///< q/k norms after the projections, before RoPE
  const char* k_norm = nullptr;
  bool qk_norm_full_width = false;  ///< over the whole Q (K) width (OLMo-2), else per head (Qwen3, Gemma-3)
  // Norm placement: a null name is no norm there.
  const char* attn_in_norm = "input_layernorm";   ///< on x before attention
  const char* attn_out_norm = nullptr;            ///< on attention's output before the residual add
  const char* mlp_in_norm = "post_attention_layernorm";
  const char* mlp_out_norm = nullptr;
  bool gated = true;  ///< gate/up/down (act(gate) · up); else up = fc, down = proj
  const char* gate = "mlp.gate_proj";
  const char* up = "mlp.up_proj";
  const char* gate_up = nullptr;  ///< fused [gate | up] (Phi-3)
  const char* down = "mlp.down_proj";
  /// Routed experts (Mixtral, Qwen2-MoE): the router `moe_router` [experts][hidden] and per expert
  /// e the gated MLP moe_experts + e + moe_gate / moe_up / moe_down; nullptr: a dense MLP.
  const char* moe_router = nullptr;
  const char* moe_experts = nullptr;
  const char* moe_gate = ".w1";
  const char* moe_up = ".w3";
  const char* moe_down = ".w2";
  const char* moe_count = "num_local_experts";  ///< config key of the number of experts
  /// Config key (default false) that renormalises the top k's weights to sum 1; nullptr: always.
  const char* moe_norm_topk = nullptr;
  /// Qwen2-MoE: the experts' own width (moe_intermediate_size), a shared expert beside them
  /// (gated MLP `moe_shared`, width shared_expert_intermediate_size, scaled by sigmoid of the
  /// [1][hidden] `moe_shared_gate`), and dense layers where decoder_sparse_step / mlp_only_layers
  /// say (intermediate_size, the family's gate/up/down).
  bool moe_qwen = false;
  const char* moe_shared = "mlp.shared_expert.";
  const char* moe_shared_gate = "mlp.shared_expert_gate";
  NormKind norm = NormKind::rms;
  BiasRule qkv_bias{}, o_bias{}, mlp_bias{"mlp_bias", false};
  // ---- switches ----
  const char* parallel_residual = nullptr;  ///< config key (default true): x + attn(n1(x)) + mlp(n2(x))
  double rotary_fraction = 1.0;             ///< partial rotary default (GPT-NeoX 0.25)
  bool embed_scale = false;                 ///< embeddings × √hidden (Gemma)
  bool query_pre_attn_scalar = false;       ///< scores / √query_pre_attn_scalar (Gemma-2/3)
  bool local_rope = false;                  ///< sliding layers use their own RoPE base (Gemma-3)
  bool softcap = false;                     ///< reads attn_logit_softcapping (Gemma-2/3); elsewhere refused
  WindowRule window = WindowRule::none;
};

/// The table's row for `model_type`, nullptr when none.
const Family* find_family(const std::string& model_type) noexcept;
/// Every row, in the table's order (docs, `headsep info`, the refusal naming the supported types).
const std::vector<Family>& families();

/// RoPE's inverse frequencies for one kind of layer.
struct RopeTable {
  std::vector<float> inv_freq;  ///< per rotary pair i < rotary_dims/2
  /// LongRoPE (Phi-3): a report longer than `long_after` tokens rotates by `long_inv_freq` (the
  /// short factors otherwise), as transformers picks per sequence; cos and sin × `cos_sin_scale`.
  std::vector<float> long_inv_freq;
  std::uint32_t long_after = 0;
  float cos_sin_scale = 1.0f;
};

/// A config.json read through a family row: everything the forward needs besides weights.
struct DecoderSpec {
  ModelShape shape;
  const Family* family = nullptr;
  std::uint32_t intermediate = 0;
  double eps = 1e-6;
  Activation act = Activation::silu;
  bool parallel = false, qkv_bias = false, o_bias = false, mlp_bias = false;
  std::uint32_t experts = 0, experts_per_token = 0;  ///< routed experts (0: a dense MLP)
  bool norm_topk = true;                  ///< the top k's weights renormalised to sum 1
  std::uint32_t expert_intermediate = 0;  ///< each routed expert's width (= intermediate but Qwen2-MoE)
  std::uint32_t shared_intermediate = 0;  ///< Qwen2-MoE's shared expert's width (0: none, Mixtral)
  std::vector<std::uint8_t> moe_layer;    ///< per layer: routed experts (1) or a dense MLP (0)
  std::uint32_t rotary_dims = 0;     ///< 0 with learned positions
  std::vector<RopeTable> rope;       ///< [0] full attention, [1] sliding layers (Gemma-3)
  std::vector<std::uint8_t> rope_of; ///< per layer: its table
  std::vector<std::uint8_t> sliding; ///< per layer: a sliding-attention layer (its type, cut or not)
  float query_scale = 1.0f;          ///< Q × this: scores / √query_pre_attn_scalar from the kernel's 1/√head_dim
  float embed_scale = 1.0f;
  std::vector<std::string> notes;    ///< what was recognised, for `headsep info --model`
};

/// config.json (`j`, named `file`) through `f`; every unsupported value refused by key.
DecoderSpec read_decoder_spec(const Family& f, const json& j, const std::string& file);

/// The table-driven decoder (table_decoder.cpp).
std::unique_ptr<Architecture> load_table_decoder(const std::filesystem::path& dir, DecoderSpec spec, WeightDType dtype);

}  // namespace headsep::model
