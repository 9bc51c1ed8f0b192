// uniform — the "no separation" control: the baseline and every head weight the tokens of a
// report equally (1/n each), so every head's context equals the baseline's.
#include <algorithm>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class Uniform final : public WeightingScheme {
 public:
  Uniform(const Params& p, const SchemaView&) {
    auto h = p.get_int("heads");
    if (h < 1 || h > 1024) throw ParamError("parameter 'heads' must be in 1..1024, got " + std::to_string(h));
    heads_ = static_cast<std::uint32_t>(h);
  }
  std::uint32_t heads() const override { return heads_; }
  void weights(const BatchView& b, std::uint32_t, double* const* rows) const override {
    auto off = b.token_offset();
    double* w0 = rows[0];
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const auto n = off[r + 1] - off[r];
      const double v = n ? 1.0 / static_cast<double>(n) : 0.0;
      for (auto t = off[r]; t < off[r + 1]; ++t) w0[t] = v;
    }
    for (std::uint32_t h = 1; h <= heads_; ++h) std::copy(w0, w0 + b.n_tokens(), rows[h]);
  }

 private:
  std::uint32_t heads_ = 2;
};

constexpr headsep_param_spec kParams[] = {
    {"heads", HEADSEP_PARAM_INT, "2", "number of heads"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(Uniform, "uniform", "0.1.0",
                         "Every head weights a report's tokens equally: the no-separation control", kParams)
