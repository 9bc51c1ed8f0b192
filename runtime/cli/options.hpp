// What several subcommands share: one job's arguments (RunArgs), the options that set them,
// the job they build (plugins, source, weighting, axes), the engine's run options, the report's
// header and the --profile / --trace outputs.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/output.hpp"
#include "headsep/plugin_host.hpp"
#include "headsep/profile.hpp"
#include "headsep/provenance.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"
#include "dist/dist.hpp"
#include "report/report.hpp"

namespace CLI {
class App;
}

namespace headsep::cli {

struct RunArgs {
  std::string input, axes{kSeedAxes}, format, output, simd, precision = "f64";
  std::string per_report, summary;             // --per-report PATH, --summary PATH
  std::size_t top = 10, bins = 20;
  bool quiet = false;
  std::string scenario, weighting;             // plugin names
  std::vector<std::string> params;             // -p [plugin.]key=value
  std::vector<std::string> plugin_dirs;        // --plugin-dir
  std::vector<std::string> reports;
  unsigned threads = 0;
  std::size_t chunk = 0;  // 0 = automatic (8192; attention schemes: by X's width)
  std::string attention, attention_reports = "first:8";  // --attention PATH, --attention-reports SPEC
  std::string attention_layers = "all";                   // --attention-layers (--model): all | L,M,...
  std::size_t max_report_mb = 2048;
  std::string model;  // --model DIR: a BERT encoder's heads are the heads (model_cmd)
  std::string report_html, plot_svg;            // --report-html PATH, --plot-svg DIR (runtime/report)
  std::string command_line, scenario_label;     // for the report's header
  std::string command = "run";                  // the summary's run.command (run, example, sweep, scaling)
  bool sweep_value = false;                     // one value of `headsep sweep`: no rows, no table
  bool profile = false;  // --profile: the stage table on stderr, a "profile" section in --summary
  std::string trace;     // --trace PATH: Chrome trace-event JSON
  bool slot_by_slot = false;  // --slot-by-slot: RunOptions::all_slots_at_once = false
  dist::Options mpi;     // --mpi-csv, --mpi-rows, --mpi-csv-block, --mpi-stats (runtime/dist/)
};

/// -p and --plugin-dir (run, scaling, sweep), in that --help order.
void add_plugin_options(CLI::App& command, RunArgs& a);
/// --plugin-dir alone (also `headsep plugins`).
void add_plugin_dir_option(CLI::App& command, std::vector<std::string>& dirs);
/// The job's data in the short help of scaling and sweep: -p, --plugin-dir, --input, --report, --axes.
void add_job_options(CLI::App& command, RunArgs& a);
/// The engine's arithmetic in the short help of scaling and sweep: --simd, --precision, --chunk.
void add_engine_options(CLI::App& command, RunArgs& a);

/// What a run needs: plugins loaded, source opened, weighting created, axes bound. Members are
/// destroyed in reverse order: the weighting (which refers to the source's schema) first.
struct Setup {
  PluginRegistry registry;
  std::unique_ptr<ReportSource> source;
  std::unique_ptr<Weighting> weighting;
  AxisMap axes;
  std::vector<PluginUse> plugins;  // the summary's run.plugins: every parameter, given or default
};

PluginRegistry load_registry(const std::vector<std::string>& cli_dirs);
/// Whether -p items set `key` of plugin `p` (as key, p.key or scenario.key).
bool given(const std::vector<std::string>& params, const PluginInfo& p, const std::string& key);
/// Whether plugin `p` declares parameter `key`.
bool declares(const PluginInfo& p, const std::string& key);
/// The weighting split_params() checks -p items against when there is none: "(none)".
PluginInfo no_weighting();

/// Builds (source, weighting, axes) from the arguments; every plugin is loaded here, before
/// any worker thread starts. `--input FILE` = `--scenario csv -p path=FILE --weighting table`.
Setup build_setup(const RunArgs& a);
RunOptions run_options(const RunArgs& a);
/// The run's axes and heads, and whether the weighting is an attention scheme.
RunInfo run_info(const Setup& s);
/// The summary's `run` block (headsep/provenance.hpp) for a job of these arguments: its plugins,
/// precision, axes, the options that shape the summary, and run.execution (start time now).
RunProvenance provenance(const RunArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention);
/// A plugin as used: every declared parameter, given or default (resolve_params).
PluginUse plugin_use(const char* role, const PluginInfo& p, const PluginParams& given);

/// Attention schemes' default --chunk: 65536 floats / X's width, within 32..8192.
std::size_t attention_chunk(const Schema& sc);

/// What the report's header says about a run (docs/REPORTS.md).
report::Header report_header(const RunArgs& a, const RunOptions& opt, const RunStats& st, bool attention);

/// The summary JSON with the profile as its last member, "profile" (the profiler's dump(2)
/// layout, one `indent` deeper: the summary's own indent).
std::string with_profile(std::string text, const Profiler& profiler, const std::string& indent);

/// --profile / --trace of one run, the engine's or the model's: the profiler (null without
/// either option) and the trace file, opened before the run so an unwritable path fails first.
struct ProfileRun {
  std::unique_ptr<Profiler> profiler;
  std::unique_ptr<OutputFile> trace;
  explicit ProfileRun(const RunArgs& a);
  void commit_trace();
};

/// Every output a run or --model run names, checked before anything is computed (check_output_paths):
/// two options on one file refused naming both, each folder able to take the file.
void check_outputs(const RunArgs& a);

}  // namespace headsep::cli
