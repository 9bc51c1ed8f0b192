// A decoder's config.json read through its family row (model/family.hpp) into a DecoderSpec:
// shape, activation, biases, rotary tables (default / linear / llama3, partial, Gemma-3's local
// base), sliding windows per layer, Gemma's scales. Whatever the implementation does not compute
// exactly is refused by its config key, never run approximately.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "headsep/error.hpp"
#include "model/family.hpp"

namespace headsep::model {
namespace {


bool present(const json& j, const char* key) { return key && j.contains(key) && !j[key].is_null(); }

/// Keys whose non-default values change what the model computes in ways not implemented here.
void refuse_unsupported(const Family& f, const json& j, const std::string& file) {
  for (const char* k : {"scale_attn_by_inverse_layer_idx", "add_cross_attention", "use_bidirectional_attention"})
    if (json_bool(j, k, file, false)) throw Error(file + ": unsupported: '" + std::string(k) + "' is true");
  if (!json_bool(j, "scale_attn_weights", file, true)) throw Error(file + ": unsupported: 'scale_attn_weights' is false (scores unscaled)");
  if (!f.softcap && present(j, "attn_logit_softcapping"))
    throw Error(file + ": unsupported: 'attn_logit_softcapping' " + json_brief(j["attn_logit_softcapping"]) + " for model_type '" +
                f.model_type + "'");
}

Activation read_act(const Family& f, const json& j, const std::string& file) {
  const std::string a = json_str(j, f.act, file, f.act_default);
  if (a == "gelu") return f.gelu_means_tanh ? Activation::gelu_tanh : Activation::gelu_erf;
  if (a == "gelu_new" || a == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (a == "silu" || a == "swish") return Activation::silu;
  throw Error(file + ": unsupported " + f.act + " '" + a +
              "' (supported: \"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\", \"silu\")");
}

/// LongRoPE (transformers' _compute_longrope_parameters): inv_freq / short_factor, or / long_factor
/// for reports over original_max_position_embeddings; cos and sin × attention_factor (default
/// √(1 + ln factor / ln original), factor = max_position_embeddings / original when absent).
RopeTable longrope(const json& p, const std::vector<double>& inv, const json& top, std::uint32_t max_positions,
                   const std::string& file, std::string& note) {
  const std::uint32_t orig = present(p, "original_max_position_embeddings") ? json_uint(p, "original_max_position_embeddings", file)
                                                                            : json_uint(top, "original_max_position_embeddings", file);
  auto factors = [&](const char* key) {
    if (!p.contains(key) || !p[key].is_array() || p[key].size() != inv.size())
      throw Error(file + ": rope type \"longrope\" needs '" + key + "': " + std::to_string(inv.size()) + " numbers");
    std::vector<float> out(inv.size());
    for (std::size_t i = 0; i < inv.size(); ++i) {
      const json& v = p[key][i];
      if (!v.is_number() || !(v.get<double>() > 0))
        throw Error(file + ": '" + key + "'[" + std::to_string(i) + "] must be a positive number, got " + json_brief(v));
      out[i] = static_cast<float>(1.0 / (v.get<double>() / inv[i]));
    }
    return out;
  };
  RopeTable t;
  t.inv_freq = factors("short_factor");
  t.long_inv_freq = factors("long_factor");
  t.long_after = orig;
  const double factor = json_positive(p, "factor", file, double(max_positions) / orig);
  const double af = json_positive(p, "attention_factor", file,
                                  factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(double(orig))));
  t.cos_sin_scale = static_cast<float>(af);
  note += ", long factors past " + std::to_string(orig) + " tokens, cos/sin x " + json(af).dump();
  return t;
}

/// One rotary table from parameters `p` (rope_parameters or rope_scaling, or one layer type's),
/// `theta` their base unless `p` names one.
RopeTable rope_table(const json& p, double theta, std::uint32_t dims, const json& top, std::uint32_t max_positions,
                     const std::string& file, std::string& note) {
  theta = json_positive(p, "rope_theta", file, theta);
  const std::string type = json_str(p, "rope_type", file, p.contains("type") ? json_str(p, "type", file, "").c_str() : "default");
  const std::size_t half = dims / 2;
  std::vector<double> inv(half);
  for (std::size_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(dims));
  if (type == "linear") {
    const double f = json_positive(p, "factor", file, 0);
    if (f == 0) throw Error(file + ": rope type \"linear\" needs 'factor'");
    for (double& v : inv) v /= f;
  } else if (type == "llama3") {
    const double f = json_positive(p, "factor", file, 0), lo = json_positive(p, "low_freq_factor", file, 0),
                 hi = json_positive(p, "high_freq_factor", file, 0),
                 old = json_positive(p, "original_max_position_embeddings", file, 0);
    if (f == 0 || lo == 0 || hi == 0 || old == 0 || hi <= lo)
      throw Error(file + ": rope type \"llama3\" needs factor, low_freq_factor < high_freq_factor and "
                         "original_max_position_embeddings");
    for (double& v : inv) {
      const double wl = 2 * std::numbers::pi / v;
      const double scaled = wl > old / lo ? v / f : v;
      const double smooth = (old / wl - lo) / (hi - lo);
      const bool medium = !(wl < old / hi) && !(wl > old / lo);
      v = medium ? (1 - smooth) * scaled / f + smooth * scaled : scaled;
    }
  } else if (type == "longrope" || type == "su") {
    return longrope(p, inv, top, max_positions, file, note = "longrope, theta " + json(theta).dump());
  } else if (type != "default") {
    throw Error(file + ": unsupported rope type '" + type +
                "' (supported: \"default\", \"linear\", \"llama3\", \"longrope\")");
  }
  note = type + ", theta " + json(theta).dump();
  RopeTable t;
  t.inv_freq.assign(inv.begin(), inv.end());
  return t;
}

/// rope_parameters (current transformers) or rope_theta + rope_scaling (older configs); Gemma-3's
/// per-layer-type parameters or rope_local_base_freq for its sliding layers; partial rotary.
void read_rope(const Family& f, const json& j, const std::string& file, DecoderSpec& s) {
  json p = json::object();
  const json* rp = json_object(j, "rope_parameters", file);  // both checked: a string is refused either way
  const json* rs = json_object(j, "rope_scaling", file);
  if (rp) p = *rp;
  else if (rs) p = *rs;
  const json* full_p = f.local_rope ? json_object(p, "full_attention", file) : nullptr;
  const json full = full_p ? *full_p : p;
  double fraction = f.rotary_fraction;
  for (const json* src : {&j, &full})  // (the newest form last: it wins)
    for (const char* k : {"rotary_pct", "partial_rotary_factor"})
      if (present(*src, k)) fraction = json_positive(*src, k, file, 1.0);
  if (fraction > 1) throw Error(file + ": partial_rotary_factor " + json(fraction).dump() + " is over 1");
  const std::uint32_t dh = s.shape.head_dim, dims = static_cast<std::uint32_t>(double(dh) * fraction);
  if (dims == 0 || dims % 2)
    throw Error(file + ": rotary dimensions int(head_dim " + std::to_string(dh) + " x " + json(fraction).dump() + ") = " +
                std::to_string(dims) + " (must be even and positive)");
  s.rotary_dims = dims;
  const double theta = json_positive(j, "rope_theta", file, json_positive(j, "rotary_emb_base", file, f.local_rope ? 1e6 : 1e4));
  std::string note;
  s.rope.push_back(rope_table(full, theta, dims, j, s.shape.max_positions, file, note));
  s.notes.push_back("rotary: " + std::to_string(dims) + " of " + std::to_string(dh) + " dims per head, " + note +
                    (f.local_rope ? " (full-attention layers)" : ""));
  s.rope_of.assign(s.shape.layers, 0);
  if (!f.local_rope) return;
  const json* local_p = json_object(p, "sliding_attention", file);
  const json local = local_p ? *local_p : json::object();
  const double local_theta = json_positive(j, "rope_local_base_freq", file, 1e4);
  s.rope.push_back(rope_table(local, local_theta, dims, j, s.shape.max_positions, file, note));
  s.notes.push_back("rotary of sliding layers: " + note);
  for (std::uint32_t l = 0; l < s.shape.layers; ++l)
    s.rope_of[l] = s.sliding[l];
}

/// Which layers are sliding-window layers, as transformers decides: `layer_types` when the config
/// lists them ("sliding_attention" / "full_attention"), else the family's rule; their window is
/// sliding_window (Gemma-3's local RoPE follows the layer type even where no window cuts).
void read_windows(const Family& f, const json& j, const std::string& file, DecoderSpec& s) {
  ModelShape& c = s.shape;
  s.sliding.assign(c.layers, 0);
  if (f.window == WindowRule::none) return;                                            // keys ignored
  if (f.window == WindowRule::qwen && !json_bool(j, "use_sliding_window", file, false)) return;  // off unless asked for
  for (std::uint32_t l = 0; l < c.layers; ++l) switch (f.window) {
      case WindowRule::every_layer: s.sliding[l] = 1; break;
      case WindowRule::qwen: {
        const std::uint32_t from = present(j, "max_window_layers") ? json_uint(j, "max_window_layers", file) : 28;
        s.sliding[l] = l >= from;
        break;
      }
      case WindowRule::gemma2: s.sliding[l] = l % 2 == 0; break;
      case WindowRule::gemma3: {
        const std::uint32_t k = present(j, "sliding_window_pattern") ? json_uint(j, "sliding_window_pattern", file) : 6;
        s.sliding[l] = (l + 1) % k != 0;
        break;
      }
      case WindowRule::none: break;
    }
  if (present(j, "layer_types")) {
    const json& t = j["layer_types"];
    if (!t.is_array() || t.size() != c.layers)
      throw Error(file + ": layer_types must list one type per layer (" + std::to_string(c.layers) + ")");
    for (std::uint32_t l = 0; l < c.layers; ++l) {
      const std::string v = t[l].is_string() ? t[l].get<std::string>() : "";
      if (v != "sliding_attention" && v != "full_attention")
        throw Error(file + ": layer_types[" + std::to_string(l) + "] is " + json_brief(t[l], 40) +
                    " (supported: \"sliding_attention\", \"full_attention\")");
      s.sliding[l] = v == "sliding_attention";
    }
  }
  if (!present(j, "sliding_window")) return;
  const std::uint32_t w = json_uint(j, "sliding_window", file);  // (0 refused: a positive integer)
  std::vector<std::uint32_t> per(c.layers, 0);
  for (std::uint32_t l = 0; l < c.layers; ++l) per[l] = s.sliding[l] ? w : 0;
  if (std::any_of(per.begin(), per.end(), [&](std::uint32_t x) { return x && x < c.max_positions; })) {
    std::string list;
    for (std::uint32_t x : per) list += (list.empty() ? "" : " ") + std::to_string(x);
    s.notes.push_back("sliding window per layer (0 = full causal): " + list);
    c.sliding_window = std::move(per);  // (a window at least max_positions wide cuts nothing)
  }
}

bool bias(const BiasRule& r, const json& j, const std::string& file) { return r.key ? json_bool(j, r.key, file, r.fixed) : r.fixed; }

const char* norm_name(NormKind k) {
  return k == NormKind::layer_norm ? "LayerNorm" : k == NormKind::rms ? "RMSNorm" : "RMSNorm (1 + w)";
}

/// A shape key under the family's name or transformers' standard one (GPT2Config's attribute_map
/// reads n_embd as hidden_size, ...); both given must agree.
std::uint32_t shape_uint(const json& j, const char* key, const char* standard, const std::string& file) {
  return std::strcmp(key, standard) ? json_uint_alias(j, key, standard, file) : json_uint(j, key, file);
}

void read_shape(const Family& f, const json& j, const std::string& file, DecoderSpec& s) {
  ModelShape& c = s.shape;
  c.model_type = f.model_type;
  c.vocab_size = json_uint(j, "vocab_size", file);
  c.hidden = shape_uint(j, f.hidden, "hidden_size", file);
  c.layers = shape_uint(j, f.layers, "num_hidden_layers", file);
  c.heads = shape_uint(j, f.heads, "num_attention_heads", file);
  c.kv_heads = present(j, f.kv_heads) ? json_uint(j, f.kv_heads, file) : c.heads;
  c.head_dim = present(j, f.head_dim) ? json_uint(j, f.head_dim, file) : 0;
  if (!c.head_dim) {
    if (c.hidden % c.heads)
      throw Error(file + ": " + f.hidden + " " + std::to_string(c.hidden) + " is not divisible by " + f.heads + " " +
                  std::to_string(c.heads) + (f.head_dim ? " (and no head_dim)" : ""));
    c.head_dim = c.hidden / c.heads;
  }
  if (c.heads % c.kv_heads)
    throw Error(file + ": " + f.heads + " " + std::to_string(c.heads) + " is not a multiple of " + f.kv_heads + " " +
                std::to_string(c.kv_heads));
  if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
  s.intermediate = f.intermediate_per_hidden && !present(j, f.intermediate) ? f.intermediate_per_hidden * c.hidden
                                                                            : json_uint(j, f.intermediate, file);
  c.max_positions = shape_uint(j, f.positions, "max_position_embeddings", file);
  c.causal = true;
}

}  // namespace

namespace {
/// Routed experts: their number and top k, the top k's renormalising, and for Qwen2-MoE the
/// experts' and the shared expert's widths and which layers are sparse (transformers'
/// Qwen2MoeDecoderLayer: not in mlp_only_layers, and (layer + 1) % decoder_sparse_step == 0).
void read_experts(const Family& f, const json& j, const std::string& file, DecoderSpec& s) {
  s.experts = json_uint(j, f.moe_count, file);
  s.experts_per_token = json_uint(j, "num_experts_per_tok", file);
  if (s.experts_per_token > s.experts || s.experts > 1024)
    throw Error(file + ": num_experts_per_tok " + std::to_string(s.experts_per_token) + " of " + f.moe_count + " " +
                std::to_string(s.experts) + " (at most 1024 experts, at most all of them per token)");
  if (f.moe_norm_topk) s.norm_topk = json_bool(j, f.moe_norm_topk, file, false);
  s.expert_intermediate = s.intermediate;
  s.moe_layer.assign(s.shape.layers, s.experts ? 1 : 0);
  if (!f.moe_qwen) return;
  s.expert_intermediate = json_uint(j, "moe_intermediate_size", file);
  s.shared_intermediate = json_uint(j, "shared_expert_intermediate_size", file);  // (transformers always has one)
  const std::uint32_t step = json_uint(j, "decoder_sparse_step", file, 1);  // (0 refused there)
  for (std::uint32_t l = 0; l < s.shape.layers; ++l) s.moe_layer[l] = s.experts && (l + 1) % step == 0;
  if (present(j, "mlp_only_layers")) {
    const json& m = j["mlp_only_layers"];
    if (!m.is_array()) throw Error(file + ": mlp_only_layers must be a list of layer indices");
    for (const json& v : m) {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= s.shape.layers)
        throw Error(file + ": mlp_only_layers holds " + json_brief(v, 40) + " (layer indices 0.." +
                    std::to_string(s.shape.layers - 1) + ")");
      s.moe_layer[v.get<std::size_t>()] = 0;
    }
  }
}
}  // namespace

DecoderSpec read_decoder_spec(const Family& f, const json& j, const std::string& file) {
  refuse_unsupported(f, j, file);
  DecoderSpec s;
  s.family = &f;
  s.act = read_act(f, j, file);
  if (!f.gated && s.act == Activation::silu) throw Error(file + ": unsupported " + f.act + " 'silu' without a gate");
  read_shape(f, j, file, s);
  const ModelShape& c = s.shape;
  s.eps = json_positive(j, f.eps, file, f.eps_default);
  s.qkv_bias = bias(f.qkv_bias, j, file), s.o_bias = bias(f.o_bias, j, file), s.mlp_bias = bias(f.mlp_bias, j, file);
  s.parallel = f.parallel_residual && json_bool(j, f.parallel_residual, file, true);
  if (f.moe_router) read_experts(f, j, file, s);
  s.notes.push_back(std::string("family: ") + f.summary);
  s.notes.push_back(std::to_string(c.layers) + " layers, hidden " + std::to_string(c.hidden) + ", " +
                    std::to_string(c.heads) + " query heads on " + std::to_string(c.kv_heads) + " key/value heads of " +
                    std::to_string(c.head_dim) + " dims, MLP " + std::to_string(s.intermediate) + ", vocabulary " +
                    std::to_string(c.vocab_size) + ", " + std::to_string(c.max_positions) + " positions");
  std::string blocks = norm_name(f.norm);
  blocks += std::string(" eps ") + json(s.eps).dump() + ";";
  if (f.attn_in_norm) blocks += " before attention;";
  if (f.attn_out_norm) blocks += " after attention;";
  if (f.mlp_in_norm) blocks += " before the MLP;";
  if (f.mlp_out_norm) blocks += " after the MLP;";
  if (f.q_norm) blocks += f.qk_norm_full_width ? " q/k over the full width;" : " q/k per head;";
  s.notes.push_back("norms: " + blocks + (s.parallel ? " parallel attention + MLP residual" : " sequential residual"));
  const char* act = s.act == Activation::silu ? "SiLU" : s.act == Activation::gelu_tanh ? "GELU (tanh)" : "GELU (erf)";
  s.notes.push_back(std::string("MLP: ") + (f.gated ? "gated, act(gate) · up, act " : "act ") + act +
                    (s.mlp_bias ? ", biases" : "") +
                    (s.experts ? ", " + std::to_string(s.experts) + " routed experts, top " +
                                     std::to_string(s.experts_per_token) + " per token (softmax" +
                                     (s.norm_topk ? ", renormalised)" : ")") +
                                     (f.moe_qwen ? " of width " + std::to_string(s.expert_intermediate) + " in " +
                                                       std::to_string(std::count(s.moe_layer.begin(), s.moe_layer.end(), 1)) +
                                                       " of " + std::to_string(s.shape.layers) + " layers" +
                                                       (s.shared_intermediate ? ", a sigmoid-gated shared expert of width " +
                                                                                    std::to_string(s.shared_intermediate)
                                                                              : std::string())
                                                 : std::string())
                               : std::string()));
  s.notes.push_back(std::string("attention biases: Q/K/V ") + (s.qkv_bias ? "yes" : "no") + ", output " +
                    (s.o_bias ? "yes" : "no"));
  read_windows(f, j, file, s);
  if (f.learned_positions) s.notes.push_back("positions: learned");
  else read_rope(f, j, file, s);
  if (f.embed_scale) {
    s.embed_scale = static_cast<float>(std::sqrt(double(c.hidden)));
    s.notes.push_back("embeddings x sqrt(hidden) = " + json(double(s.embed_scale)).dump());
  }
  if (f.softcap && present(j, "attn_logit_softcapping")) {
    s.shape.attn_softcap = static_cast<float>(json_positive(j, "attn_logit_softcapping", file, 0));
    s.notes.push_back("attention logits soft-capped: cap · tanh(score / cap), cap " + json(double(s.shape.attn_softcap)).dump());
  }
  if (f.query_pre_attn_scalar) {
    const double q = json_positive(j, "query_pre_attn_scalar", file, double(c.head_dim));
    s.query_scale = static_cast<float>(std::sqrt(double(c.head_dim) / q));
    s.notes.push_back("scores / sqrt(query_pre_attn_scalar " + json(q).dump() + ")");
  }
  return s;
}

}  // namespace headsep::model
