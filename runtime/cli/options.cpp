// The option set and job set-up several subcommands share (options.hpp): plugins loaded, the
// source and weighting opened, the engine's options, the report's header, --profile / --trace.
#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <oneapi/tbb/info.h>

#include "headsep/error.hpp"
#include "support/text_util.hpp"
#include "headsep/kernels.hpp"
#include "headsep/provenance.hpp"

namespace headsep::cli {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

void add_plugin_options(CLI::App& command, RunArgs& a) {
  command.add_option("-p,--param", a.params, "Plugin parameter [plugin.]key=value (repeatable)");
  add_plugin_dir_option(command, a.plugin_dirs);
}

void add_plugin_dir_option(CLI::App& command, std::vector<std::string>& dirs) {
  command.add_option("--plugin-dir", dirs, "Search this folder for plugins first (repeatable)");
}

void add_job_options(CLI::App& command, RunArgs& a) {
  add_plugin_options(command, a);
  command.add_option("--input,-i", a.input, "CSV in the seed schema");
  command.add_option("--report", a.reports, "Report id to analyse (repeatable; default: all)");
  command.add_option("--axes", a.axes, "Context axes")->capture_default_str();
}

void add_engine_options(CLI::App& command, RunArgs& a) {
  command.add_option("--simd", a.simd, "Force a SIMD level");
  command.add_option("--precision", a.precision, "f64 or f32")->capture_default_str();
  command.add_option("--chunk", a.chunk, "Reports per batch")->check(CLI::PositiveNumber);
}

PluginRegistry load_registry(const std::vector<std::string>& cli_dirs) {
  for (const auto& d : cli_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) throw UsageError("--plugin-dir " + d + ": no such directory");
  }
  return PluginRegistry::discover(plugin_search_path(cli_dirs));
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

Setup build_setup(const RunArgs& a) {
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
  s.registry = load_registry(a.plugin_dirs);
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

RunOptions run_options(const RunArgs& a) {
  RunOptions opt;
  opt.chunk_reports = a.chunk ? a.chunk : 8192;
  opt.threads = a.threads;
  opt.simd = a.simd.empty() ? default_level() : parse_simd_level(a.simd);
  if (a.precision == "f64") opt.precision = Precision::f64;
  else if (a.precision == "f32") opt.precision = Precision::f32;
  else throw UsageError("--precision must be f64 or f32");
  opt.all_slots_at_once = !a.slot_by_slot;
  return opt;
}

RunInfo run_info(const Setup& s) {
  RunInfo info{s.axes.names(), s.weighting->heads()};
  info.attention = s.weighting->per_query() || s.weighting->attention(0) != nullptr;
  return info;
}

PluginUse plugin_use(const char* role, const PluginInfo& p, const PluginParams& given) {
  return PluginUse{role, p.name, p.version, resolve_params(p, given)};
}

RunProvenance provenance(const RunArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention) {
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
  e.ranks = unsigned(dist::size());
  e.simd = std::string(to_string(opt.simd));
  e.chunk = opt.chunk_reports;
  return r;
}

std::size_t attention_chunk(const Schema& sc) {
  const std::size_t width = std::max<std::size_t>(1, sc.d_model ? sc.d_model : sc.feature_names.size());
  return std::clamp<std::size_t>(65536 / width, 32, 8192);
}

report::Header report_header(const RunArgs& a, const RunOptions& opt, const RunStats& st, bool attention) {
  report::Header h;
  h.command_line = a.command_line;
  h.version = HEADSEP_VERSION;
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

std::string with_profile(std::string text, const Profiler& profiler, const std::string& indent) {
  std::string p = profiler.json(), indented;
  for (char c : p) indented += c == '\n' ? "\n" + indent : std::string(1, c);
  text = text.substr(0, text.rfind('}'));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text + ",\n" + indent + "\"profile\": " + indented + "\n}\n";
}

ProfileRun::ProfileRun(const RunArgs& a) {
  if (!a.profile && a.trace.empty()) return;
  ProfileOptions po;
  po.trace = !a.trace.empty();
  profiler = std::make_unique<Profiler>(po);
  if (!a.trace.empty()) trace = std::make_unique<OutputFile>(a.trace);
}

void ProfileRun::commit_trace() {
  if (trace) trace->write(profiler->trace_json()), trace->commit();
}

void check_outputs(const RunArgs& a) {
  std::vector<std::pair<std::string, std::string>> outs{{"--output", a.output},       {"--per-report", a.per_report},
                                                        {"--summary", a.summary},     {"--attention", a.attention},
                                                        {"--trace", a.trace},         {"--report-html", a.report_html}};
  std::error_code ec;
  if (!a.plot_svg.empty() && std::filesystem::is_directory(a.plot_svg, ec))  // else report::write creates it
    outs.emplace_back("--plot-svg", (std::filesystem::path(a.plot_svg) / "headsep-probe.svg").string());
  check_output_paths(outs);
}

}  // namespace headsep::cli
