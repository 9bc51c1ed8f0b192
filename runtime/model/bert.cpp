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
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/packed_linear.hpp"
#include "model/weights.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

using model::json;
using model::json_str;
using model::json_uint;
using model::pack_linear;  // (the typed one: kernels::PackedLinear)

/// An encoder family's tensor names (BERT's are RoBERTa's and XLM-R's): as the decoders' table
/// (model/family.hpp), a row per naming. `prefix` is optional in a folder (a base model's save).
struct EncoderNames {
  const char *prefix, *word, *pos, *type, *emb_ln, *layer, *q, *k, *v, *o, *ln1, *ffn1, *ffn2, *ln2;
};
constexpr EncoderNames kBertNames{"bert.", "embeddings.word_embeddings", "embeddings.position_embeddings",
                                  "embeddings.token_type_embeddings", "embeddings.LayerNorm", "encoder.layer.",
                                  "attention.self.query", "attention.self.key", "attention.self.value",
                                  "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                                  "output.dense", "output.LayerNorm"};
constexpr EncoderNames kDistilBertNames{"distilbert.", "embeddings.word_embeddings", "embeddings.position_embeddings",
                                        nullptr, "embeddings.LayerNorm", "transformer.layer.", "attention.q_lin",
                                        "attention.k_lin", "attention.v_lin", "attention.out_lin", "sa_layer_norm",
                                        "ffn.lin1", "ffn.lin2", "output_layer_norm"};

bool is_encoder_type(const std::string& t) { return t == "bert" || t == "roberta" || t == "xlm-roberta" || t == "distilbert"; }

/// DistilBERT's config keys (dim, n_layers, ...), everything else as BERT's.
void parse_distilbert(const json& j, const std::string& file, BertConfig& c) {
  const std::string act = json_str(j, "activation", file, "gelu");
  if (act != "gelu") throw Error(file + ": unsupported activation '" + act + "' (supported: \"gelu\")");
  if (model::json_bool(j, "sinusoidal_pos_embds", file, false))
    throw Error(file + ": unsupported: 'sinusoidal_pos_embds' is true");
  c.vocab_size = json_uint(j, "vocab_size", file);
  c.hidden = json_uint(j, "dim", file);
  c.layers = json_uint(j, "n_layers", file);
  c.heads = json_uint(j, "n_heads", file);
  c.intermediate = json_uint(j, "hidden_dim", file);
  c.max_positions = json_uint(j, "max_position_embeddings", file);
  c.type_vocab_size = 0;
}

}  // namespace

bool is_encoder_model_type(const std::string& model_type) { return is_encoder_type(model_type); }

BertConfig BertConfig::parse(const std::string& text, const std::string& file) {
  const json j = parse_json(text, file);
  if (!j.is_object()) throw Error(file + ": expected a JSON object");
  const std::string type = json_str(j, "model_type", file, "");
  bool bert = is_encoder_type(type);
  if (type.empty() && j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a.is_string() && a.get<std::string>().rfind("Bert", 0) == 0) bert = true;
  if (!bert)
    throw Error(file + ": unsupported architecture (model_type '" + type +
                "'): headsep runs the encoders \"bert\", \"roberta\", \"xlm-roberta\" and \"distilbert\"");
  if (model::json_bool(j, "is_decoder", file, false))
    throw Error(file + ": unsupported: is_decoder is true (headsep runs BERT encoders)");
  BertConfig c;
  c.model_type = type.empty() ? "bert" : type;
  if (c.model_type == "distilbert") {
    parse_distilbert(j, file, c);
    if (c.hidden % c.heads)
      throw Error(file + ": dim " + std::to_string(c.hidden) + " is not divisible by n_heads " + std::to_string(c.heads));
    if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
    return c;
  }
  const std::string act = json_str(j, "hidden_act", file, "gelu");
  if (act != "gelu")
    throw Error(file + ": unsupported activation hidden_act '" + act + "' (supported: \"gelu\", BERT's exact erf GELU)");
  const std::string pos = json_str(j, "position_embedding_type", file, "absolute");
  if (pos != "absolute") throw Error(file + ": unsupported position_embedding_type '" + pos + "' (supported: \"absolute\")");
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
      throw Error(file + ": 'layer_norm_eps' must be a positive number, got " + json_brief(j["layer_norm_eps"]));
    c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  }
  if (c.model_type != "bert") {  // RoBERTa's positions start after padding_idx
    c.roberta_positions = true;
    c.padding_idx = 1;  // (transformers' RobertaConfig default)
    if (j.contains("pad_token_id") && !j["pad_token_id"].is_null()) {
      const json& v = j["pad_token_id"];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= (std::int64_t(1) << 24))
        throw Error(file + ": 'pad_token_id' must be a token id (an integer from 0), got " + json_brief(v));
      c.padding_idx = static_cast<std::uint32_t>(v.get<std::int64_t>());
    }
    if (c.max_positions <= c.padding_idx + 1)
      throw Error(file + ": max_position_embeddings " + std::to_string(c.max_positions) + " leaves no position after pad_token_id " +
                  std::to_string(c.padding_idx));
    c.max_positions -= c.padding_idx + 1;
  }
  if (c.hidden % c.heads)
    throw Error(file + ": hidden_size " + std::to_string(c.hidden) + " is not divisible by num_attention_heads " +
                std::to_string(c.heads));
  if (c.layers > 1024 || c.heads > 1024) throw Error(file + ": more than 1024 layers or heads");
  return c;
}

/// What an encoder holds: its products (kernels::PackedLinear, in the dtype load chose), norms
/// (f32) and embedding tables (model::HeldTable: f32, or bf16/f16 as the products).
struct BertModel::Weights {
  struct Layer {
    kernels::PackedLinear qkv, out, ffn1, ffn2;
    std::vector<float> ln1_g, ln1_b, ln2_g, ln2_b;
  };
  model::HeldTable word, pos, type;  // type empty: no token types (DistilBERT)
  std::vector<float> emb_g, emb_b;
  std::vector<Layer> layers;
  mutable std::vector<float> word_f32;  // input_embeddings()' widened copy of a 16-bit table
  mutable std::once_flag widen_once;
};

const float* BertModel::input_embeddings() const noexcept {
  const model::HeldTable& t = held_->word;
  if (t.type == kernels::WeightType::f32) return t.f32.data();
  std::call_once(held_->widen_once, [&] {
    held_->word_f32.resize(t.h16.size());
    model::widen_16(t.type, t.h16.data(), t.h16.size(), held_->word_f32.data());
  });
  return held_->word_f32.data();
}

BertModel BertModel::load(const std::filesystem::path& dir, WeightDType dtype) {
  const std::string cfg_file = (dir / "config.json").string();
  std::ifstream in(dir / "config.json", std::ios::binary);
  if (!in) throw Error(cfg_file + ": cannot open (a model folder needs config.json and model.safetensors)");
  std::ostringstream ss;
  ss << in.rdbuf();
  BertModel m;
  m.cfg_ = BertConfig::parse(ss.str(), cfg_file);
  m.name_ = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  const BertConfig& c = m.cfg_;
  m.shape_.model_type = c.model_type;
  const EncoderNames& nm = c.model_type == "distilbert" ? kDistilBertNames : kBertNames;
  m.shape_.vocab_size = c.vocab_size, m.shape_.hidden = c.hidden, m.shape_.layers = c.layers;
  m.shape_.heads = m.shape_.kv_heads = c.heads, m.shape_.head_dim = c.head_dim();
  m.shape_.max_positions = c.max_positions;
  // Tensor by tensor (FolderWeights gives each one's pages back once read): a bf16 folder is
  // never widened whole, at most one matrix at a time in f32 before it is packed.
  const model::FolderWeights st(dir);
  std::string prefix;
  const std::string word = std::string(nm.word) + ".weight";
  std::string own = nm.prefix;
  if (c.model_type == "roberta" || c.model_type == "xlm-roberta") own = "roberta.";
  if (!st.contains(word) && st.contains(own + word)) prefix = own;
  const std::uint64_t D = c.hidden, I = c.intermediate;
  auto read = [&](const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula) {
    return st.read(prefix + name, std::move(dims), formula);
  };
  auto table = [&](const std::string& name, std::uint64_t rows, const std::string& formula) {
    return model::HeldTable::read(st, prefix + name, rows, D, formula, dtype);
  };

  const std::string n = std::string(nm.layer);
  const auto w_ = [&](const char* s) { return std::string(s) + ".weight"; };
  const auto b_ = [&](const char* s) { return std::string(s) + ".bias"; };
  const std::uint64_t rows = c.max_positions + (c.roberta_positions ? c.padding_idx + 1 : 0);
  auto w = std::make_shared<Weights>();
  w->word = table(w_(nm.word), c.vocab_size, "[vocab_size, hidden_size]");
  w->pos = table(w_(nm.pos), rows, "[max_position_embeddings, hidden_size]");
  if (nm.type) w->type = table(w_(nm.type), c.type_vocab_size, "[type_vocab_size, hidden_size]");
  w->emb_g = read(w_(nm.emb_ln), {D}, "[hidden_size]");
  w->emb_b = read(b_(nm.emb_ln), {D}, "[hidden_size]");
  const std::string DD = "[hidden_size, hidden_size]", Dv = "[hidden_size]";
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = n + std::to_string(l) + ".";
    Weights::Layer L;
    // Q | K | V stacked as one [3D][D] linear: in 16 bits packed part by part (no f32 copy of all three).
    std::vector<float> bqkv;
    const auto qkv = model::hold_type(dtype, st, {prefix + p + w_(nm.q), prefix + p + w_(nm.k), prefix + p + w_(nm.v)});
    if (qkv == kernels::WeightType::f32) {
      std::vector<float> wqkv;
      wqkv.reserve(3 * D * D);
      for (const char* s : {nm.q, nm.k, nm.v}) {
        const auto part = read(p + w_(s), {D, D}, DD);
        wqkv.insert(wqkv.end(), part.begin(), part.end());
      }
      for (const char* s : {nm.q, nm.k, nm.v}) {
        const auto b = read(p + b_(s), {D}, Dv);
        bqkv.insert(bqkv.end(), b.begin(), b.end());
      }
      L.qkv = pack_linear(wqkv, bqkv, 3 * D, D, qkv);
    } else {
      L.qkv = kernels::alloc_linear_bf16(3 * D, D, qkv);
      std::size_t row0 = 0;
      for (const char* s : {nm.q, nm.k, nm.v}) {
        const auto part = read(p + w_(s), {D, D}, DD);
        const auto b = read(p + b_(s), {D}, Dv);
        kernels::pack_rows_bf16(L.qkv, part.data(), b.data(), row0, D);
        row0 += D;
      }
    }
    auto linear = [&](const char* s, std::uint64_t out, std::uint64_t in, const std::string& formula) {
      const auto t = model::hold_type(dtype, st, {prefix + p + w_(s)});
      const auto wt = read(p + w_(s), {out, in}, "[" + formula + "]");
      return pack_linear(wt, read(p + b_(s), {out}, "[" + formula.substr(0, formula.find(',')) + "]"), out, in, t);
    };
    L.out = linear(nm.o, D, D, "hidden_size, hidden_size");
    L.ffn1 = linear(nm.ffn1, I, D, "intermediate_size, hidden_size");
    L.ffn2 = linear(nm.ffn2, D, I, "hidden_size, intermediate_size");
    L.ln1_g = read(p + w_(nm.ln1), {D}, Dv);
    L.ln1_b = read(p + b_(nm.ln1), {D}, Dv);
    L.ln2_g = read(p + w_(nm.ln2), {D}, Dv);
    L.ln2_b = read(p + b_(nm.ln2), {D}, Dv);
    w->layers.push_back(std::move(L));
    model::give_back_freed();
  }
  model::MemoryCount count;
  for (const Weights::Layer& L : w->layers) {
    for (const auto* p : {&L.qkv, &L.out, &L.ffn1, &L.ffn2}) count.add(*p);
    count.add_bytes((L.ln1_g.size() + L.ln1_b.size() + L.ln2_g.size() + L.ln2_b.size()) * sizeof(float));
  }
  count.add_bytes(w->word.bytes() + w->pos.bytes() + w->type.bytes() + (w->emb_g.size() + w->emb_b.size()) * sizeof(float));
  m.held_ = std::move(w);
  m.memory_ = count.done(st.data_bytes());
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
  model::run_groups(*group_pool_, token_offset, n_reports, s,
                    [&](std::size_t r0, std::size_t r1, std::size_t, ModelScratch& gs) {
                      run_group(ids, token_offset, r0, r1, axes, axis, level, layers, hidden, all_hidden, total,
                                directions, gs);
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
  s.inter.resize(T * I);
  float* x = s.x.data();
  const Weights& wt = *held_;
  s.clock.to(ForwardPart::embed);
  // Embeddings: word + position (within the report; RoBERTa's after padding_idx) + token type 0
  // (none for DistilBERT), then LayerNorm. A 16-bit table's rows are widened (exactly) into h1.
  s.h1.resize(3 * D);
  float* buf = s.h1.data();
  const float* type = wt.type.empty() ? nullptr : wt.type.row(0, buf + 2 * D);
  for (std::size_t r = r0; r < r1; ++r) {
    std::size_t seen = 0;  // RoBERTa: non-padding tokens so far
    for (std::uint64_t t = token_offset[r]; t < token_offset[r + 1]; ++t) {
      float* row = x + (t - t0) * D;
      const float* w = wt.word.row(ids[t], buf);
      std::size_t pos = t - token_offset[r];
      if (cfg_.roberta_positions) pos = ids[t] == cfg_.padding_idx ? cfg_.padding_idx : cfg_.padding_idx + 1 + seen++;
      const float* p = wt.pos.row(pos, buf + D);
      if (!type)
        for (std::size_t i = 0; i < D; ++i) row[i] = w[i] + p[i];
      else
        for (std::size_t i = 0; i < D; ++i) row[i] = w[i] + p[i] + type[i];
    }
  }
  s.h1.resize(T * D);
  layer_norm_rows(level, x, nullptr, T, D, wt.emb_g.data(), wt.emb_b.data(), cfg_.layer_norm_eps);
  if (all_hidden) std::memcpy(all_hidden + (t0 - base) * D, x, T * D * sizeof(float));

  for (std::size_t l = 0; l < wt.layers.size(); ++l) {
    const Weights::Layer& L = wt.layers[l];
    const BertLayerOut& o = layers[l];
    // Each product also prefetches the first panel of the next one (weights come from L3/DRAM);
    // the last layer's, layer 0's for the next group of reports. (f32 products only.)
    const kernels::PackedLinear& next_qkv = wt.layers[(l + 1) % wt.layers.size()].qkv;
    s.clock.to(ForwardPart::products);
    kernels::project_rows(level, x, D, T, D, L.qkv, 3 * D, s.qkv.data(), 3 * D, &L.out);
    s.clock.to(ForwardPart::attention);
    model::attend_reports(in, token_offset, r0, r1, s.qkv.data(), axis, o, level, dh, s.ctx.data(), s,
                          {directions, l, x, D});
    s.clock.to(ForwardPart::products);
    kernels::project_rows(level, s.ctx.data(), D, T, D, L.out, D, s.h1.data(), D, &L.ffn1);
    s.clock.to(ForwardPart::norm);  // (the residual add fused)
    layer_norm_rows(level, s.h1.data(), x, T, D, L.ln1_g.data(), L.ln1_b.data(), cfg_.layer_norm_eps);
    s.clock.to(ForwardPart::products);  // (GELU fused into the first FFN product)
    kernels::project_rows(level, s.h1.data(), D, T, D, L.ffn1, I, s.inter.data(), I, &L.ffn2, true);
    kernels::project_rows(level, s.inter.data(), I, T, I, L.ffn2, D, x, D, &next_qkv);
    s.clock.to(ForwardPart::norm);
    layer_norm_rows(level, x, s.h1.data(), T, D, L.ln2_g.data(), L.ln2_b.data(), cfg_.layer_norm_eps);
    s.clock.to(ForwardPart::residual);
    if (all_hidden) std::memcpy(all_hidden + ((l + 1) * total_tokens + (t0 - base)) * D, x, T * D * sizeof(float));
  }
  if (hidden) std::memcpy(hidden + (t0 - base) * D, x, T * D * sizeof(float));
}

}  // namespace headsep
