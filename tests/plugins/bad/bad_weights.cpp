// A C++ (SDK) weighting scheme that misbehaves on request: mode = throw-create | throw | nan | negative.
#include <limits>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class BadWeights final : public WeightingScheme {
 public:
  BadWeights(const Params& p, const SchemaView&) : mode_(p.get_string("mode")) {
    if (mode_ == "throw-create") throw std::runtime_error("constructor exploded on purpose");
  }
  std::uint32_t heads() const override { return 2; }
  void weights(const BatchView& b, std::uint32_t, double* const* rows) const override {
    if (mode_ == "throw") throw std::logic_error("weights() exploded on purpose");
    for (std::uint32_t h = 0; h <= 2; ++h)
      for (std::size_t t = 0; t < b.n_tokens(); ++t) rows[h][t] = 0.5;
    // Poison the second token of report 1 (0-based) on head 1, so the message can name it.
    const auto t = b.token_offset()[b.n_reports() > 1 ? 1 : 0] + 1;
    if (mode_ == "nan") rows[1][t] = std::numeric_limits<double>::quiet_NaN();
    if (mode_ == "negative") rows[1][t] = -0.25;
  }

 private:
  std::string mode_;
};

constexpr headsep_param_spec kParams[] = {
    {"mode", HEADSEP_PARAM_STRING, "ok", "throw-create | throw | nan | negative | ok"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(BadWeights, "bad-weights", "0.0.1", "misbehaves on request", kParams)
