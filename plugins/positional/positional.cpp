// positional — fixed attention patterns that are not QKV, as explicit per-query maps (ABI 1.1
// per-query layout): the positional heads Clark et al. (2019) found in BERT. Each head is one
// pattern; the baseline attends uniformly. The host computes every attention metric from the maps.
#include <algorithm>
#include <string>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

enum class Pattern { prev, next, self, first, last, uniform, causal };

Pattern parse(const std::string& s) {
  if (s == "prev") return Pattern::prev;
  if (s == "next") return Pattern::next;
  if (s == "self") return Pattern::self;
  if (s == "first") return Pattern::first;
  if (s == "last") return Pattern::last;
  if (s == "uniform") return Pattern::uniform;
  if (s == "causal") return Pattern::causal;
  throw PluginError("unknown pattern '" + s + "' (expected prev, next, self, first, last, uniform, causal)");
}

/// Row q of an n-token report under pattern p: a distribution over keys 0..n-1.
void fill_row(Pattern p, std::size_t q, std::size_t n, double* a) {
  std::fill(a, a + n, 0.0);
  switch (p) {
    case Pattern::prev: a[q ? q - 1 : 0] = 1.0; break;  // the first token has no predecessor: itself
    case Pattern::next: a[q + 1 < n ? q + 1 : q] = 1.0; break;
    case Pattern::self: a[q] = 1.0; break;
    case Pattern::first: a[0] = 1.0; break;
    case Pattern::last: a[n - 1] = 1.0; break;
    case Pattern::uniform: std::fill(a, a + n, 1.0 / double(n)); break;
    case Pattern::causal: std::fill(a, a + q + 1, 1.0 / double(q + 1)); break;
  }
}

class Positional final : public WeightingScheme {
 public:
  Positional(const Params& p, const SchemaView&) {
    for (const auto& s : p.get_list("heads")) heads_.push_back(parse(s));
    if (heads_.empty() || heads_.size() > 64) throw ParamError("parameter 'heads' must list 1..64 patterns");
    baseline_ = parse(p.get_string("baseline"));
    name_ = p.get_string("scenario");
    if (name_.empty()) throw ParamError("parameter 'scenario' must not be empty");
  }
  std::uint32_t heads() const override { return static_cast<std::uint32_t>(heads_.size()); }
  std::uint32_t layout() const override { return HEADSEP_LAYOUT_PER_QUERY; }
  std::vector<std::string> scenarios() const override { return {name_}; }
  void weights(const BatchView& b, std::uint32_t, double* const* rows) const override {
    const auto off = b.token_offset();
    const auto qoff = b.query_offset();
    if (qoff.empty()) throw PluginError("the host gave no query offsets (per-query layout needs plugin ABI 1.1)");
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const std::size_t n = off[r + 1] - off[r];
      for (std::size_t h = 0; h <= heads_.size(); ++h)
        for (std::size_t q = 0; q < n; ++q) fill_row(h ? heads_[h - 1] : baseline_, q, n, rows[h] + qoff[r] + q * n);
    }
  }

 private:
  std::vector<Pattern> heads_;
  Pattern baseline_ = Pattern::uniform;
  std::string name_;
};

constexpr headsep_param_spec kParams[] = {
    {"heads", HEADSEP_PARAM_STRING, "prev,first", "one pattern per head: prev, next, self, first, last, uniform, causal"},
    {"baseline", HEADSEP_PARAM_STRING, "uniform", "the single-head baseline's pattern"},
    {"scenario", HEADSEP_PARAM_STRING, "positional", "name of the scenario the results are reported under"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(Positional, "positional", "1.0.0",
                         "Fixed positional attention heads (previous/next/self/first/last token) as explicit attention maps",
                         kParams)
