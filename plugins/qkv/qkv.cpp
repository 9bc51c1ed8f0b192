// qkv — real scaled-dot-product multi-head self-attention as a weighting scheme (ABI 1.1).
//
// The plugin only *defines* the scheme: head count and widths, query mode, mask, and where the
// projections come from (a safetensors file, or the host's documented seeded initialisation).
// The host runs it — grouped BLAS projections, then scores, softmax, A·V and every metric in its
// dispatched kernels — so weights() is never called. X is the generator's token embeddings
// when it gives them (e.g. -p ops-reports.d_model=64), else its feature columns.
#include <cstdlib>
#include <string>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

std::uint32_t bounded(const Params& p, const char* name, std::int64_t lo, std::int64_t hi) {
  const auto v = p.get_int(name);
  if (v < lo || v > hi)
    throw ParamError("parameter '" + std::string(name) + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
                      ", got " + std::to_string(v));
  return static_cast<std::uint32_t>(v);
}

class Qkv final : public WeightingScheme {
 public:
  Qkv(const Params& p, const SchemaView& schema) {
    heads_ = bounded(p, "heads", 1, 1024);
    const std::string input = p.get_string("input");
    if (input == "embeddings" || (input == "auto" && schema.d_model > 0)) {
      if (schema.d_model == 0)
        throw PluginError("input=embeddings, but the scenario generator gives no embeddings (its d_model is 0)");
      spec_.input = HEADSEP_INPUT_EMBEDDINGS;
      spec_.d_model = schema.d_model;
    } else if (input == "features" || input == "auto") {
      if (schema.features.empty()) throw PluginError("input=features, but the scenario generator has no feature columns");
      spec_.input = HEADSEP_INPUT_FEATURES;
      spec_.d_model = static_cast<std::uint32_t>(schema.features.size());
    } else {
      throw ParamError("parameter 'input' must be auto, embeddings or features, got '" + input + "'");
    }
    weights_ = p.get_string("weights");
    baseline_ = p.get_string("baseline");
    if (weights_.empty()) {
      // d_k defaults to d_model / heads (at least 1), as nn.MultiheadAttention splits d_model.
      const std::uint32_t dk = bounded(p, "d_k", 0, 65536), dv = bounded(p, "d_v", 0, 65536);
      spec_.d_k = dk ? dk : std::max<std::uint32_t>(1, spec_.d_model / heads_);
      spec_.d_v = dv ? dv : spec_.d_k;
    } else if (p.get_int("d_k") || p.get_int("d_v")) {
      throw PluginError("d_k and d_v come from the weights file; do not set them with weights=");
    }
    spec_.heads = heads_;
    const std::string q = p.get_string("query");
    if (q == "all") spec_.query = HEADSEP_QUERY_ALL;
    else if (q == "first") spec_.query = HEADSEP_QUERY_FIRST;
    else if (q == "last") spec_.query = HEADSEP_QUERY_LAST;
    else {
      char* end = nullptr;
      const long long i = std::strtoll(q.c_str(), &end, 10);
      if (q.empty() || *end || i < -2147483647LL || i > 2147483647LL)
        throw ParamError("parameter 'query' must be all, first, last or a token index (negative from the end), got '" + q + "'");
      spec_.query = HEADSEP_QUERY_INDEX;
      spec_.query_index = static_cast<std::int32_t>(i);
    }
    spec_.mask = p.get_bool("causal") ? HEADSEP_MASK_CAUSAL : HEADSEP_MASK_NONE;
    spec_.seed = static_cast<std::uint64_t>(p.get_int("seed"));
    spec_.weights_path = weights_.empty() ? nullptr : weights_.c_str();
    spec_.baseline_path = baseline_.empty() ? nullptr : baseline_.c_str();
    name_ = p.get_string("scenario");
    if (name_.empty()) throw ParamError("parameter 'scenario' must not be empty");
  }
  std::uint32_t heads() const override { return heads_; }
  std::vector<std::string> scenarios() const override { return {name_}; }
  std::vector<headsep_attention_spec> attention() const override { return {spec_}; }
  void weights(const BatchView&, std::uint32_t, double* const*) const override {
    throw PluginError("qkv is an attention scheme: the host computes its weights");
  }

 private:
  std::uint32_t heads_ = 4;
  headsep_attention_spec spec_{};
  std::string weights_, baseline_, name_;
};

constexpr headsep_param_spec kParams[] = {
    {"heads", HEADSEP_PARAM_INT, "4", "number of heads H (the single-head baseline comes on top)"},
    {"d_k", HEADSEP_PARAM_INT, "0", "query/key width per head (0 = d_model / heads)"},
    {"d_v", HEADSEP_PARAM_INT, "0", "value width per head (0 = d_k)"},
    {"query", HEADSEP_PARAM_STRING, "all", "queries: all (self-attention), first, last, or a token index (negative from the end)"},
    {"causal", HEADSEP_PARAM_BOOL, "false", "causal mask: query q sees keys 0..q"},
    {"seed", HEADSEP_PARAM_INT, "1", "seed of the projections' initialisation (docs/ATTENTION.md) when no weights file is given"},
    {"weights", HEADSEP_PARAM_STRING, "", "safetensors file: nn.MultiheadAttention state_dict or headsep's per-head layout (docs/SAFETENSORS.md)"},
    {"baseline", HEADSEP_PARAM_STRING, "", "safetensors file of the single-head baseline (a 1-head MultiheadAttention); default: from weights, else seeded"},
    {"input", HEADSEP_PARAM_STRING, "auto", "X: embeddings, features, or auto (embeddings when the generator gives them)"},
    {"scenario", HEADSEP_PARAM_STRING, "qkv", "name of the scenario the results are reported under"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(Qkv, "qkv", "1.0.0",
                         "Scaled-dot-product multi-head self-attention (Q, K, V projections; softmax) run by the host's kernels",
                         kParams)
