// sleep-weighting — uniform weights for 2 heads, after sleeping `us` microseconds per call:
// a deliberately slow weighting plugin that the profiler must name as the bottleneck.
#include <chrono>
#include <thread>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class SleepWeighting final : public WeightingScheme {
 public:
  SleepWeighting(const Params& p, const SchemaView&) : us_(p.get_int("us")) {}
  std::uint32_t heads() const override { return 2; }
  void weights(const BatchView& b, std::uint32_t, double* const* rows) const override {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    auto off = b.token_offset();
    for (std::size_t r = 0; r < b.n_reports(); ++r)
      for (auto t = off[r]; t < off[r + 1]; ++t)
        for (int h = 0; h <= 2; ++h) rows[h][t] = 1.0 / double(off[r + 1] - off[r]);
  }

 private:
  std::int64_t us_;
};

constexpr headsep_param_spec kParams[] = {
    {"us", HEADSEP_PARAM_INT, "20000", "microseconds to sleep per weights() call"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(SleepWeighting, "sleep-weighting", "1.0.0", "Profiler test: sleeps in every weights() call", kParams)
