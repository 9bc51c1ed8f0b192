// A job's set-up (job.hpp): plugins loaded, the source and weighting opened, the axes bound, the
// engine's options and the report's header; shared by the CLI and the Python module.
#include "job/job.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <oneapi/tbb/info.h>

#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "support/text_util.hpp"

namespace headsep::job {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

PluginRegistry load_registry(const std::vector<std::string>& dirs, const std::filesystem::path& builtin) {
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) throw UsageError("--plugin-dir " + d + ": no such directory");
  }
  return PluginRegistry::discover(plugin_search_path(dirs, builtin));
}

bool given(const std::vector<std::string>& params, const PluginInfo& p, const std::string& key) {
  for (const auto& item : params) {
    auto k = item.substr(0, item.find('='));
    if (k == key || k == p.name + "." + key || k == "scenario." + key) return true;
  }
  return false;
}

bool declares(const PluginInfo& p, const std::string& key) {
  for (const auto& q : p.params)
    if (q.name == key) return true;
  return false;
}

PluginInfo no_weighting() {
  PluginInfo none;
  none.kind = PluginKind::weighting;
  none.name = "(none)";
  return none;
}

Setup build_setup(const JobArgs& a, PluginRegistry registry) {
  auto specs = parse_axes(a.axes);
  std::string scenario = a.scenario, weighting = a.weighting;
  std::vector<std::string> params = a.params;
  if (!a.input.empty()) {
    if (!scenario.empty()) throw UsageError("--input and --scenario exclude each other (--input FILE = --scenario csv -p path=FILE)");
    scenario = "csv";
    params.insert(params.begin(), "csv.path=" + a.input);
    if (weighting.empty()) weighting = "table";
  }
  if (scenario.empty()) throw UsageError("run needs --scenario NAME or --input FILE (see 'headsep plugins')");

  Setup s;
  s.registry = std::move(registry);
  const PluginInfo& sp = s.registry.require(scenario, PluginKind::scenario);
  // The scenario generator reads the columns the axes use, and the reports asked for.
  if (declares(sp, "features") && !given(params, sp, "features"))
    params.push_back(sp.name + ".features=" + join(axis_columns(specs)));
  if (!a.reports.empty()) {
    if (!declares(sp, "report")) throw UsageError("--report: scenario plugin '" + sp.name + "' does not select reports");
    params.push_back(sp.name + ".report=" + join(a.reports));
  }
  const PluginInfo* wp = nullptr;
  if (!weighting.empty()) wp = &s.registry.require(weighting, PluginKind::weighting);
  // Split -p items before opening anything, so a typo is a usage error, not a half-open run.
  const PluginInfo none = no_weighting();
  auto [sparams, wparams] = split_params(params, sp, wp ? *wp : none);
  s.source = open_scenario_plugin(s.registry, scenario, sparams);
  if (!wp) {
    if (s.source->schema().given_heads == 0)
      throw UsageError("run needs --weighting NAME: the data of scenario plugin '" + scenario +
                       "' carries no weights (try axis-focus or uniform; see 'headsep plugins')");
    wp = &s.registry.require("table", PluginKind::weighting);
  }
  s.weighting = open_weighting_plugin(s.registry, wp->name, wparams, s.source->schema());
  s.plugins = {plugin_use("scenario", sp, sparams), plugin_use("weighting", *wp, wparams)};
  s.axes = AxisMap::bind(specs, s.source->schema().feature_names);
  for (const auto& f : s.registry.failures()) std::fprintf(stderr, "headsep: warning: skipped %s\n", printable(f.what).c_str());
  return s;
}

RunOptions run_options(const JobArgs& a) {
  RunOptions opt;
  opt.chunk_reports = a.chunk ? a.chunk : 8192;
  opt.chunk_fits_cache = a.chunk == 0;
  opt.threads = a.threads;
  opt.simd = a.simd.empty() ? default_level() : parse_simd_level(a.simd);
  if (a.precision == "f64") opt.precision = Precision::f64;
  else if (a.precision == "f32") opt.precision = Precision::f32;
  else throw UsageError("--precision must be f64 or f32");
  opt.all_slots_at_once = !a.slot_by_slot;
  return opt;
}

RunOptions engine_options(const JobArgs& a, const Setup& s) {
  RunOptions opt = run_options(a);
  opt.max_report_bytes = a.max_report_mb << 20;
  if (a.chunk == 0 && run_info(s).attention) {
    // A batch holds chunk x tokens x d_model floats of X (and the engine keeps 2 x threads batches
    // alive): scale the default so wide embeddings do not multiply memory, 64 KiB-floats / width.
    opt.chunk_reports = attention_chunk(s.source->schema());
  }
  return opt;
}

RunInfo run_info(const Setup& s) {
  RunInfo info{s.axes.names(), s.weighting->heads()};
  info.attention = s.weighting->per_query() || s.weighting->attention(0) != nullptr;
  return info;
}

std::size_t attention_chunk(const Schema& sc) {
  const std::size_t width = std::max<std::size_t>(1, sc.d_model ? sc.d_model : sc.feature_names.size());
  return std::clamp<std::size_t>(65536 / width, 32, 8192);
}

PluginUse plugin_use(const char* role, const PluginInfo& p, const PluginParams& given) {
  return PluginUse{role, p.name, p.version, resolve_params(p, given)};
}

RunProvenance provenance(const JobArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention, unsigned ranks) {
  RunProvenance r;
  r.command = a.command;
  r.plugins = plugins;
  r.precision = attention ? "attention f32, metrics summed in f64" : opt.precision == Precision::f64 ? "f64" : "f32";
  r.axes = a.axes, r.axis_names = axis_names;
  r.options = {{"top", std::to_string(a.top)}, {"bins", std::to_string(a.bins)}};
  if (!a.reports.empty()) r.options.emplace_back("report", join(a.reports));
  auto& e = r.execution;
  e.command_line = a.command_line, e.start_time = utc_now();
  e.threads = opt.threads ? opt.threads : unsigned(tbb::info::default_concurrency());
  e.ranks = ranks;
  e.simd = std::string(to_string(opt.simd));
  e.chunk = opt.chunk_reports;
  return r;
}

report::Header report_header(const JobArgs& a, const RunOptions& opt, const RunStats& st, bool attention,
                             const std::string& version) {
  report::Header h;
  h.command_line = a.command_line;
  h.version = version;
  h.scenario_plugin = !a.scenario_label.empty() ? a.scenario_label : a.input.empty() ? a.scenario : "csv (--input " + a.input + ")";
  h.weighting_plugin = a.weighting.empty() ? "table" : a.weighting;
  h.params = a.params;
  if (a.axes != kSeedAxes) h.params.push_back("--axes " + a.axes);
  for (const auto& r : a.reports) h.params.push_back("--report " + r);
  h.reports = st.reports, h.groups = st.groups, h.seconds = st.seconds;
  h.threads = a.threads ? a.threads : unsigned(tbb::info::default_concurrency());
  h.simd = std::string(to_string(opt.simd));
  h.precision = attention ? "attention f32, metrics summed in f64" : opt.precision == Precision::f64 ? "f64" : "f32";
  return h;
}

}  // namespace headsep::job
