// csv — the seed-schema CSV reader (headsep::open_csv_source) as a scenario generator.
// Columns: report_id, scenario, token, the feature columns asked for, single_weight and
// head1_weight..headN_weight (when weights=true). Streams one chunk at a time.
#include <cstring>

#include "headsep/plugin_sdk.hpp"
#include "headsep/source.hpp"

namespace {

using namespace headsep::sdk;

class CsvGenerator final : public ScenarioGenerator {
 public:
  explicit CsvGenerator(const Params& p) {
    headsep::CsvSourceOptions o;
    o.path = p.get_string("path");
    if (o.path.empty()) throw ParamError("parameter 'path' is empty: give the CSV file (-p path=FILE, '-' = stdin)");
    o.reports = p.get_list("report");
    o.features = p.get_list("features");
    if (o.features.empty()) throw ParamError("parameter 'features' lists no column");
    o.weights = p.get_bool("weights");
    source_ = headsep::open_csv_source(o);
  }

  SchemaInfo schema() const override {
    const auto& s = source_->schema();
    SchemaInfo info;
    info.features = s.feature_names;
    info.given_heads = s.given_heads;
    info.names_scenarios = true;
    return info;
  }

  bool chunk(std::uint64_t, std::uint64_t max_reports, ChunkWriter& out) override {
    const bool more = source_->next(batch_, static_cast<std::size_t>(max_reports));
    out.rows_read(source_->rows_read());
    if (!more) return false;
    const auto& names = source_->schema().scenario_names;
    for (auto j : batch_.scenarios) out.scenario(names[j]);
    const auto n = batch_.n_reports(), t = batch_.n_tokens();
    auto off = out.token_offsets(n);
    std::memcpy(off.data(), batch_.token_offset.data(), (n + 1) * sizeof(std::uint64_t));
    for (std::uint32_t f = 0; f < batch_.features.size(); ++f) {
      auto col = out.feature(f, t);
      std::memcpy(col.data(), batch_.features[f].data(), t * sizeof(double));
    }
    const std::uint32_t rows = source_->schema().given_heads + 1;
    for (std::size_t i = 0; i < batch_.given_weights.size(); ++i) {
      auto w = out.given_weights(static_cast<std::uint32_t>(i / rows), static_cast<std::uint32_t>(i % rows), t);
      std::memcpy(w.data(), batch_.given_weights[i].data(), t * sizeof(double));
    }
    for (const auto& id : batch_.report_ids) out.report_id(id);
    for (const auto& tok : batch_.token_names) out.token_name(tok);
    out.source_rows(batch_.source_rows);
    return true;
  }

 private:
  std::unique_ptr<headsep::ReportSource> source_;
  headsep::ReportBatch batch_;
};

constexpr headsep_param_spec kParams[] = {
    {"path", HEADSEP_PARAM_STRING, nullptr, "CSV file in the seed schema ('-' = standard input)"},
    {"report", HEADSEP_PARAM_STRING, "", "comma-separated report ids to keep (empty = all)"},
    {"features", HEADSEP_PARAM_STRING, "decision_axis,evidence_axis,condition_axis",
     "comma-separated numeric columns to read, kept in the file's column order (the order of X for attention "
     "schemes that read features); headsep run passes the columns its --axes use"},
    {"weights", HEADSEP_PARAM_BOOL, "true", "read single_weight/headK_weight columns (needed by the 'table' weighting)"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(CsvGenerator, "csv", "0.1.0",
                        "Reports from a CSV in the seed schema (report_id, scenario, token, features, weights)", kParams)
