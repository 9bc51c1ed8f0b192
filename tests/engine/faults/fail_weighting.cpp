// fail-weighting — uniform weights for 2 heads, except that the batch holding report
// `fail_report` fails (an error, or std::bad_alloc with mode=alloc). weights() runs on worker
// threads, so this is a failure in the parallel stage, in the middle of a run.
#include <new>
#include <string>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class FailWeighting final : public WeightingScheme {
 public:
  FailWeighting(const Params& p, const SchemaView&)
      : fail_report_(static_cast<std::uint64_t>(p.get_int("fail_report"))), alloc_(p.get_string("mode") == "alloc") {}
  std::uint32_t heads() const override { return 2; }
  void weights(const BatchView& b, std::uint32_t, double* const* rows) const override {
    if (fail_report_ >= b.first_report() && fail_report_ < b.first_report() + b.n_reports()) {
      if (alloc_) throw std::bad_alloc();
      throw PluginError("injected failure at report " + std::to_string(fail_report_));
    }
    auto off = b.token_offset();
    for (std::size_t r = 0; r < b.n_reports(); ++r)
      for (auto t = off[r]; t < off[r + 1]; ++t)
        for (int h = 0; h <= 2; ++h) rows[h][t] = 1.0 / double(off[r + 1] - off[r]);
  }

 private:
  std::uint64_t fail_report_;
  bool alloc_;
};

constexpr headsep_param_spec kParams[] = {
    {"fail_report", HEADSEP_PARAM_INT, "500", "index of the report whose batch fails"},
    {"mode", HEADSEP_PARAM_STRING, "error", "error: throw an error; alloc: throw std::bad_alloc"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(FailWeighting, "fail-weighting", "1.0.0", "Fault injection: fails on one batch", kParams)
