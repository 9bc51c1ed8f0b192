// The one decoder every family row feeds (model/family.hpp): tensors found by the row's names,
// fused layouts split into Q, K, V at load, then per layer (Decoder's loop, decoder.cpp):
//   h = n_attn_in(x); [Q | K | V] = h W + b; q/k norms; RoPE; Q × query_scale; K copied per query head
//   a = n_attn_out(ctx W_o + b_o)
//   sequential: x += a; x += n_mlp_out(mlp(n_mlp_in(x)))     parallel: x = (mlp(n_mlp_in(x)) + a) + x
// with a null norm the identity, mlp = down(act(gate) · up) or proj(act(fc)). GPT-2, Llama,
// Mistral and Qwen2 run this with the same products and steps their own files had.
#include <algorithm>
#include <bit>
#include <cmath>
#include <mutex>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/packed_linear.hpp"
#include "kernels/sigmoid.hpp"  // times_sigmoid: the shared expert's gate
#include "model/family.hpp"

namespace headsep::model {
namespace {

class TableDecoder final : public Decoder {
 public:
  TableDecoder(const std::filesystem::path& dir, DecoderSpec spec, WeightDType dtype);
  std::vector<std::string> recognised() const override { return spec_.notes; }
  WeightMemory weight_memory() const override { return memory_; }
  /// (A bf16/f16 table is widened here, once, when first asked: only the semantic axes read it.)
  const float* input_embeddings() const noexcept override {
    if (!embed16_.empty()) std::call_once(widen_once_, [this] {
      embed_.resize(embed16_.size());
      widen_row(embed16_.data(), embed16_.size(), embed_.data());
    });
    return embed_.data();
  }

 private:
  struct Norm {
    std::vector<float> g, b;  // g already 1 + w for Gemma's; b only for LayerNorm
    bool on() const noexcept { return !g.empty(); }
  };
  struct Layer {
    Norm attn_in, attn_out, mlp_in, mlp_out;
    std::vector<float> q_norm, k_norm;  // per head [dh], or the full width ([H·dh], [KV·dh])
    kernels::PackedLinear qkv, out, up, down;  // up: [gate | up] when gated
    kernels::PackedLinear router;              // routed experts: [experts] logits
    std::vector<kernels::PackedLinear> expert_up, expert_down;
    kernels::PackedLinear shared_up, shared_down, shared_gate;  // Qwen2-MoE's shared expert, its [1] gate
    bool moe = false;  // routed experts here (else the dense MLP)
  };
  void embed(const Group& g, float* x, ModelScratch& s) const override;
  void project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const override;
  void finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const override;
  void final_norm(float* x, std::size_t rows) const override { norm(SimdLevel::scalar, final_, x, x, rows); }
  double layer_macs() const noexcept override {  // (averaged over the layers where they differ)
    const double D = shape_.hidden, I = intermediate_, Q = double(shape_.heads) * shape_.head_dim;
    const double dense = (spec_.family->gated ? 3 : 2) * D * I;
    const double moe = D * spec_.experts + spec_.experts_per_token * 3 * D * double(spec_.expert_intermediate) +
                       (spec_.shared_intermediate ? 3 * D * double(spec_.shared_intermediate) + D : 0.0);
    double mlp = 0;
    for (const Layer& L : layers_) mlp += L.moe ? moe : dense;
    return D * (Q + 2 * double(kv_width())) + Q * D + mlp / std::max<double>(1, double(layers_.size()));
  }
  void load(const FolderWeights& w, WeightDType dtype);
  void norm(SimdLevel level, const Norm& n, const float* in, float* out, std::size_t rows) const;
  void mlp(const Group& g, const Layer& L, const float* in, float* out, ModelScratch& s) const;
  void experts(const Group& g, const Layer& L, const float* in, float* out, ModelScratch& s) const;
  /// y [n][hidden] = down(silu(gate) · up) of x [n][hidden], `up` = [gate | up] of `width` each: an expert.
  void swiglu_mlp(const Group& g, const kernels::PackedLinear& up, const kernels::PackedLinear& down, const float* x,
                  std::size_t n, std::size_t width, float* y, ModelScratch& s) const;
  void qk_norms(const Layer& L, float* qkv, std::size_t T) const;
  void rope(std::size_t l, float* qkv, std::size_t T, const ModelScratch& s) const;
  void copy_kv_heads(float* qkv, std::size_t T) const;

  DecoderSpec spec_;
  mutable std::vector<float> embed_;  // f32 table, or (bf16 held) input_embeddings()'s widened copy
  std::vector<std::uint16_t> embed16_;  // the table as bf16 or f16 (embed_type_), as the products are held
  kernels::WeightType embed_type_ = kernels::WeightType::f32;
  void widen_row(const std::uint16_t* in, std::size_t n, float* out) const noexcept { widen_16(embed_type_, in, n, out); }
  mutable std::once_flag widen_once_;
  std::vector<float> positions_;
  Norm final_;
  std::vector<Layer> layers_;
  WeightMemory memory_;
};

TableDecoder::TableDecoder(const std::filesystem::path& dir, DecoderSpec spec, WeightDType dtype) : spec_(std::move(spec)) {
  shape_ = spec_.shape;
  intermediate_ = spec_.intermediate;
  name_ = folder_name(dir);
  const FolderWeights w(dir);
  load(w, dtype);
  set_heads();
  MemoryCount count;
  for (const Layer& L : layers_) {
    for (const auto* p : {&L.qkv, &L.out, &L.up, &L.down, &L.router, &L.shared_up, &L.shared_down, &L.shared_gate})
      if (*p) count.add(*p);
    for (const auto& p : L.expert_up) count.add(p);
    for (const auto& p : L.expert_down) count.add(p);
    for (const auto* n : {&L.attn_in, &L.attn_out, &L.mlp_in, &L.mlp_out})
      count.add_bytes((n->g.size() + n->b.size()) * sizeof(float));
    count.add_bytes((L.q_norm.size() + L.k_norm.size()) * sizeof(float));
  }
  count.add_bytes((embed_.size() + positions_.size() + final_.g.size() + final_.b.size()) * sizeof(float) +
                  embed16_.size() * sizeof(std::uint16_t));
  memory_ = count.done(w.data_bytes());
}

/// The tensors of one folder through the family's names.
class Reader {
 public:
  Reader(const FolderWeights& w, const Family& f, WeightDType dtype) : w_(w), f_(f), dtype_(dtype) {
    const std::string e = std::string(f.embed) + ".weight";
    prefix_ = !w.contains(f.prefix + e) && w.contains(e) ? "" : f.prefix;  // a base model's save has none
  }
  std::vector<float> read(const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula) const {
    return w_.read(prefix_ + name, std::move(dims), formula);
  }
  /// How a table (the embeddings) is held: as a product of it alone would be.
  kernels::WeightType table_type(const std::string& name) const { return choose(w_.dtype(prefix_ + name), false); }
  std::vector<std::uint16_t> read_16(const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula,
                                     kernels::WeightType type) const {
    return w_.read_16(prefix_ + name, std::move(dims), formula, type == kernels::WeightType::f16 ? DType::F16 : DType::BF16);
  }
  /// nn.Linear `name` as [out][in] (Conv1D's [in][out] transposed); its bias when `bias`.
  std::vector<float> linear(const std::string& name, std::uint64_t out, std::uint64_t in, const std::string& formula,
                            bool bias, std::vector<float>* b) const {
    std::vector<float> w;
    note(w_.dtype(prefix_ + name + ".weight"));
    if (f_.qkv_layout == QkvLayout::conv1d) {
      const auto t = read(name + ".weight", {in, out}, "[" + formula + "]ᵀ");
      w.resize(t.size());
      for (std::size_t o = 0; o < out; ++o)
        for (std::size_t i = 0; i < in; ++i) w[o * in + i] = t[i * out + o];
    } else {
      w = read(name + ".weight", {out, in}, "[" + formula + "]");
    }
    if (bias && b) *b = read(name + ".bias", {out}, "[" + formula.substr(0, formula.find(',')) + "]");
    return w;
  }
  /// How to hold the product of nn.Linear weights `a` and `b` (before reading them).
  kernels::WeightType type_of(const std::string& a, const std::string& b) const {
    return hold_type(dtype_, w_, {prefix_ + a + ".weight", prefix_ + b + ".weight"});
  }
  /// How to hold the product of the weights linear() read since the last call: auto keeps bf16
  /// when all of them were BF16 in the folder, else f32.
  kernels::WeightType take_type() const {
    const kernels::WeightType t = choose(common_, mixed_);
    seen_ = mixed_ = false;
    return t;
  }

 private:
  const FolderWeights& w_;
  const Family& f_;
  WeightDType dtype_;
  std::string prefix_;
  mutable DType common_ = DType::F32;  // the dtype of the weights linear() read since take_type()
  mutable bool seen_ = false, mixed_ = false;
  void note(DType d) const {
    if (seen_ && d != common_) mixed_ = true;
    common_ = seen_ ? common_ : d, seen_ = true;
  }
  /// --dtype bf16: bf16; f32: f32; auto: a product whose every tensor is BF16 (F16) in bf16 (f16).
  kernels::WeightType choose(DType common, bool mixed) const { return hold_type(dtype_, common, mixed); }
};

/// Rows [first, first + n) of a [rows][in] matrix (and of its bias, when there is one).
void take_rows(const std::vector<float>& w, const std::vector<float>& b, std::size_t first, std::size_t n, std::size_t in,
               std::vector<float>& wo, std::vector<float>& bo) {
  wo.insert(wo.end(), w.begin() + first * in, w.begin() + (first + n) * in);
  if (!b.empty()) bo.insert(bo.end(), b.begin() + first, b.begin() + first + n);
  else bo.insert(bo.end(), n, 0.0f);
}

void TableDecoder::load(const FolderWeights& fw, WeightDType dtype) {
  const Family& f = *spec_.family;
  const ModelShape& c = shape_;
  const Reader r(fw, f, dtype);
  const std::uint64_t D = c.hidden, I = intermediate_, dh = c.head_dim, H = c.heads, Q = H * dh, KV = kv_width();
  const std::string hid = f.hidden, inter = f.intermediate ? f.intermediate : "intermediate",
                    qw = std::string(f.heads) + "*head_dim", kvw = std::string(f.kv_heads ? f.kv_heads : f.heads) + "*head_dim";
  auto read_norm = [&](const char* name, std::uint64_t n, const std::string& formula) {
    Norm out;
    if (!name) return out;
    out.g = r.read(std::string(name) + ".weight", {n}, formula);
    if (f.norm == NormKind::layer_norm) out.b = r.read(std::string(name) + ".bias", {n}, formula);
    if (f.norm == NormKind::rms_one_plus)
      for (float& v : out.g) v = 1.0f + v;  // as Gemma's 1.0 + weight.float(), in f32
    return out;
  };
  // The table in the products' dtype (a bf16 folder's: its bytes as they are, no f32 copy).
  const std::string emb = std::string(f.embed) + ".weight", emb_formula = "[vocab_size, " + hid + "]";
  embed_type_ = r.table_type(emb);
  if (embed_type_ != kernels::WeightType::f32) embed16_ = r.read_16(emb, {c.vocab_size, D}, emb_formula, embed_type_);
  else embed_ = r.read(emb, {c.vocab_size, D}, emb_formula);
  if (f.learned_positions)
    positions_ = r.read(std::string(f.learned_positions) + ".weight", {c.max_positions, D}, "[" + std::string(f.positions) + ", " + hid + "]");
  final_ = read_norm(f.final_norm, D, "[" + hid + "]");
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = f.layer + std::to_string(l) + ".";
    Layer L;
    std::vector<float> wq, wk, wv, bq, bk, bv;
    if (f.qkv_layout == QkvLayout::separate) {
      wq = r.linear(p + f.q, Q, D, qw + ", " + hid, spec_.qkv_bias, &bq);
      wk = r.linear(p + f.k, KV, D, kvw + ", " + hid, spec_.qkv_bias, &bk);
      wv = r.linear(p + f.v, KV, D, kvw + ", " + hid, spec_.qkv_bias, &bv);
    } else {
      std::vector<float> b;
      const auto w = r.linear(p + f.q, Q + 2 * KV, D, qw + "+2*" + kvw + ", " + hid, spec_.qkv_bias, &b);
      if (f.qkv_layout == QkvLayout::per_head) {  // [H][q | k | v] (H = KV here)
        for (std::uint64_t h = 0; h < H; ++h) {
          take_rows(w, b, h * 3 * dh, dh, D, wq, bq);
          take_rows(w, b, h * 3 * dh + dh, dh, D, wk, bk);
          take_rows(w, b, h * 3 * dh + 2 * dh, dh, D, wv, bv);
        }
      } else {  // [Q | K | V]
        take_rows(w, b, 0, Q, D, wq, bq);
        take_rows(w, b, Q, KV, D, wk, bk);
        take_rows(w, b, Q + KV, KV, D, wv, bv);
      }
    }
    if (bq.empty()) bq.assign(Q, 0.0f), bk.assign(KV, 0.0f), bv.assign(KV, 0.0f);
    // Rows [Q | K | V]: K once per key/value head (project() copies it per query head after RoPE).
    std::vector<float> wqkv(wq), bqkv(bq);
    wqkv.insert(wqkv.end(), wk.begin(), wk.end());
    bqkv.insert(bqkv.end(), bk.begin(), bk.end());
    wqkv.insert(wqkv.end(), wv.begin(), wv.end());
    bqkv.insert(bqkv.end(), bv.begin(), bv.end());
    wq.clear(), wk.clear(), wv.clear(), wq.shrink_to_fit(), wk.shrink_to_fit(), wv.shrink_to_fit();
    L.qkv = pack_linear(wqkv, bqkv, Q + 2 * KV, D, r.take_type());
    wqkv = {};
    // (Each matrix read into a variable before take_type(): argument order is unspecified.)
    std::vector<float> bo, bu, bd;
    const auto wo = r.linear(p + f.o, D, Q, hid + ", " + qw, spec_.o_bias, &bo);
    L.out = pack_linear(wo, bo, D, Q, r.take_type());
    L.moe = !spec_.moe_layer.empty() && spec_.moe_layer[l];
    if (L.moe) {
      const std::uint64_t E = spec_.experts, IE = spec_.expert_intermediate;
      const std::string ie = f.moe_qwen ? "moe_intermediate_size" : inter;
      L.router = pack_linear(r.read(p + f.moe_router + ".weight", {E, D}, "[" + std::string(f.moe_count) + ", " + hid + "]"),
                             {}, E, D, kernels::WeightType::f32);  // (tiny: the logits stay f32)
      // A gated MLP [gate | up] and down, bias-free: each expert, and the shared one.
      auto gated = [&](const std::string& x, const char* gate, const char* up, const char* down, std::uint64_t width,
                       const std::string& formula, kernels::PackedLinear& pu, kernels::PackedLinear& pd) {
        auto gu = r.linear(x + gate, width, D, formula + ", " + hid, false, nullptr);
        const auto u = r.linear(x + up, width, D, formula + ", " + hid, false, nullptr);
        gu.insert(gu.end(), u.begin(), u.end());
        pu = pack_linear(gu, {}, 2 * width, D, r.take_type());
        const auto dn = r.linear(x + down, D, width, hid + ", " + formula, false, nullptr);
        pd = pack_linear(dn, {}, D, width, r.take_type());
      };
      L.expert_up.resize(E), L.expert_down.resize(E);
      for (std::uint32_t e = 0; e < E; ++e)
        gated(p + f.moe_experts + std::to_string(e), f.moe_gate, f.moe_up, f.moe_down, IE, ie, L.expert_up[e],
              L.expert_down[e]);
      if (spec_.shared_intermediate) {
        gated(p + f.moe_shared, "gate_proj", "up_proj", "down_proj", spec_.shared_intermediate,
              "shared_expert_intermediate_size", L.shared_up, L.shared_down);
        L.shared_gate = pack_linear(r.read(p + f.moe_shared_gate + ".weight", {1, D}, "[1, " + hid + "]"), {}, 1, D,
                                    kernels::WeightType::f32);
      }
    } else if (!f.gated) {
      const auto up = r.linear(p + f.up, I, D, inter + ", " + hid, spec_.mlp_bias, &bu);
      L.up = pack_linear(up, bu, I, D, r.take_type());
    } else if (f.gate_up) {
      const auto gu = r.linear(p + f.gate_up, 2 * I, D, "2*" + inter + ", " + hid, spec_.mlp_bias, &bu);
      L.up = pack_linear(gu, bu, 2 * I, D, r.take_type());
    } else if (const auto t = r.type_of(p + f.gate, p + f.up); t != kernels::WeightType::f32) {
      // [gate | up] packed half by half: no f32 copy of both (the load's largest transient).
      std::vector<float> bg;
      L.up = kernels::alloc_linear_bf16(2 * I, D, t);
      {
        const auto gate = r.linear(p + f.gate, I, D, inter + ", " + hid, spec_.mlp_bias, &bg);
        kernels::pack_rows_bf16(L.up, gate.data(), bg.empty() ? nullptr : bg.data(), 0, I);
      }
      const auto up = r.linear(p + f.up, I, D, inter + ", " + hid, spec_.mlp_bias, &bu);
      kernels::pack_rows_bf16(L.up, up.data(), bu.empty() ? nullptr : bu.data(), I, I);
      r.take_type();
    } else {
      std::vector<float> bg;
      auto gu = r.linear(p + f.gate, I, D, inter + ", " + hid, spec_.mlp_bias, &bg);
      {
        const auto up = r.linear(p + f.up, I, D, inter + ", " + hid, spec_.mlp_bias, &bu);
        gu.insert(gu.end(), up.begin(), up.end());
      }
      bg.insert(bg.end(), bu.begin(), bu.end());
      L.up = pack_linear(gu, bg, 2 * I, D, r.take_type());
    }
    if (f.down && !L.moe) {
      const auto down = r.linear(p + f.down, D, I, hid + ", " + inter, spec_.mlp_bias, &bd);
      L.down = pack_linear(down, bd, D, I, r.take_type());
    }
    L.attn_in = read_norm(f.attn_in_norm ? (p + f.attn_in_norm).c_str() : nullptr, D, "[" + hid + "]");
    L.attn_out = read_norm(f.attn_out_norm ? (p + f.attn_out_norm).c_str() : nullptr, D, "[" + hid + "]");
    L.mlp_in = read_norm(f.mlp_in_norm ? (p + f.mlp_in_norm).c_str() : nullptr, D, "[" + hid + "]");
    L.mlp_out = read_norm(f.mlp_out_norm ? (p + f.mlp_out_norm).c_str() : nullptr, D, "[" + hid + "]");
    if (f.q_norm) {
      const bool full = f.qk_norm_full_width;
      L.q_norm = read_norm((p + f.q_norm).c_str(), full ? Q : dh, full ? "[" + qw + "]" : "[head_dim]").g;
      L.k_norm = read_norm((p + f.k_norm).c_str(), full ? KV : dh, full ? "[" + kvw + "]" : "[head_dim]").g;
    }
    layers_.push_back(std::move(L));
  }
}

void TableDecoder::norm(SimdLevel level, const Norm& n, const float* in, float* out, std::size_t rows) const {
  const std::size_t D = shape_.hidden;
  if (spec_.family->norm == NormKind::layer_norm) {
    if (in != out) std::copy(in, in + rows * D, out);
    layer_norm_rows(level, out, nullptr, rows, D, n.g.data(), n.b.data(), spec_.eps);
  } else {
    rms_norm_rows(in, out, rows, D, n.g.data(), spec_.eps);
  }
}

// The embeddings (× embed_scale, + learned positions), and the group's rotary cos/sin per (table,
// token, pair) for every layer: the angle position · inv_freq in f32, as transformers computes it.
void TableDecoder::embed(const Group& g, float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, half = spec_.rotary_dims / 2, tables = spec_.rope.size();
  const std::uint64_t t0 = g.token_offset[g.r0];
  s.rope.resize(tables * g.T * half * 2);
  const float scale = spec_.embed_scale;
  for (std::size_t r = g.r0; r < g.r1; ++r)
    for (std::uint64_t t = g.token_offset[r]; t < g.token_offset[r + 1]; ++t) {
      float* row = x + (t - t0) * D;
      const float* e = row;
      if (embed16_.empty()) e = embed_.data() + std::size_t(g.ids[t]) * D;
      else
        widen_row(embed16_.data() + std::size_t(g.ids[t]) * D, D, row);
      const std::size_t pos = t - g.token_offset[r];
      if (!positions_.empty()) {
        const float* p = positions_.data() + pos * D;
        for (std::size_t i = 0; i < D; ++i) row[i] = e[i] + p[i];
      } else if (scale != 1.0f) {
        for (std::size_t i = 0; i < D; ++i) row[i] = e[i] * scale;
      } else if (e != row) {
        std::copy(e, e + D, row);
      }
      for (std::size_t k = 0; k < tables; ++k) {
        const RopeTable& rt = spec_.rope[k];
        float* cs = s.rope.data() + (k * g.T + (t - t0)) * half * 2;
        const bool long_report = rt.long_after && g.token_offset[r + 1] - g.token_offset[r] > rt.long_after;
        const float* inv = (long_report ? rt.long_inv_freq : rt.inv_freq).data();
        for (std::size_t i = 0; i < half; ++i) {
          const float a = static_cast<float>(pos) * inv[i];
          cs[2 * i] = static_cast<float>(std::cos(double(a)));
          cs[2 * i + 1] = static_cast<float>(std::sin(double(a)));
          if (rt.cos_sin_scale != 1.0f) cs[2 * i] *= rt.cos_sin_scale, cs[2 * i + 1] *= rt.cos_sin_scale;
        }
      }
    }
}

/// RMS norms of Q and K in place (K not yet copied: KV·dh wide): per head (dh-wide blocks, one
/// weight [dh]) or over each one's full width.
void TableDecoder::qk_norms(const Layer& L, float* qkv, std::size_t T) const {
  const std::size_t ld = qkv_ld(), dh = shape_.head_dim, Q = std::size_t(shape_.heads) * dh;
  const bool full = spec_.family->qk_norm_full_width;
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t part = 0; part < 2; ++part) {
      const std::size_t width = part ? kv_width() : Q, w = full ? width : dh;
      for (std::size_t b = 0; b < width / w; ++b) {
        float* v = qkv + t * ld + part * Q + b * w;
        rms_norm_rows(v, v, 1, w, (part ? L.k_norm : L.q_norm).data(), spec_.eps);
      }
    }
}

/// RoPE (rotate_half: pairs (i, i + rotary_dims/2); dims past rotary_dims pass through) on every
/// query head and every key/value head's K, before K is copied: a copy would rotate the same.
void TableDecoder::rope(std::size_t l, float* qkv, std::size_t T, const ModelScratch& s) const {
  const std::size_t ld = qkv_ld(), dh = shape_.head_dim, half = spec_.rotary_dims / 2;
  if (!half) return;
  const std::size_t blocks = shape_.heads + shape_.kv_heads;  // Q's heads, then K's right after them
  const float* table = s.rope.data() + (spec_.rope.empty() ? 0 : spec_.rope_of[l]) * T * half * 2;
  for (std::size_t t = 0; t < T; ++t) {
    const float* cs = table + t * half * 2;
    for (std::size_t b = 0; b < blocks; ++b) {
      float* v = qkv + t * ld + b * dh;
      for (std::size_t i = 0; i < half; ++i) {
        const float x1 = v[i], x2 = v[i + half], c = cs[2 * i], sn = cs[2 * i + 1];
        v[i] = x1 * c - x2 * sn;
        v[i + half] = x2 * c + x1 * sn;
      }
    }
  }
}

/// Rows [Q | K (KV·dh) | V (KV·dh) | ...] → the kernel's [Q | K of each query head | V]: V moved
/// to its place first (it lies inside the copies' span: KV ≤ H/2 when KV < H), then the copies
/// written from the last query head down, so no key/value head is overwritten before its copies
/// are made (head h's source block kv(h) ≤ h - 1). Projecting K once and copying it here costs
/// a row copy instead of (H - KV)·dh more product columns and their RoPE.
void TableDecoder::copy_kv_heads(float* qkv, std::size_t T) const {
  const std::size_t H = shape_.heads, dh = shape_.head_dim, Q = H * dh, KV = kv_width(), ld = qkv_ld();
  if (shape_.kv_heads == H) return;  // the layout already is the kernel's
  for (std::size_t t = 0; t < T; ++t) {
    float* row = qkv + t * ld;
    std::copy_n(row + Q + KV, KV, row + 2 * Q);
    for (std::uint32_t h = shape_.heads; h >= 1; --h)
      std::copy_n(row + Q + shape_.kv_head(h) * dh, dh, row + Q + (h - 1) * dh);
  }
}

void TableDecoder::project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T, ld = qkv_ld(), dh = shape_.head_dim;
  const Layer& L = layers_[l];
  const float* in = x;
  if (L.attn_in.on()) {
    s.clock.to(ForwardPart::norm);
    s.h1.resize(T * D);
    norm(g.level, L.attn_in, x, s.h1.data(), T);
    in = s.h1.data();
  }
  s.clock.to(ForwardPart::products);
  kernels::project_rows(g.level, in, D, T, D, L.qkv, std::size_t(shape_.heads) * dh + 2 * kv_width(),
                        s.qkv.data(), ld);
  s.clock.to(ForwardPart::norm);
  if (!L.q_norm.empty()) qk_norms(L, s.qkv.data(), T);
  s.clock.to(ForwardPart::rope);
  rope(l, s.qkv.data(), T, s);
  // scores / √query_pre_attn_scalar from the kernel's 1/√head_dim: Q scaled (the baseline's too).
  if (spec_.query_scale != 1.0f)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t i = 0; i < std::size_t(shape_.heads) * dh; ++i) s.qkv[t * ld + i] *= spec_.query_scale;
  copy_kv_heads(s.qkv.data(), T);
}

// Routed experts, as transformers' Mixtral and Qwen2-MoE: router logits, softmax in f32, the top k
// (ties to the lower index), their weights renormalised to sum 1 (Mixtral; Qwen2-MoE when
// norm_topk_prob); out = Σ_e w_e · down_e(silu(gate_e) · up_e), experts in index order from 0, each
// over the tokens routed to it; then Qwen2-MoE's shared expert, + sigmoid(x · g) · shared(x).
void TableDecoder::experts(const Group& g, const Layer& L, const float* in, float* out, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, I = spec_.expert_intermediate, T = g.T, E = spec_.experts,
                    K = spec_.experts_per_token;
  s.clock.to(ForwardPart::products);  // (the routing and its copies too)
  std::vector<float> logits(T * E), xin(in, in + T * D), rows, ys;
  kernels::project_rows(g.level, xin.data(), D, T, D, L.router, E, logits.data(), E);
  std::vector<std::vector<std::pair<std::size_t, float>>> routed(E);  // per expert: (token, weight)
  std::vector<std::size_t> order(E);
  for (std::size_t t = 0; t < T; ++t) {
    float* p = logits.data() + t * E;
    const float mx = *std::max_element(p, p + E);
    float z = 0;
    for (std::size_t e = 0; e < E; ++e) z += p[e] = std::exp(p[e] - mx);
    for (std::size_t e = 0; e < E; ++e) p[e] /= z;
    for (std::size_t e = 0; e < E; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](std::size_t a, std::size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (std::size_t k = 0; k < K; ++k) sum += p[order[k]];
    if (!spec_.norm_topk) sum = 1.0f;
    for (std::size_t k = 0; k < K; ++k) routed[order[k]].emplace_back(t, p[order[k]] / sum);
  }
  std::fill(out, out + T * D, 0.0f);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t n = routed[e].size();
    if (!n) continue;
    rows.resize(n * D);
    for (std::size_t i = 0; i < n; ++i) std::copy_n(xin.data() + routed[e][i].first * D, D, rows.data() + i * D);
    ys.resize(n * D);
    swiglu_mlp(g, L.expert_up[e], L.expert_down[e], rows.data(), n, I, ys.data(), s);
    for (std::size_t i = 0; i < n; ++i) {
      float* o = out + routed[e][i].first * D;
      for (std::size_t d = 0; d < D; ++d) o[d] += ys[i * D + d] * routed[e][i].second;
    }
  }
  if (!L.shared_up) return;
  std::vector<float> gate(T);
  kernels::project_rows(g.level, xin.data(), D, T, D, L.shared_gate, 1, gate.data(), 1);
  ys.resize(T * D);
  swiglu_mlp(g, L.shared_up, L.shared_down, xin.data(), T, spec_.shared_intermediate, ys.data(), s);
  for (std::size_t t = 0; t < T; ++t) {
    const float w = kernels::times_sigmoid(1.0f, gate[t]);
    for (std::size_t d = 0; d < D; ++d) out[t * D + d] += ys[t * D + d] * w;
  }
}

void TableDecoder::swiglu_mlp(const Group& g, const kernels::PackedLinear& up, const kernels::PackedLinear& down,
                              const float* x, std::size_t n, std::size_t width, float* y, ModelScratch& s) const {
  const std::size_t D = shape_.hidden;
  s.inter.resize(n * 3 * width);
  float* gu = s.inter.data() + n * width;
  kernels::project_rows(g.level, x, D, n, D, up, 2 * width, gu, 2 * width);
  s.clock.to(ForwardPart::activation);
  swiglu_rows(gu, s.inter.data(), n, width);
  s.clock.to(ForwardPart::products);
  kernels::project_rows(g.level, s.inter.data(), width, n, width, down, D, y, D);
}

void TableDecoder::mlp(const Group& g, const Layer& L, const float* in, float* out, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, I = intermediate_, T = g.T;
  if (L.moe) return experts(g, L, in, out, s);
  s.clock.to(ForwardPart::products);
  if (!spec_.family->gated) {
    s.inter.resize(T * I);
    kernels::project_rows(g.level, in, D, T, D, L.up, I, s.inter.data(), I);
    s.clock.to(ForwardPart::activation);
    if (spec_.act == Activation::gelu_tanh) gelu_tanh_inplace(s.inter.data(), T * I);
    else gelu_inplace(s.inter.data(), T * I);  // (SiLU without a gate is refused at load)
  } else {
    s.inter.resize(T * 3 * I);
    float* gu = s.inter.data() + T * I;
    kernels::project_rows(g.level, in, D, T, D, L.up, 2 * I, gu, 2 * I);
    s.clock.to(ForwardPart::activation);
    if (spec_.act == Activation::silu) swiglu_rows(gu, s.inter.data(), T, I);
    else geglu_rows(spec_.act == Activation::gelu_tanh, gu, s.inter.data(), T, I);
  }
  s.clock.to(ForwardPart::products);
  kernels::project_rows(g.level, s.inter.data(), I, T, I, L.down, D, out, D);
}

void TableDecoder::finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T, Q = std::size_t(shape_.heads) * shape_.head_dim;
  const Layer& L = layers_[l];
  s.h1.resize(T * D);
  s.h2.resize(T * D);
  float* a = s.h1.data();
  float* m = s.h2.data();
  s.clock.to(ForwardPart::products);
  kernels::project_rows(g.level, s.ctx.data(), Q, T, Q, L.out, D, a, D);
  s.clock.to(ForwardPart::norm);
  if (L.attn_out.on()) norm(g.level, L.attn_out, a, a, T);
  if (spec_.parallel) {  // GPT-NeoX: mlp_output + attn_output + hidden_states
    mlp(g, L, L.mlp_in.on() ? (norm(g.level, L.mlp_in, x, m, T), m) : x, m, s);
    s.clock.to(ForwardPart::residual);
    for (std::size_t i = 0; i < T * D; ++i) x[i] = (m[i] + a[i]) + x[i];
    return;
  }
  s.clock.to(ForwardPart::residual);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += a[i];
  const float* in = x;
  s.clock.to(ForwardPart::norm);
  if (L.mlp_in.on()) norm(g.level, L.mlp_in, x, m, T), in = m;
  mlp(g, L, in, m, s);
  s.clock.to(ForwardPart::norm);
  if (L.mlp_out.on()) norm(g.level, L.mlp_out, m, m, T);
  s.clock.to(ForwardPart::residual);
  for (std::size_t i = 0; i < T * D; ++i) x[i] += m[i];
}

}  // namespace

std::unique_ptr<Architecture> load_table_decoder(const std::filesystem::path& dir, DecoderSpec spec, WeightDType dtype) {
  return std::make_unique<TableDecoder>(dir, std::move(spec), dtype);
}

}  // namespace headsep::model
