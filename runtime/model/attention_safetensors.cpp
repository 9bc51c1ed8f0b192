// load_attention_safetensors (safetensors.hpp): attention projections from a safetensors file,
// in the nn.MultiheadAttention layout or our per-head one. The loader first lists every tensor
// the layout wants with its expected shape and checks all of them (and that no other tensor sits
// under the prefix) before converting a single value.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headsep/safetensors.hpp"

namespace headsep {

namespace {

/// One tensor a layout wants: full name, expected shape, whether it must be there.
struct Want {
  std::string name;
  ShapeSpec shape;
  bool required = true;
};

/// Checks presence, shape and dtype of every wanted tensor, and that nothing else lives under
/// the prefix — all before any data is converted.
void check_layout(const SafeTensors& st, const std::vector<Want>& wants, const std::string& prefix,
                  std::string_view layout, std::string_view unexpected_hint) {
  // Names first: a misspelt or surplus tensor (a head too many) explains the shape errors it causes.
  std::set<std::string_view> known;
  for (const Want& w : wants) known.insert(w.name);
  for (const TensorInfo& t : st.tensors()) {
    if (t.name.compare(0, prefix.size(), prefix) != 0 || known.count(t.name)) continue;
    const std::string_view local = std::string_view(t.name).substr(prefix.size());
    if (local == "bias_k" || local == "bias_v")
      throw st.error(t.name, "add_bias_kv=True (bias_k, bias_v) is not supported");
    std::string m = "unexpected tensor (not part of the " + std::string(layout) + "; see docs/SAFETENSORS.md)";
    if (!unexpected_hint.empty()) m += "; " + std::string(unexpected_hint);
    throw st.error(t.name, m);
  }
  for (const Want& w : wants) {
    const TensorInfo* t = st.find(w.name);
    if (!t) {
      if (w.required) throw st.error(w.name, "missing (" + std::string(layout) + ")");
      continue;
    }
    if (t->shape != w.shape.dims)
      throw st.error(w.name, "shape " + shape_string(t->shape) + ", expected " + w.shape.formula + " = " +
                                 shape_string(w.shape.dims));
    if (!readable_as_f32(t->dtype))
      throw st.error(w.name, "dtype " + std::string(to_string(t->dtype)) + " cannot be read as f32 (F32, F16, BF16 and F64 can)");
  }
}

std::uint32_t to_dim(const SafeTensors& st, std::string_view tensor, std::string_view what, std::uint64_t v) {
  if (v == 0 || v > 0xffffffffu) throw st.error(tensor, std::string(what) + " = " + std::to_string(v) + " is out of range");
  return static_cast<std::uint32_t>(v);
}

/// The 2-D shape of a tensor used to infer dimensions, or an error naming the formula expected.
std::pair<std::uint64_t, std::uint64_t> dims2(const SafeTensors& st, const std::string& name, std::string_view formula) {
  const TensorInfo& t = st.at(name);
  if (t.shape.size() != 2)
    throw st.error(name, "shape " + shape_string(t.shape) + ", expected " + std::string(formula) + " (2 dims)");
  return {t.shape[0], t.shape[1]};
}

ShapeSpec spec(std::vector<std::uint64_t> dims, std::string formula) { return {std::move(dims), std::move(formula)}; }

/// The nn.MultiheadAttention state_dict layout.
AttentionWeights load_mha(const SafeTensors& st, std::uint32_t heads, std::uint32_t d_model, const std::string& pre) {
  const std::string in_w = pre + "in_proj_weight", in_b = pre + "in_proj_bias", out_w = pre + "out_proj.weight",
                    out_b = pre + "out_proj.bias", q_w = pre + "q_proj_weight", k_w = pre + "k_proj_weight",
                    v_w = pre + "v_proj_weight";
  const bool packed = st.contains(in_w);
  if (d_model == 0) {
    // embed_dim: out_proj.weight is [d_model, d_model] in every variant; when it is absent or not
    // 2-D, the inputs' width, so check_layout reports out_proj by name or by its shape.
    const TensorInfo* o = st.find(out_w);
    const TensorInfo* i = st.find(packed ? in_w : q_w);
    std::uint64_t e = 0;
    if (o && o->shape.size() == 2) e = o->shape[0];
    else if (i && i->shape.size() == 2) e = i->shape[1];
    else if (o) throw st.error(out_w, "shape " + shape_string(o->shape) + ", expected [d_model, d_model] (2 dims)");
    else throw st.error(out_w, "missing (nn.MultiheadAttention layout)");
    d_model = to_dim(st, o ? out_w : i->name, "d_model", e);
  }
  const std::uint64_t e = d_model;
  std::vector<Want> wants;
  if (packed) {
    wants.push_back({in_w, spec({3 * e, e}, "[3*d_model, d_model]")});
  } else {
    // kdim/vdim variant: self-attention projects K and V from the same X, so kdim = vdim = d_model.
    wants.push_back({q_w, spec({e, e}, "[d_model, d_model]")});
    wants.push_back({k_w, spec({e, e}, "[d_model, kdim = d_model]")});
    wants.push_back({v_w, spec({e, e}, "[d_model, vdim = d_model]")});
  }
  wants.push_back({in_b, spec({3 * e}, "[3*d_model]"), false});
  wants.push_back({out_w, spec({e, e}, "[d_model, d_model]")});
  wants.push_back({out_b, spec({e}, "[d_model]"), false});
  check_layout(st, wants, pre, "nn.MultiheadAttention layout", {});
  // Shapes depend on d_model only; the head count is the caller's (a state_dict does not store it).
  if (heads == 0)
    throw st.error({}, "the number of heads is not stored in an nn.MultiheadAttention state_dict: give heads");
  if (d_model % heads != 0)
    throw st.error({}, "heads = " + std::to_string(heads) + " does not divide d_model = " + std::to_string(d_model));

  AttentionWeights w;
  w.d_model = d_model;
  w.heads = heads;
  w.d_k = w.d_v = d_model / heads;
  const std::size_t mm = std::size_t(e) * e;
  if (packed) {
    const auto in = st.read_f32(in_w, wants[0].shape);
    w.w_q.assign(in.begin(), in.begin() + mm);
    w.w_k.assign(in.begin() + mm, in.begin() + 2 * mm);
    w.w_v.assign(in.begin() + 2 * mm, in.end());
  } else {
    w.w_q = st.read_f32(q_w, wants[0].shape);
    w.w_k = st.read_f32(k_w, wants[1].shape);
    w.w_v = st.read_f32(v_w, wants[2].shape);
  }
  if (st.contains(in_b)) {
    const auto b = st.read_f32(in_b);
    w.b_q.assign(b.begin(), b.begin() + e);
    w.b_k.assign(b.begin() + e, b.begin() + 2 * e);
    w.b_v.assign(b.begin() + 2 * e, b.end());
  }
  w.w_o = st.read_f32(out_w);
  if (st.contains(out_b)) w.b_o = st.read_f32(out_b);
  return w;
}

/// Our per-head layout (docs/SAFETENSORS.md).
AttentionWeights load_per_head(const SafeTensors& st, std::uint32_t heads, std::uint32_t d_model,
                               const std::string& pre, bool& has_single) {
  auto head = [&](std::uint32_t h, std::string_view part) {
    return pre + "heads." + std::to_string(h) + "." + std::string(part);
  };
  if (heads == 0)
    while (st.contains(head(heads, "q.weight"))) ++heads;
  const auto [dk0, dm0] = dims2(st, head(0, "q.weight"), "[d_k, d_model]");
  if (d_model == 0) d_model = to_dim(st, head(0, "q.weight"), "d_model", dm0);
  const std::uint32_t d_k = to_dim(st, head(0, "q.weight"), "d_k", dk0);
  const std::uint32_t d_v = to_dim(st, head(0, "v.weight"), "d_v", dims2(st, head(0, "v.weight"), "[d_v, d_model]").first);
  const std::uint64_t e = d_model, dk = d_k, dv = d_v, hh = heads;

  std::vector<Want> wants;
  for (std::uint32_t h = 0; h < heads; ++h) {
    wants.push_back({head(h, "q.weight"), spec({dk, e}, "[d_k, d_model]")});
    wants.push_back({head(h, "q.bias"), spec({dk}, "[d_k]"), false});
    wants.push_back({head(h, "k.weight"), spec({dk, e}, "[d_k, d_model]")});
    wants.push_back({head(h, "k.bias"), spec({dk}, "[d_k]"), false});
    wants.push_back({head(h, "v.weight"), spec({dv, e}, "[d_v, d_model]")});
    wants.push_back({head(h, "v.bias"), spec({dv}, "[d_v]"), false});
  }
  wants.push_back({pre + "out.weight", spec({e, hh * dv}, "[d_model, heads*d_v]"), false});
  wants.push_back({pre + "out.bias", spec({e}, "[d_model]"), false});
  has_single = st.contains(pre + "single.q.weight") || st.contains(pre + "single.k.weight") ||
               st.contains(pre + "single.v.weight");
  for (const char* p : {"q", "k", "v"}) {
    wants.push_back({pre + "single." + p + ".weight", spec({e, e}, "[d_model, d_model]"), has_single});
    wants.push_back({pre + "single." + p + ".bias", spec({e}, "[d_model]"), false});
  }
  const std::string hint = "heads = " + std::to_string(heads) + " reads heads.0 .. heads." + std::to_string(heads - 1);
  check_layout(st, wants, pre, "per-head layout", hint);
  if (st.contains(pre + "out.bias") && !st.contains(pre + "out.weight"))
    throw st.error(pre + "out.bias", "given without out.weight");

  AttentionWeights w;
  w.d_model = d_model;
  w.heads = heads;
  w.d_k = d_k;
  w.d_v = d_v;
  // Stack head blocks; a bias a head lacks is zero, and a vector stays empty if no head has one.
  auto stack = [&](std::string_view part, std::uint64_t rows, std::vector<float>& dst, bool bias) {
    bool any = false;
    for (std::uint32_t h = 0; h < heads; ++h) any = any || st.contains(head(h, part));
    if (!any) return;
    dst.assign(std::size_t(hh * rows * (bias ? 1 : e)), 0.0f);
    for (std::uint32_t h = 0; h < heads; ++h) {
      if (!st.contains(head(h, part))) continue;
      const auto v = st.read_f32(head(h, part));
      std::copy(v.begin(), v.end(), dst.begin() + std::ptrdiff_t(h * v.size()));
    }
  };
  stack("q.weight", dk, w.w_q, false);
  stack("k.weight", dk, w.w_k, false);
  stack("v.weight", dv, w.w_v, false);
  stack("q.bias", dk, w.b_q, true);
  stack("k.bias", dk, w.b_k, true);
  stack("v.bias", dv, w.b_v, true);
  if (st.contains(pre + "out.weight")) w.w_o = st.read_f32(pre + "out.weight");
  if (st.contains(pre + "out.bias")) w.b_o = st.read_f32(pre + "out.bias");
  if (has_single) {
    w.s_w_q = st.read_f32(pre + "single.q.weight");
    w.s_w_k = st.read_f32(pre + "single.k.weight");
    w.s_w_v = st.read_f32(pre + "single.v.weight");
    auto bias = [&](const char* p, std::vector<float>& dst) {
      if (st.contains(pre + "single." + p + ".bias")) dst = st.read_f32(pre + "single." + p + ".bias");
    };
    bias("q", w.s_b_q);
    bias("k", w.s_b_k);
    bias("v", w.s_b_v);
  }
  return w;
}

}  // namespace

AttentionWeights load_attention_safetensors(const std::filesystem::path& file, std::uint32_t heads,
                                            const AttentionLoadOptions& options) {
  const SafeTensors st(file);
  const std::string& pre = options.prefix;
  AttentionWeights w;
  bool has_single = false;
  if (st.contains(pre + "in_proj_weight") || st.contains(pre + "q_proj_weight")) {
    w = load_mha(st, heads, options.d_model, pre);
  } else if (st.contains(pre + "heads.0.q.weight")) {
    w = load_per_head(st, heads, options.d_model, pre, has_single);
  } else {
    std::string names;
    std::size_t listed = 0;
    for (const auto& t : st.tensors()) {
      if (listed == 8) {
        names += ", ...";
        break;
      }
      names += (listed++ ? ", " : "") + t.name;
    }
    throw st.error({}, "no attention weights: expected '" + pre + "in_proj_weight' (nn.MultiheadAttention) or '" + pre +
                           "heads.0.q.weight' (per-head layout); the file has " +
                           (names.empty() ? std::string("no tensors") : names));
  }

  if (!options.baseline.empty()) {
    if (has_single)
      throw st.error({}, "has single.* baseline tensors and a baseline file was given too (" +
                             options.baseline.string() + ")");
    const SafeTensors base(options.baseline);
    if (!base.contains("in_proj_weight") && !base.contains("q_proj_weight"))
      throw base.error({}, "baseline: expected a 1-head nn.MultiheadAttention state_dict (in_proj_weight)");
    AttentionWeights b = load_mha(base, 1, w.d_model, "");
    w.s_w_q = std::move(b.w_q);
    w.s_w_k = std::move(b.w_k);
    w.s_w_v = std::move(b.w_v);
    w.s_b_q = std::move(b.b_q);
    w.s_b_k = std::move(b.b_k);
    w.s_b_v = std::move(b.b_v);
  }
  return w;
}

}  // namespace headsep
