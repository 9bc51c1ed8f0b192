// template-reports — a complete scenario generator to copy: N short reports, each a decision,
// an evidence and a condition token with values on the three seed feature columns.
// Rename the class, the plugin name and the parameters, and write chunk().
#include <headsep/plugin_sdk.hpp>
#include <algorithm>
#include <string>

namespace {

using namespace headsep::sdk;

class TemplateReports final : public ScenarioGenerator {
 public:
  // Parameters arrive validated (types checked, defaults filled in) by the host.
  explicit TemplateReports(const Params& p) : reports_(p.get_int("reports")), prefix_(p.get_string("prefix")) {
    if (reports_ < 0) throw PluginError("parameter 'reports' must be >= 0");  // becomes an error message
  }

  // Feature columns the reports carry. No scenario names: the weighting scheme brings its own.
  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = {"decision_axis", "evidence_axis", "condition_axis"};
    s.total_reports = static_cast<std::uint64_t>(reports_);
    return s;
  }

  // Chunk `index` holds reports [index * max_reports, ...); return false when none is left.
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    const std::uint64_t first = index * max_reports, total = static_cast<std::uint64_t>(reports_);
    if (first >= total) return false;
    const std::uint64_t n = std::min(max_reports, total - first);
    auto off = out.token_offsets(n);  // memory belongs to the host, valid during this call
    auto dec = out.feature(0, 3 * n), evi = out.feature(1, 3 * n), con = out.feature(2, 3 * n);
    static const char* const kTokens[3] = {"decision", "evidence", "condition"};
    off[0] = 0;
    for (std::uint64_t r = 0; r < n; ++r) {
      off[r + 1] = off[r] + 3;
      const double x = 0.1 * static_cast<double>((first + r) % 10);  // something that varies
      for (std::uint64_t k = 0; k < 3; ++k) {
        const std::uint64_t t = 3 * r + k;
        dec[t] = k == 0 ? 1.5 + x : 0.2;
        evi[t] = k == 1 ? 1.0 : 0.1 + x / 2;
        con[t] = k == 2 ? 1.2 - x : 0.1;
        out.token_name(kTokens[k]);
      }
      out.report_id(prefix_ + "-" + std::to_string(first + r));
    }
    return true;
  }

 private:
  std::int64_t reports_;
  std::string prefix_;
};

// name, type, default (nullptr = required), help
constexpr headsep_param_spec kParams[] = {
    {"reports", HEADSEP_PARAM_INT, "4", "number of reports"},
    {"prefix", HEADSEP_PARAM_STRING, "tpl", "report id prefix"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(TemplateReports, "template-reports", "1.0.0",
                        "Template: three-token decision/evidence/condition reports", kParams)
