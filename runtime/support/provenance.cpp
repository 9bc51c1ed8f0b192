// The summary's `run` block (headsep/provenance.hpp): provenance as JSON, stamped in front of a
// summary of any kind, so every front end writes the same layout (docs/SUMMARY.md).
#include "headsep/provenance.hpp"

#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>

namespace headsep {

std::string_view version() noexcept { return HEADSEP_VERSION; }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<std::pair<std::string, long long>> seeds(const RunProvenance& run) {
  std::vector<std::pair<std::string, long long>> out;
  for (const auto& p : run.plugins)
    for (const auto& [key, value] : p.params) {
      long long v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (key == "seed" && ec == std::errc() && end == value.data() + value.size()) out.emplace_back(p.name, v);
    }
  return out;
}

namespace {

nlohmann::ordered_json pairs(const std::vector<std::pair<std::string, std::string>>& v) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, x] : v) j[k] = x;
  return j;
}

nlohmann::ordered_json run_json(const RunProvenance& r) {
  nlohmann::ordered_json j;
  j["headsep_version"] = std::string(version());
  j["command"] = r.command;
  nlohmann::ordered_json plugins = nlohmann::ordered_json::array();
  for (const auto& p : r.plugins)
    plugins.push_back({{"role", p.role}, {"name", p.name}, {"version", p.version}, {"params", pairs(p.params)}});
  j["plugins"] = plugins;
  if (!r.model_name.empty() || !r.model_path.empty()) j["model"] = {{"name", r.model_name}, {"path", r.model_path}};
  nlohmann::ordered_json sd = nlohmann::ordered_json::object();
  for (const auto& [name, v] : seeds(r)) sd[name] = v;
  j["seeds"] = sd;
  j["precision"] = r.precision;
  j["axes"] = {{"spec", r.axes}, {"names", r.axis_names}};
  if (!r.axis_sources.empty()) j["axes"]["sources"] = pairs(r.axis_sources);
  j["options"] = pairs(r.options);
  const auto& e = r.execution;
  j["execution"] = {{"command_line", e.command_line}, {"start_time", e.start_time}, {"threads", e.threads},
                    {"ranks", e.ranks},          {"simd", e.simd},             {"chunk", e.chunk}};
  if (e.batch) j["execution"]["batch"] = e.batch;
  return j;
}

}  // namespace

std::string stamp_summary(const std::string& json, std::string_view kind, const RunProvenance& run, int indent) {
  const auto body = nlohmann::ordered_json::parse(json);
  nlohmann::ordered_json out;
  out["schema_version"] = kSummarySchemaVersion;
  out["kind"] = std::string(kind);
  out["run"] = run_json(run);
  for (const auto& [key, value] : body.items())
    if (key != "schema_version" && key != "kind" && key != "run") out[key] = value;
  return out.dump(indent) + "\n";
}

}  // namespace headsep
