// BERT encoder forward pass (see bert.hpp). Reports are processed in groups of consecutive
// reports (about 512 tokens, model::for_each_group): the four products of each layer run over the whole group
// at once (kernels::project_rows, the packed-panel kernel AttentionPlan uses), the attention per
// report through the fused kernel (attention_report), which also measures every head.
//
// Why the panel kernel and not OpenBLAS: Debian's OpenBLAS 0.3.21 runs its Prescott kernels on
// the AVX-512 Xeon this is measured on (13-24 GFLOP/s against 108-134 for the panel kernel,
// bench_attention gemm/ vs project/; docs/ATTENTION.md), and the panel kernel gives each token a
// result that does not depend on the other tokens of its group, so chunking cannot change a bit.
#include "headsep/bert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/gelu.hpp"
#include "model/weights.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

using model::json;
using model::json_str;
using model::json_uint;
using model::pack_linear;

}  // namespace

BertConfig BertConfig::parse(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(file + ": not valid JSON (" + json_error_text(e.what()) + ")");
  }
  if (!j.is_object()) throw Error(file + ": expected a JSON object");
  const std::string type = json_str(j, "model_type", file, "");
  bool bert = type == "bert";
  if (type.empty() && j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a.is_string() && a.get<std::string>().rfind("Bert", 0) == 0) bert = true;
  if (!bert)
    throw Error(file + ": unsupported architecture (model_type '" + type +
                "'): headsep runs BERT encoders (model_type \"bert\")");
  if (j.contains("is_decoder") && j["is_decoder"].is_boolean() && j["is_decoder"].get<bool>())
    throw Error(file + ": unsupported: is_decoder is true (headsep runs BERT encoders)");
  const std::string act = json_str(j, "hidden_act", file, "gelu");
  if (act != "gelu")
    throw Error(file + ": unsupported activation hidden_act '" + act + "' (supported: \"gelu\", BERT's exact erf GELU)");
  const std::string pos = json_str(j, "position_embedding_type", file, "absolute");
  if (pos != "absolute") throw Error(file + ": unsupported position_embedding_type '" + pos + "' (supported: \"absolute\")");
  BertConfig c;
  c.vocab_size = json_uint(j, "vocab_size", file);
  c.hidden = json_uint(j, "hidden_size", file);
  c.layers = json_uint(j, "num_hidden_layers", file);
  c.heads = json_uint(j, "num_attention_heads", file);
  c.intermediate = json_uint(j, "intermediate_size", file);
  c.max_positions = json_uint(j, "max_position_embeddings", file);
  c.type_vocab_size = json_uint(j, "type_vocab_size", file, 2);
  if (j.contains("layer_norm_eps")) {
    if (!j["layer_norm_eps"].is_number() || !(j["layer_norm_eps"].get<double>() > 0) ||
        !std::isfinite(j["layer_norm_eps"].get<double>()))
      throw Error(file + ": 'layer_norm_eps' must be a positive number, got " + j["layer_norm_eps"].dump());
    c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  }
  if (c.hidden % c.heads)
    throw Error(file + ": hidden_size " + std::to_string(c.hidden) + " is not divisible by num_attention_heads " +
                std::to_string(c.heads));
  if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
  return c;
}

BertModel BertModel::load(const std::filesystem::path& dir) {
  const std::string cfg_file = (dir / "config.json").string();
  std::ifstream in(dir / "config.json", std::ios::binary);
  if (!in) throw Error(cfg_file + ": cannot open (a model folder needs config.json and model.safetensors)");
  std::ostringstream ss;
  ss << in.rdbuf();
  BertModel m;
  m.cfg_ = BertConfig::parse(ss.str(), cfg_file);
  m.name_ = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  const BertConfig& c = m.cfg_;
  m.shape_.model_type = "bert";
  m.shape_.vocab_size = c.vocab_size, m.shape_.hidden = c.hidden, m.shape_.layers = c.layers;
  m.shape_.heads = m.shape_.kv_heads = c.heads, m.shape_.head_dim = c.head_dim();
  m.shape_.max_positions = c.max_positions;
  const SafeTensors st(dir / "model.safetensors");
  std::string prefix;
  if (!st.contains("embeddings.word_embeddings.weight") && st.contains("bert.embeddings.word_embeddings.weight"))
    prefix = "bert.";
  const std::uint64_t D = c.hidden, I = c.intermediate;
  auto read = [&](const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula) {
    return st.read_f32(prefix + name, ShapeSpec{std::move(dims), formula});
  };
  m.word_ = read("embeddings.word_embeddings.weight", {c.vocab_size, D}, "[vocab_size, hidden_size]");
  m.pos_ = read("embeddings.position_embeddings.weight", {c.max_positions, D}, "[max_position_embeddings, hidden_size]");
  m.type_ = read("embeddings.token_type_embeddings.weight", {c.type_vocab_size, D}, "[type_vocab_size, hidden_size]");
  m.emb_g_ = read("embeddings.LayerNorm.weight", {D}, "[hidden_size]");
  m.emb_b_ = read("embeddings.LayerNorm.bias", {D}, "[hidden_size]");
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    auto wq = read(p + "attention.self.query.weight", {D, D}, "[hidden_size, hidden_size]");
    auto wk = read(p + "attention.self.key.weight", {D, D}, "[hidden_size, hidden_size]");
    auto wv = read(p + "attention.self.value.weight", {D, D}, "[hidden_size, hidden_size]");
    auto bq = read(p + "attention.self.query.bias", {D}, "[hidden_size]");
    auto bk = read(p + "attention.self.key.bias", {D}, "[hidden_size]");
    auto bv = read(p + "attention.self.value.bias", {D}, "[hidden_size]");
    auto wo = read(p + "attention.output.dense.weight", {D, D}, "[hidden_size, hidden_size]");
    auto bo = read(p + "attention.output.dense.bias", {D}, "[hidden_size]");
    auto w1 = read(p + "intermediate.dense.weight", {I, D}, "[intermediate_size, hidden_size]");
    auto b1 = read(p + "intermediate.dense.bias", {I}, "[intermediate_size]");
    auto w2 = read(p + "output.dense.weight", {D, I}, "[hidden_size, intermediate_size]");
    auto b2 = read(p + "output.dense.bias", {D}, "[hidden_size]");
    Layer L;
    L.ln1_g = read(p + "attention.output.LayerNorm.weight", {D}, "[hidden_size]");
    L.ln1_b = read(p + "attention.output.LayerNorm.bias", {D}, "[hidden_size]");
    L.ln2_g = read(p + "output.LayerNorm.weight", {D}, "[hidden_size]");
    L.ln2_b = read(p + "output.LayerNorm.bias", {D}, "[hidden_size]");
    // Q | K | V stacked as one [3D][D] linear.
    std::vector<float> wqkv;
    wqkv.reserve(3 * D * D);
    for (auto* w : {&wq, &wk, &wv}) wqkv.insert(wqkv.end(), w->begin(), w->end());
    std::vector<float> bqkv;
    for (auto* b : {&bq, &bk, &bv}) bqkv.insert(bqkv.end(), b->begin(), b->end());
    L.qkv = pack_linear(wqkv, bqkv, 3 * D, D);
    L.out = pack_linear(wo, bo, D, D);
    L.ffn1 = pack_linear(w1, b1, I, D);
    L.ffn2 = pack_linear(w2, b2, D, I);
    m.layers_.push_back(std::move(L));
  }
  const std::uint32_t H = c.heads, dh = c.head_dim(), H1 = H + 1;
  m.cols_.assign(5 * std::size_t(H1), 0);
  for (std::uint32_t h = 0; h <= H; ++h) {
    const std::uint32_t off = h ? (h - 1) * dh : 0;
    m.cols_[h] = off;
    m.cols_[H1 + h] = c.hidden + off;
    m.cols_[2 * H1 + h] = 2 * c.hidden + off;
    m.cols_[3 * H1 + h] = h ? dh : c.hidden;
    m.cols_[4 * H1 + h] = h ? dh : 0;  // the baseline's map is measured, its output unused: no A·V
  }
  return m;
}

double BertModel::flops(const std::uint64_t* token_offset, std::size_t n_reports) const noexcept {
  const double D = cfg_.hidden, I = cfg_.intermediate;
  double f = 0;
  for (std::size_t r = 0; r < n_reports; ++r) {
    const double n = double(token_offset[r + 1] - token_offset[r]);
    f += 2.0 * n * (3 * D * D + D * D + 2 * D * I) + 4.0 * n * n * D;
  }
  return f * cfg_.layers;
}

void BertModel::forward(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t n_reports,
                        std::uint32_t axes, const float* const* axis, SimdLevel level,
                        const std::vector<BertLayerOut>& layers, float* hidden, BertScratch& s,
                        float* all_hidden, const DirectionAxes* directions) const {
  if (n_reports == 0) return;
  kernels::require_supported(level);
  model::check_forward(shape_, ids, token_offset, n_reports, axes, layers, directions);
  const std::size_t total = token_offset[n_reports] - token_offset[0];
  model::for_each_group(token_offset, n_reports, [&](std::size_t r0, std::size_t r1, std::size_t) {
    run_group(ids, token_offset, r0, r1, axes, axis, level, layers, hidden, all_hidden, total, directions, s);
  });
}

void BertModel::run_group(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t r0, std::size_t r1,
                          std::uint32_t axes, const float* const* axis, SimdLevel level,
                          const std::vector<BertLayerOut>& layers, float* hidden, float* all_hidden,
                          std::size_t total_tokens, const DirectionAxes* directions, BertScratch& s) const {
  const std::size_t D = cfg_.hidden, I = cfg_.intermediate, H = cfg_.heads, dh = cfg_.head_dim();
  const std::uint64_t t0 = token_offset[r0], base = token_offset[0];
  const std::size_t T = token_offset[r1] - t0;
  const AttentionReport in = model::rows_view(static_cast<std::uint32_t>(H), 3 * D, cols_, MaskKind::none, axes);
  if (T == 0) {  // only empty reports: zero metrics (the kernel's convention for n = 0)
    for (std::size_t l = 0; l < layers.size(); ++l)
      model::attend_reports(in, token_offset, r0, r1, nullptr, axis, layers[l], level, dh, nullptr, s, {directions, l, nullptr, D});
    return;
  }
  s.x.resize(T * D);
  s.qkv.resize(T * 3 * D + kernels::kAttnMaxLanes);
  s.ctx.resize(T * D);
  s.h1.resize(T * D);
  s.inter.resize(T * I);
  float* x = s.x.data();
  // Embeddings: word + position (within the report) + token type 0, then LayerNorm.
  for (std::size_t r = r0; r < r1; ++r)
    for (std::uint64_t t = token_offset[r]; t < token_offset[r + 1]; ++t) {
      float* row = x + (t - t0) * D;
      const float* w = word_.data() + std::size_t(ids[t]) * D;
      const float* p = pos_.data() + std::size_t(t - token_offset[r]) * D;
      for (std::size_t i = 0; i < D; ++i) row[i] = w[i] + p[i] + type_[i];
    }
  layer_norm_rows(level, x, nullptr, T, D, emb_g_.data(), emb_b_.data(), cfg_.layer_norm_eps);
  if (all_hidden) std::memcpy(all_hidden + (t0 - base) * D, x, T * D * sizeof(float));

  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const BertLayerOut& o = layers[l];
    // Each product also prefetches the first panel of the next one (weights come from L3/DRAM);
    // the last layer's, layer 0's for the next group of reports.
    const float* next_qkv = layers_[(l + 1) % layers_.size()].qkv.get();
    kernels::project_rows(level, x, D, T, D, L.qkv.get(), 3 * D, s.qkv.data(), 3 * D, L.out.get(), D);
    model::attend_reports(in, token_offset, r0, r1, s.qkv.data(), axis, o, level, dh, s.ctx.data(), s,
                          {directions, l, x, D});
    kernels::project_rows(level, s.ctx.data(), D, T, D, L.out.get(), D, s.h1.data(), D, L.ffn1.get(), D);
    layer_norm_rows(level, s.h1.data(), x, T, D, L.ln1_g.data(), L.ln1_b.data(), cfg_.layer_norm_eps);
    kernels::project_rows(level, s.h1.data(), D, T, D, L.ffn1.get(), I, s.inter.data(), I, L.ffn2.get(), I, true);
    kernels::project_rows(level, s.inter.data(), I, T, I, L.ffn2.get(), D, x, D, next_qkv, D);
    layer_norm_rows(level, x, s.h1.data(), T, D, L.ln2_g.data(), L.ln2_b.data(), cfg_.layer_norm_eps);
    if (all_hidden) std::memcpy(all_hidden + ((l + 1) * total_tokens + (t0 - base)) * D, x, T * D * sizeof(float));
  }
  if (hidden) std::memcpy(hidden + (t0 - base) * D, x, T * D * sizeof(float));
}

}  // namespace headsep
