// The qkv scheme over weights a caller holds in memory (make_array_attention, array_input.hpp):
// nn.MultiheadAttention's state_dict arrays (or a safetensors path) become the ABI 1.1 attention
// spec the qkv plugin would hand over, and plan_from_spec builds the plan with every check it
// makes for a plugin. Names and shapes are checked here first, so messages name the user's tensor.
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "headsep/array_input.hpp"
#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/safetensors.hpp"
#include "host/attention_spec.hpp"

namespace headsep {
namespace {

/// The arrays of one nn.MultiheadAttention (weights or the 1-head baseline), checked and split
/// into Q, K, V pointers; nothing is copied.
struct MhaArrays {
  const float *w_q = nullptr, *w_k = nullptr, *w_v = nullptr, *b_q = nullptr, *b_k = nullptr, *b_v = nullptr;
  const float *w_o = nullptr, *b_o = nullptr;
};

std::string shape_of(const ArrayRef& a) { return shape_string(a.shape); }

/// "element [4, 1]" of a row-major array.
std::string element(const ArrayRef& a, std::size_t i) {
  std::string s;
  for (std::size_t k = a.shape.size(); k-- > 0;) {
    s = std::to_string(i % a.shape[k]) + (s.empty() ? "" : ", ") + s;
    i /= a.shape[k];
  }
  return "element [" + s + "]";
}

class MhaReader {
 public:
  MhaReader(const ArrayWeights& w, std::string what, std::uint64_t d_model)
      : w_(w), what_(std::move(what)), d_(d_model) {}

  MhaArrays read() const {
    static const std::set<std::string> known = {"in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                "in_proj_bias",   "out_proj.weight", "out_proj.bias"};
    for (const auto& [name, a] : w_.tensors) {
      if (name == "bias_k" || name == "bias_v") fail(name, "add_bias_kv=True (bias_k, bias_v) is not supported");
      if (!known.count(name))
        fail(name, "unexpected tensor (not part of the nn.MultiheadAttention layout: in_proj_weight or "
                   "q/k/v_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias; docs/SAFETENSORS.md)");
      if (!a.data && a.shape.size() && count(a)) fail(name, "no data");
    }
    MhaArrays m;
    const std::uint64_t e = d_, mm = e * e;
    if (const ArrayRef* in = find("in_proj_weight")) {
      for (const char* other : {"q_proj_weight", "k_proj_weight", "v_proj_weight"})
        if (find(other)) fail(other, "given together with in_proj_weight (one or the other)");
      const float* p = checked(*in, "in_proj_weight", {3 * e, e}, "[3*d_model, d_model]");
      m.w_q = p, m.w_k = p + mm, m.w_v = p + 2 * mm;
    } else {
      if (!find("q_proj_weight")) fail("in_proj_weight", "missing (nn.MultiheadAttention layout)");
      m.w_q = required("q_proj_weight", {e, e}, "[d_model, d_model]");
      m.w_k = required("k_proj_weight", {e, e}, "[d_model, kdim = d_model]");
      m.w_v = required("v_proj_weight", {e, e}, "[d_model, vdim = d_model]");
    }
    if (const ArrayRef* b = find("in_proj_bias")) {
      const float* p = checked(*b, "in_proj_bias", {3 * e}, "[3*d_model]");
      m.b_q = p, m.b_k = p + e, m.b_v = p + 2 * e;
    }
    if (const ArrayRef* o = find("out_proj.weight")) m.w_o = checked(*o, "out_proj.weight", {e, e}, "[d_model, d_model]");
    if (const ArrayRef* o = find("out_proj.bias")) {
      if (!m.w_o) fail("out_proj.bias", "given without out_proj.weight");
      m.b_o = checked(*o, "out_proj.bias", {e}, "[d_model]");
    }
    return m;
  }

 private:
  const ArrayRef* find(const std::string& name) const {
    auto it = w_.tensors.find(name);
    return it == w_.tensors.end() ? nullptr : &it->second;
  }
  static std::uint64_t count(const ArrayRef& a) {
    std::uint64_t n = 1;
    for (auto d : a.shape) n *= d;
    return n;
  }
  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    throw UsageError(what_ + ": tensor '" + name + "': " + what);
  }
  const float* required(const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula) const {
    const ArrayRef* a = find(name);
    if (!a) fail(name, "missing (nn.MultiheadAttention layout)");
    return checked(*a, name, std::move(dims), formula);
  }
  /// Shape as expected (d_model from X), every value finite (weights must be).
  const float* checked(const ArrayRef& a, const std::string& name, std::vector<std::uint64_t> dims,
                       const std::string& formula) const {
    if (a.shape != dims)
      fail(name, "shape " + shape_of(a) + ", expected " + formula + " = " + shape_string(dims) + " (d_model " +
                     std::to_string(d_) + " from x)");
    const std::uint64_t n = count(a);
    for (std::uint64_t i = 0; i < n; ++i)
      if (!std::isfinite(a.data[i]))
        throw Error(what_ + ": tensor '" + name + "': " + element(a, i) + " is " +
                    (std::isnan(a.data[i]) ? "NaN" : a.data[i] > 0 ? "inf" : "-inf") + " (weights must be finite)");
    return a.data;
  }

  const ArrayWeights& w_;
  std::string what_;
  std::uint64_t d_;
};

std::int32_t query_index(const std::string& q) {
  char* end = nullptr;
  const long long i = std::strtoll(q.c_str(), &end, 10);
  if (q.empty() || *end || i < -2147483647LL || i > 2147483647LL)
    throw UsageError("query must be 'all', 'first', 'last' or a token index (negative from the end), got '" + q + "'");
  return static_cast<std::int32_t>(i);
}

class ArrayAttentionWeighting final : public Weighting {
 public:
  ArrayAttentionWeighting(const ArrayAttention& a, const Schema& schema)
      : heads_(a.heads), label_(a.label), scenario_(a.scenario) {
    if (a.heads == 0 || a.heads > 1024) throw UsageError("heads must be in 1..1024, got " + std::to_string(a.heads));
    if (a.weights.empty()) throw UsageError("weights are required (an nn.MultiheadAttention, its state_dict, arrays or a path)");
    if (!a.weights.path.empty() && !a.weights.tensors.empty()) throw UsageError("weights: give arrays or a path, not both");
    if (!a.baseline.path.empty() && !a.baseline.tensors.empty()) throw UsageError("baseline: give arrays or a path, not both");
    if (a.scenario.empty()) throw UsageError("the scenario name must not be empty");
    const std::uint32_t d = schema.d_model;
    if (d == 0) throw UsageError("the input gives no embeddings (d_model 0)");
    headsep_attention_spec spec{};
    spec.struct_size = sizeof spec;
    spec.input = HEADSEP_INPUT_EMBEDDINGS;
    spec.d_model = d;
    spec.heads = a.heads;
    if (a.query == "all") spec.query = HEADSEP_QUERY_ALL;
    else if (a.query == "first") spec.query = HEADSEP_QUERY_FIRST;
    else if (a.query == "last") spec.query = HEADSEP_QUERY_LAST;
    else spec.query = HEADSEP_QUERY_INDEX, spec.query_index = query_index(a.query);
    spec.mask = a.causal ? HEADSEP_MASK_CAUSAL : HEADSEP_MASK_NONE;
    spec.seed = a.seed;

    if (!a.weights.path.empty()) {
      spec.weights_path = a.weights.path.c_str();
    } else {
      if (d % a.heads)
        throw UsageError("weights: heads = " + std::to_string(a.heads) + " does not divide d_model = " + std::to_string(d));
      spec.d_k = spec.d_v = d / a.heads;
      const MhaArrays m = MhaReader(a.weights, "weights", d).read();
      spec.w_q = m.w_q, spec.w_k = m.w_k, spec.w_v = m.w_v, spec.b_q = m.b_q, spec.b_k = m.b_k, spec.b_v = m.b_v;
      spec.w_o = m.w_o, spec.b_o = m.b_o;
    }
    set_baseline(a, spec, d);
    plan_ = plan_from_spec(&spec, schema, a.heads, a.label, 0).plan;
  }

  std::uint32_t heads() const override { return heads_; }
  std::string label() const override { return label_; }
  std::vector<std::string> own_scenarios() const override { return {scenario_}; }
  void weights(const ReportBatch&, std::uint32_t, WeightBlock&) const override {
    throw Error(label_ + ": an attention scheme: the engine computes its weights");
  }
  const AttentionPlan* attention(std::uint32_t slot) const override { return slot == 0 ? plan_.get() : nullptr; }

 private:
  /// The baseline as qkv takes it: a path beside a weights path goes to the loader; arrays, or a
  /// 1-head file beside weight arrays, become the spec's s_* matrices; none leaves qkv's rule.
  void set_baseline(const ArrayAttention& a, headsep_attention_spec& spec, std::uint32_t d) {
    if (a.baseline.empty()) return;
    if (!a.weights.path.empty()) {
      const SafeTensors file(a.weights.path);  // named: a temporary would not outlive the loop
      for (const TensorInfo& t : file.tensors())
        if (t.name.rfind("single.", 0) == 0)
          throw UsageError("baseline: the weights file " + a.weights.path + " holds its own baseline ('" + t.name +
                           "'); give one or the other");
      if (!a.baseline.path.empty()) {
        spec.baseline_path = a.baseline.path.c_str();
        return;
      }
    }
    if (!a.baseline.path.empty()) {
      AttentionLoadOptions lo;
      lo.d_model = d;
      single_ = load_attention_safetensors(a.baseline.path, 1, lo);
      spec.s_w_q = single_.w_q.data(), spec.s_w_k = single_.w_k.data(), spec.s_w_v = single_.w_v.data();
      spec.s_b_q = single_.b_q.empty() ? nullptr : single_.b_q.data();
      spec.s_b_k = single_.b_k.empty() ? nullptr : single_.b_k.data();
      spec.s_b_v = single_.b_v.empty() ? nullptr : single_.b_v.data();
      return;
    }
    const MhaArrays s = MhaReader(a.baseline, "baseline", d).read();
    spec.s_w_q = s.w_q, spec.s_w_k = s.w_k, spec.s_w_v = s.w_v, spec.s_b_q = s.b_q, spec.s_b_k = s.b_k, spec.s_b_v = s.b_v;
  }

  std::uint32_t heads_;
  std::string label_, scenario_;
  AttentionWeights single_;  // a baseline file's weights, while the plan is built
  std::shared_ptr<const AttentionPlan> plan_;
};

}  // namespace

std::unique_ptr<Weighting> make_array_attention(const ArrayAttention& attention, const Schema& schema) {
  return std::make_unique<ArrayAttentionWeighting>(attention, schema);
}

}  // namespace headsep
