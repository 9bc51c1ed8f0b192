// The option set several subcommands share (options.hpp), the job set-up of job/job.hpp with the
// executable's plugin folder and version, and --profile / --trace.
#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <oneapi/tbb/info.h>

#include "headsep/error.hpp"
#include "support/text_util.hpp"
#include "headsep/kernels.hpp"
#include "headsep/provenance.hpp"

namespace headsep::cli {

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

void add_model_axes_options(CLI::App& command, RunArgs& a) {
  command.add_option("--dtype", a.dtype,
                     "--model: how a model's weights are held and multiplied: auto (as the folder stores them: bf16 "
                     "and f16 stay so, f32 as f32), f32 (widened, the f32 kernel), bf16 (rounded to bf16); docs/MODEL.md")
      ->capture_default_str();
  command.add_option("--semantic-axes", a.semantic_axes,
                     "--model: semantic axes from pole words, a JSON file {\"axis\": {\"plus\": [words], \"minus\": [words]}} "
                     "(value of a token: cos(its input embedding, mean plus - mean minus); docs/METRICS.md)");
  command.add_option("--direction-axes", a.direction_axes,
                     "--model: direction axes, a safetensors file of [hidden] or [layers, hidden] tensors named by axis "
                     "(value at layer l: the residual stream entering l . u_l)");
  command.add_option("--token-axes", a.token_axes,
                     "--model: token-class axes: all, or a list of position, punctuation, word_start");
}

void add_engine_options(CLI::App& command, RunArgs& a) {
  command.add_option("--simd", a.simd, "Force a SIMD level");
  command.add_option("--precision", a.precision, "f64 or f32")->capture_default_str();
  check_chunk_option(*command.add_option("--chunk", a.chunk, "Reports per batch"));
}

void check_chunk_option(CLI::Option& chunk) {
  chunk.check(CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && end == s.data() + s.size() && v >= 1 && v <= (std::uint64_t(1) << 32)) return {};
        return "expected a number of reports per batch, 1..4294967296, got '" + printable(s, 40) + "'";
      },
      "1..2^32"));
}

namespace {
PluginHost& host_storage() {
  static PluginHost host;
  return host;
}
}  // namespace

void set_plugin_host(const PluginHost& host) { host_storage() = host; }

std::filesystem::path builtin_dir() {
  const PluginHost& h = host_storage();
  return h.builtin.empty() ? builtin_plugin_dir() : h.builtin;
}

PluginRegistry load_registry(const std::vector<std::string>& cli_dirs) {
  PluginRegistry reg = job::load_registry(cli_dirs, builtin_dir());
  if (const PluginHost& h = host_storage(); h.add) h.add(reg, plugin_search_path(cli_dirs, {}));
  return reg;
}

Setup build_setup(const RunArgs& a) { return job::build_setup(a, load_registry(a.plugin_dirs)); }

RunProvenance provenance(const RunArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention) {
  return job::provenance(a, plugins, opt, axis_names, attention, unsigned(dist::size()));
}

report::Header report_header(const RunArgs& a, const RunOptions& opt, const RunStats& st, bool attention) {
  return job::report_header(a, opt, st, attention, HEADSEP_VERSION);
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
