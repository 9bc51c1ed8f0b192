// The decoder families as data (model/family.hpp): one row per model_type, feeding the one
// implementation in table_decoder.cpp. A row states only where a family differs from the Llama
// defaults of Family's members. docs/MODEL.md lists the same table.
#include "model/family.hpp"

namespace headsep::model {
namespace {

std::vector<Family> make_table() {
  std::vector<Family> t;
  {
    Family f{"gpt2", "learned positions, pre-LayerNorm, Conv1D c_attn [in][Q|K|V], GELU (tanh), biases"};
    f.hidden = "n_embd", f.layers = "n_layer", f.heads = "n_head", f.kv_heads = nullptr, f.head_dim = nullptr;
    f.intermediate = "n_inner", f.intermediate_per_hidden = 4, f.positions = "n_positions", f.eps = "layer_norm_epsilon", f.eps_default = 1e-5;
    f.act = "activation_function", f.act_default = "gelu_new";
    f.prefix = "transformer.", f.embed = "wte", f.learned_positions = "wpe", f.final_norm = "ln_f", f.layer = "h.";
    f.qkv_layout = QkvLayout::conv1d, f.q = "attn.c_attn", f.k = f.v = nullptr, f.o = "attn.c_proj";
    f.attn_in_norm = "ln_1", f.mlp_in_norm = "ln_2";
    f.gated = false, f.gate = nullptr, f.up = "mlp.c_fc", f.down = "mlp.c_proj";
    f.norm = NormKind::layer_norm;
    f.qkv_bias = f.o_bias = f.mlp_bias = BiasRule{nullptr, true};
    t.push_back(f);
  }
  {
    Family f{"gpt_neox", "Pythia: parallel residual, partial rotary, fused per-head query_key_value, LayerNorm, GELU, biases"};
    f.kv_heads = nullptr, f.head_dim = nullptr, f.eps = "layer_norm_eps", f.eps_default = 1e-5, f.act_default = "gelu";
    f.prefix = "gpt_neox.", f.embed = "embed_in", f.final_norm = "final_layer_norm";
    f.qkv_layout = QkvLayout::per_head, f.q = "attention.query_key_value", f.k = f.v = nullptr, f.o = "attention.dense";
    f.gated = false, f.gate = nullptr, f.up = "mlp.dense_h_to_4h", f.down = "mlp.dense_4h_to_h";
    f.norm = NormKind::layer_norm;
    f.qkv_bias = f.o_bias = BiasRule{"attention_bias", true};
    f.mlp_bias = BiasRule{nullptr, true};
    f.parallel_residual = "use_parallel_residual";
    f.rotary_fraction = 0.25;
    t.push_back(f);
  }
  Family llama{"llama", "RMSNorm, rotary (default/linear/llama3), grouped-query attention, SwiGLU"};
  llama.qkv_bias = llama.o_bias = BiasRule{"attention_bias", false};
  t.push_back(llama);
  {
    Family f = llama;
    f.model_type = "mistral", f.summary = "Llama's layers, a sliding window in every layer";
    f.window = WindowRule::every_layer;
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "mixtral", f.summary = "Mistral's attention, top-k routed SwiGLU experts in every MLP";
    f.gate = f.up = f.down = nullptr;
    f.moe_router = "block_sparse_moe.gate", f.moe_experts = "block_sparse_moe.experts.";
    f.window = WindowRule::every_layer;
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "qwen2", f.summary = "Llama's layers, Q/K/V biases, sliding window from max_window_layers when on";
    f.qkv_bias = BiasRule{nullptr, true}, f.o_bias = BiasRule{nullptr, false};
    f.window = WindowRule::qwen;
    t.push_back(f);
  }
  {
    Family f = t.back();  // qwen2's attention
    f.model_type = "qwen2_moe";
    f.summary = "Qwen2's attention, top-k routed SwiGLU experts and a sigmoid-gated shared expert";
    f.moe_router = "mlp.gate", f.moe_experts = "mlp.experts.";
    f.moe_gate = ".gate_proj", f.moe_up = ".up_proj", f.moe_down = ".down_proj";
    f.moe_count = "num_experts", f.moe_norm_topk = "norm_topk_prob", f.moe_qwen = true;
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "qwen3", f.summary = "Llama's layers, per-head q/k RMSNorm before RoPE";
    f.q_norm = "self_attn.q_norm", f.k_norm = "self_attn.k_norm";
    f.window = WindowRule::qwen;
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "olmo2", f.summary = "norms after the sublayers (none before), q/k RMSNorm over the full width";
    f.eps_default = 1e-5;
    f.q_norm = "self_attn.q_norm", f.k_norm = "self_attn.k_norm", f.qk_norm_full_width = true;
    f.attn_in_norm = nullptr, f.attn_out_norm = "post_attention_layernorm";
    f.mlp_in_norm = nullptr, f.mlp_out_norm = "post_feedforward_layernorm";
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "phi3", f.summary = "fused qkv_proj [Q|K|V] and gate_up_proj, partial rotary, sliding window";
    f.eps_default = 1e-5;
    f.qkv_layout = QkvLayout::rows, f.q = "self_attn.qkv_proj", f.k = f.v = nullptr;
    f.gate = f.up = nullptr, f.gate_up = "mlp.gate_up_proj";
    f.qkv_bias = f.o_bias = f.mlp_bias = BiasRule{nullptr, false};
    f.window = WindowRule::every_layer;
    t.push_back(f);
  }
  {
    Family f = llama;
    f.model_type = "gemma", f.summary = "RMSNorm (1 + w), embeddings × √hidden, GeGLU (tanh), head_dim from the config";
    f.act_default = "gelu_pytorch_tanh", f.gelu_means_tanh = true;
    f.norm = NormKind::rms_one_plus, f.embed_scale = true;
    t.push_back(f);
  }
  {
    Family f = t.back();
    f.model_type = "gemma2";
    f.summary = "Gemma's layers, norms before and after each sublayer, query_pre_attn_scalar, alternating windows";
    f.act = "hidden_activation", f.gelu_means_tanh = false;
    f.attn_out_norm = "post_attention_layernorm", f.mlp_in_norm = "pre_feedforward_layernorm";
    f.mlp_out_norm = "post_feedforward_layernorm";
    f.query_pre_attn_scalar = true, f.softcap = true, f.window = WindowRule::gemma2;
    t.push_back(f);
  }
  {
    Family f = t.back();
    f.model_type = "gemma3_text", f.summary = "Gemma-2's layers, per-head q/k norms, local/global RoPE bases";
    f.q_norm = "self_attn.q_norm", f.k_norm = "self_attn.k_norm";
    f.local_rope = true, f.window = WindowRule::gemma3;
    t.push_back(f);
  }
  return t;
}

}  // namespace

const std::vector<Family>& families() {
  static const std::vector<Family> table = make_table();
  return table;
}

const Family* find_family(const std::string& model_type) noexcept {
  for (const Family& f : families())
    if (model_type == f.model_type) return &f;
  return nullptr;
}

}  // namespace headsep::model
