// The Llama family (model_type "llama", "mistral", "qwen2"): RMSNorm, rotary positions (default,
// linear and llama3 frequencies), grouped-query attention, SwiGLU; Qwen2's and attention_bias'
// Q/K/V biases; Mistral's (and Qwen2's, when on) sliding window masks each layer's keys (docs/MODEL.md).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "model/weights.hpp"

namespace headsep::model {
namespace {

class Llama final : public Decoder {
 public:
  Llama(const std::filesystem::path& dir, const json& j, const std::string& file);

 private:
  struct Layer {
    std::vector<float> ln1, ln2;
    std::shared_ptr<const float> qkv, out, gate_up, down;
  };
  void embed(const Group& g, float* x, ModelScratch& s) const override;
  void project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const override;
  void finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const override;
  void final_norm(float* x, std::size_t rows) const override;
  double layer_macs() const noexcept override {
    const double D = shape_.hidden, I = intermediate_, Q = double(shape_.heads) * shape_.head_dim;
    return D * (2 * Q + 2 * double(kv_width())) + 3 * D * I;
  }
  void read_rope(const json& j, const std::string& file);
  void read_sliding_window(const json& j, const std::string& file);
  void load_layers(const FolderWeights& w, bool qkv_bias, bool o_bias);

  const float* input_embeddings() const noexcept override { return embed_.data(); }

  double eps_ = 1e-6;
  std::vector<float> inv_freq_;  // per rotary pair i < head_dim/2
  std::vector<float> embed_, norm_;
  std::vector<Layer> layers_;
};

/// rope_parameters (current transformers) or rope_theta + rope_scaling (older configs).
void Llama::read_rope(const json& j, const std::string& file) {
  json p = json::object();
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) p = j["rope_parameters"];
  else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) p = j["rope_scaling"];
  const double theta = json_positive(p, "rope_theta", file, json_positive(j, "rope_theta", file, 10000.0));
  std::string type = json_str(p, "rope_type", file, p.contains("type") ? json_str(p, "type", file, "").c_str() : "default");
  if (j.contains("partial_rotary_factor") && json_positive(j, "partial_rotary_factor", file, 1.0) != 1.0)
    throw Error(file + ": unsupported: partial_rotary_factor " + j["partial_rotary_factor"].dump() + " (every dim rotates)");
  const std::size_t half = shape_.head_dim / 2;
  std::vector<double> inv(half);
  for (std::size_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(shape_.head_dim));
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
  } else if (type != "default") {
    throw Error(file + ": unsupported rope type '" + type + "' (supported: \"default\", \"linear\", \"llama3\")");
  }
  inv_freq_.assign(inv.begin(), inv.end());
}

/// Which layers attend within a sliding window, as transformers decides: `layer_types` when the
/// config lists them ("sliding_attention" / "full_attention"), else Mistral's every layer and
/// Qwen2's layers from max_window_layers when use_sliding_window is true.
void Llama::read_sliding_window(const json& j, const std::string& file) {
  ModelShape& c = shape_;
  if (!j.contains("sliding_window") || j["sliding_window"].is_null()) return;
  const bool qwen2_window = j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean() &&
                            j["use_sliding_window"].get<bool>();
  if (c.model_type != "mistral" && !qwen2_window) return;  // Qwen2's is off unless use_sliding_window
  const std::uint32_t w = json_uint(j, "sliding_window", file);  // (0 refused: a positive integer)
  std::vector<std::uint32_t> per(c.layers, c.model_type == "mistral" ? w : 0);
  if (c.model_type == "qwen2") {
    const std::uint32_t from = j.contains("max_window_layers") && !j["max_window_layers"].is_null()
                                   ? json_uint(j, "max_window_layers", file) : 28;  // transformers' default
    for (std::uint32_t l = from; l < c.layers; ++l) per[l] = w;
  }
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& t = j["layer_types"];
    if (!t.is_array() || t.size() != c.layers)
      throw Error(file + ": layer_types must list one type per layer (" + std::to_string(c.layers) + ")");
    for (std::uint32_t l = 0; l < c.layers; ++l) {
      const std::string s = t[l].is_string() ? t[l].get<std::string>() : "";
      if (s != "sliding_attention" && s != "full_attention")
        throw Error(file + ": layer_types[" + std::to_string(l) + "] is " + t[l].dump().substr(0, 40) +
                    " (supported: \"sliding_attention\", \"full_attention\")");
      per[l] = s == "sliding_attention" ? w : 0;
    }
  }
  if (std::any_of(per.begin(), per.end(), [&](std::uint32_t x) { return x && x < c.max_positions; }))
    c.sliding_window = std::move(per);  // (a window at least max_positions wide cuts nothing)
}

Llama::Llama(const std::filesystem::path& dir, const json& j, const std::string& file) {
  ModelShape& c = shape_;
  c.model_type = json_str(j, "model_type", file, "");
  const std::string act = json_str(j, "hidden_act", file, "silu");
  if (act != "silu") throw Error(file + ": unsupported hidden_act '" + act + "' (supported: \"silu\", SwiGLU)");
  if (j.contains("mlp_bias") && j["mlp_bias"].is_boolean() && j["mlp_bias"].get<bool>())
    throw Error(file + ": unsupported: 'mlp_bias' is true");
  c.vocab_size = json_uint(j, "vocab_size", file);
  c.hidden = json_uint(j, "hidden_size", file);
  c.layers = json_uint(j, "num_hidden_layers", file);
  c.heads = json_uint(j, "num_attention_heads", file);
  c.kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                   ? json_uint(j, "num_key_value_heads", file) : c.heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? json_uint(j, "head_dim", file) : 0;
  if (!c.head_dim) {
    if (c.hidden % c.heads)
      throw Error(file + ": hidden_size " + std::to_string(c.hidden) + " is not divisible by num_attention_heads " +
                  std::to_string(c.heads) + " (and no head_dim)");
    c.head_dim = c.hidden / c.heads;
  }
  if (c.heads % c.kv_heads)
    throw Error(file + ": num_attention_heads " + std::to_string(c.heads) + " is not a multiple of num_key_value_heads " +
                std::to_string(c.kv_heads));
  if (c.head_dim % 2) throw Error(file + ": head_dim " + std::to_string(c.head_dim) + " is odd (rotary pairs)");
  if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
  intermediate_ = json_uint(j, "intermediate_size", file);
  c.max_positions = json_uint(j, "max_position_embeddings", file);
  c.causal = true;
  eps_ = json_positive(j, "rms_norm_eps", file, 1e-6);
  read_sliding_window(j, file);
  read_rope(j, file);
  name_ = folder_name(dir);
  const bool bias = c.model_type == "qwen2" ||
                    (j.contains("attention_bias") && j["attention_bias"].is_boolean() && j["attention_bias"].get<bool>());
  const FolderWeights w(dir);
  load_layers(w, bias, bias && c.model_type != "qwen2");
  set_heads();
}

void Llama::load_layers(const FolderWeights& w, bool qkv_bias, bool o_bias) {
  const ModelShape& c = shape_;
  const std::uint64_t D = c.hidden, I = intermediate_, dh = c.head_dim, Q = c.heads * dh, KV = kv_width();
  embed_ = w.read("model.embed_tokens.weight", {c.vocab_size, D}, "[vocab_size, hidden_size]");
  norm_ = w.read("model.norm.weight", {D}, "[hidden_size]");
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto read = [&](const std::string& n, std::vector<std::uint64_t> dims, const char* f) { return w.read(p + n, dims, f); };
    const auto wq = read("self_attn.q_proj.weight", {Q, D}, "[heads*head_dim, hidden_size]");
    const auto wk = read("self_attn.k_proj.weight", {KV, D}, "[kv_heads*head_dim, hidden_size]");
    const auto wv = read("self_attn.v_proj.weight", {KV, D}, "[kv_heads*head_dim, hidden_size]");
    std::vector<float> bq(Q, 0.0f), bk(KV, 0.0f), bv(KV, 0.0f), bo;
    if (qkv_bias) {
      bq = read("self_attn.q_proj.bias", {Q}, "[heads*head_dim]");
      bk = read("self_attn.k_proj.bias", {KV}, "[kv_heads*head_dim]");
      bv = read("self_attn.v_proj.bias", {KV}, "[kv_heads*head_dim]");
    }
    if (o_bias) bo = read("self_attn.o_proj.bias", {D}, "[hidden_size]");
    // Rows [Q | K of each query head's key/value head | V].
    std::vector<float> wqkv(wq), bqkv(bq);
    for (std::uint32_t h = 1; h <= c.heads; ++h) {
      const std::size_t k = c.kv_head(h) * dh;
      wqkv.insert(wqkv.end(), wk.begin() + k * D, wk.begin() + (k + dh) * D);
      bqkv.insert(bqkv.end(), bk.begin() + k, bk.begin() + k + dh);
    }
    wqkv.insert(wqkv.end(), wv.begin(), wv.end());
    bqkv.insert(bqkv.end(), bv.begin(), bv.end());
    Layer L;
    L.qkv = pack_linear(wqkv, bqkv, qkv_ld(), D);
    L.out = pack_linear(read("self_attn.o_proj.weight", {D, Q}, "[hidden_size, heads*head_dim]"), bo, D, Q);
    auto gu = read("mlp.gate_proj.weight", {I, D}, "[intermediate_size, hidden_size]");
    const auto up = read("mlp.up_proj.weight", {I, D}, "[intermediate_size, hidden_size]");
    gu.insert(gu.end(), up.begin(), up.end());
    L.gate_up = pack_linear(gu, {}, 2 * I, D);
    L.down = pack_linear(read("mlp.down_proj.weight", {D, I}, "[hidden_size, intermediate_size]"), {}, D, I);
    L.ln1 = read("input_layernorm.weight", {D}, "[hidden_size]");
    L.ln2 = read("post_attention_layernorm.weight", {D}, "[hidden_size]");
    layers_.push_back(std::move(L));
  }
}

// The embeddings, and the group's rotary cos/sin per (token, pair) for every layer: the angle
// position · inv_freq in f32, as transformers computes it.
void Llama::embed(const Group& g, float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, half = inv_freq_.size();
  const std::uint64_t t0 = g.token_offset[g.r0];
  s.rope.resize(g.T * half * 2);
  for (std::size_t r = g.r0; r < g.r1; ++r)
    for (std::uint64_t t = g.token_offset[r]; t < g.token_offset[r + 1]; ++t) {
      const float* e = embed_.data() + std::size_t(g.ids[t]) * D;
      std::copy(e, e + D, x + (t - t0) * D);
      float* cs = s.rope.data() + (t - t0) * half * 2;
      const float pos = static_cast<float>(t - g.token_offset[r]);
      for (std::size_t i = 0; i < half; ++i) {
        const float a = pos * inv_freq_[i];
        cs[2 * i] = static_cast<float>(std::cos(double(a)));
        cs[2 * i + 1] = static_cast<float>(std::sin(double(a)));
      }
    }
}

void Llama::project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T, ld = qkv_ld(), dh = shape_.head_dim, half = dh / 2;
  const Layer& L = layers_[l];
  s.h1.resize(T * D);
  rms_norm_rows(x, s.h1.data(), T, D, L.ln1.data(), eps_);
  kernels::project_rows(g.level, s.h1.data(), D, T, D, L.qkv.get(), ld, s.qkv.data(), ld);
  // RoPE on every query head and every K copy (rotate_half: pairs (i, i + dh/2)).
  const std::size_t blocks = 2 * std::size_t(shape_.heads);
  for (std::size_t t = 0; t < T; ++t) {
    const float* cs = s.rope.data() + t * half * 2;
    for (std::size_t b = 0; b < blocks; ++b) {
      float* v = s.qkv.data() + t * ld + b * dh;
      for (std::size_t i = 0; i < half; ++i) {
        const float x1 = v[i], x2 = v[i + half], c = cs[2 * i], sn = cs[2 * i + 1];
        v[i] = x1 * c - x2 * sn;
        v[i + half] = x2 * c + x1 * sn;
      }
    }
  }
}

void Llama::finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, I = intermediate_, T = g.T, Q = std::size_t(shape_.heads) * shape_.head_dim;
  const Layer& L = layers_[l];
  kernels::project_rows(g.level, s.ctx.data(), Q, T, Q, L.out.get(), D, s.h1.data(), D);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += s.h1[i];
  rms_norm_rows(x, s.h1.data(), T, D, L.ln2.data(), eps_);
  s.inter.resize(T * 3 * I);
  float* gu = s.inter.data() + T * I;
  kernels::project_rows(g.level, s.h1.data(), D, T, D, L.gate_up.get(), 2 * I, gu, 2 * I);
  swiglu_rows(gu, s.inter.data(), T, I);
  kernels::project_rows(g.level, s.inter.data(), I, T, I, L.down.get(), D, s.h1.data(), D);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += s.h1[i];
}

void Llama::final_norm(float* x, std::size_t rows) const {
  rms_norm_rows(x, x, rows, shape_.hidden, norm_.data(), eps_);
}

}  // namespace

std::unique_ptr<Architecture> load_llama(const std::filesystem::path& dir, const json& config, const std::string& file) {
  return std::make_unique<Llama>(dir, config, file);
}

}  // namespace headsep::model
