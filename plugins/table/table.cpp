// table — weights given in the data: single_weight and headK_weight columns, per data scenario.
#include <algorithm>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class Table final : public WeightingScheme {
 public:
  Table(const Params&, const SchemaView& s) : heads_(s.given_heads) {
    if (heads_ == 0)
      throw PluginError("the data carries no weight columns (single_weight, head1_weight, ...); "
                        "use a scenario generator that provides them, or another weighting scheme");
  }
  std::uint32_t heads() const override { return heads_; }
  void weights(const BatchView& b, std::uint32_t slot, double* const* rows) const override {
    for (std::uint32_t h = 0; h <= heads_; ++h) {
      auto src = b.given_weights(slot, h, heads_);
      std::copy(src.begin(), src.end(), rows[h]);
    }
  }

 private:
  std::uint32_t heads_;
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(Table, "table", "0.1.0",
                         "Weights read from the data's single_weight/headK_weight columns, per data scenario", nullptr)
