// GPT-2 (model_type "gpt2"): learned positions, pre-LayerNorm blocks, fused c_attn, GELU (tanh),
// Conv1D weights stored [in, out], causal attention; the final ln_f for the hidden states.
// Tensor names with or without the "transformer." prefix (GPT2LMHeadModel / GPT2Model).
#include <algorithm>

#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "model/weights.hpp"

namespace headsep::model {
namespace {

class Gpt2 final : public Decoder {
 public:
  Gpt2(const std::filesystem::path& dir, const json& j, const std::string& file);

 private:
  struct Layer {
    std::vector<float> ln1_g, ln1_b, ln2_g, ln2_b;
    std::shared_ptr<const float> qkv, out, fc, proj;
  };
  void embed(const Group& g, float* x, ModelScratch& s) const override;
  void project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const override;
  void finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const override;
  void final_norm(float* x, std::size_t rows) const override;
  double layer_macs() const noexcept override {
    const double D = shape_.hidden, I = intermediate_;
    return 4 * D * D + 2 * D * I;
  }

  const float* input_embeddings() const noexcept override { return wte_.data(); }

  double eps_ = 1e-5;
  std::vector<float> wte_, wpe_, lnf_g_, lnf_b_;
  std::vector<Layer> layers_;
};

Gpt2::Gpt2(const std::filesystem::path& dir, const json& j, const std::string& file) {
  const std::string act = json_str(j, "activation_function", file, "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw Error(file + ": unsupported activation_function '" + act + "' (supported: \"gelu_new\", GELU with tanh)");
  for (const char* k : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"})
    if (j.contains(k) && j[k].is_boolean() && j[k].get<bool>()) throw Error(file + ": unsupported: '" + k + "' is true");
  if (j.contains("scale_attn_weights") && j["scale_attn_weights"].is_boolean() && !j["scale_attn_weights"].get<bool>())
    throw Error(file + ": unsupported: 'scale_attn_weights' is false (scores unscaled)");
  ModelShape& c = shape_;
  c.model_type = "gpt2";
  c.vocab_size = json_uint(j, "vocab_size", file);
  c.hidden = json_uint(j, "n_embd", file);
  c.layers = json_uint(j, "n_layer", file);
  c.heads = c.kv_heads = json_uint(j, "n_head", file);
  c.max_positions = json_uint(j, "n_positions", file);
  c.causal = true;
  if (c.hidden % c.heads)
    throw Error(file + ": n_embd " + std::to_string(c.hidden) + " is not divisible by n_head " + std::to_string(c.heads));
  if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
  c.head_dim = c.hidden / c.heads;
  intermediate_ = j.contains("n_inner") && !j["n_inner"].is_null() ? json_uint(j, "n_inner", file) : 4 * c.hidden;
  eps_ = json_positive(j, "layer_norm_epsilon", file, 1e-5);
  name_ = folder_name(dir);
  const FolderWeights w(dir);
  const std::string pre = w.contains("transformer.wte.weight") ? "transformer." : "";
  const std::uint64_t D = c.hidden, I = intermediate_;
  auto read = [&](const std::string& n, std::vector<std::uint64_t> dims, const char* f) { return w.read(pre + n, dims, f); };
  // Conv1D stores [in][out], the panel kernel's input-major layout already.
  auto conv = [&](const std::string& n, std::uint64_t in, std::uint64_t out, const char* f, const char* fb) {
    const auto wt = read(n + ".weight", {in, out}, f), b = read(n + ".bias", {out}, fb);
    return kernels::pack_panels(wt.data(), in, out, b.data());
  };
  wte_ = read("wte.weight", {c.vocab_size, D}, "[vocab_size, n_embd]");
  wpe_ = read("wpe.weight", {c.max_positions, D}, "[n_positions, n_embd]");
  lnf_g_ = read("ln_f.weight", {D}, "[n_embd]");
  lnf_b_ = read("ln_f.bias", {D}, "[n_embd]");
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Layer L;
    L.ln1_g = read(p + "ln_1.weight", {D}, "[n_embd]");
    L.ln1_b = read(p + "ln_1.bias", {D}, "[n_embd]");
    L.ln2_g = read(p + "ln_2.weight", {D}, "[n_embd]");
    L.ln2_b = read(p + "ln_2.bias", {D}, "[n_embd]");
    L.qkv = conv(p + "attn.c_attn", D, 3 * D, "[n_embd, 3*n_embd]", "[3*n_embd]");
    L.out = conv(p + "attn.c_proj", D, D, "[n_embd, n_embd]", "[n_embd]");
    L.fc = conv(p + "mlp.c_fc", D, I, "[n_embd, n_inner]", "[n_inner]");
    L.proj = conv(p + "mlp.c_proj", I, D, "[n_inner, n_embd]", "[n_embd]");
    layers_.push_back(std::move(L));
  }
  set_heads();
}

void Gpt2::embed(const Group& g, float* x, ModelScratch&) const {
  const std::size_t D = shape_.hidden;
  const std::uint64_t t0 = g.token_offset[g.r0];
  for (std::size_t r = g.r0; r < g.r1; ++r)
    for (std::uint64_t t = g.token_offset[r]; t < g.token_offset[r + 1]; ++t) {
      float* row = x + (t - t0) * D;
      const float* e = wte_.data() + std::size_t(g.ids[t]) * D;
      const float* p = wpe_.data() + std::size_t(t - g.token_offset[r]) * D;
      for (std::size_t i = 0; i < D; ++i) row[i] = e[i] + p[i];
    }
}

// Q | K | V of c_attn: H = KV, so the rows are the decoders' layout as they come.
void Gpt2::project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T;
  const Layer& L = layers_[l];
  s.h1.resize(T * D);
  std::copy(x, x + T * D, s.h1.begin());
  layer_norm_rows(g.level, s.h1.data(), nullptr, T, D, L.ln1_g.data(), L.ln1_b.data(), eps_);
  kernels::project_rows(g.level, s.h1.data(), D, T, D, L.qkv.get(), 3 * D, s.qkv.data(), 3 * D);
}

void Gpt2::finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, I = intermediate_, T = g.T;
  const Layer& L = layers_[l];
  kernels::project_rows(g.level, s.ctx.data(), D, T, D, L.out.get(), D, s.h1.data(), D);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += s.h1[i];
  std::copy(x, x + T * D, s.h1.begin());
  layer_norm_rows(g.level, s.h1.data(), nullptr, T, D, L.ln2_g.data(), L.ln2_b.data(), eps_);
  s.inter.resize(T * I);
  kernels::project_rows(g.level, s.h1.data(), D, T, D, L.fc.get(), I, s.inter.data(), I);
  gelu_tanh_inplace(s.inter.data(), T * I);
  kernels::project_rows(g.level, s.inter.data(), I, T, I, L.proj.get(), D, s.h1.data(), D);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += s.h1[i];
}

void Gpt2::final_norm(float* x, std::size_t rows) const {
  layer_norm_rows(SimdLevel::scalar, x, nullptr, rows, shape_.hidden, lnf_g_.data(), lnf_b_.data(), eps_);
}

}  // namespace

std::unique_ptr<Architecture> load_gpt2(const std::filesystem::path& dir, const json& config, const std::string& file) {
  return std::make_unique<Gpt2>(dir, config, file);
}

}  // namespace headsep::model
