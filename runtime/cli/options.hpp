// What several subcommands share: one job's arguments and outputs (RunArgs), the options that set
// them, the job set-up (job/job.hpp, with the executable's plugin folder), the report's header and
// the --profile / --trace outputs.
#pragma once
#include <cstddef>
#include <filesystem>
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
#include "job/job.hpp"
#include "report/report.hpp"

namespace CLI {
class App;
class Option;
}

namespace headsep::cli {

/// A `headsep run` (and example, scaling, sweep): the job (job/job.hpp) and its outputs.
struct RunArgs : job::JobArgs {
  std::string format, output;
  std::string per_report, summary;             // --per-report PATH, --summary PATH
  bool quiet = false;
  std::string attention, attention_reports;  // --attention PATH, --attention-reports SPEC ("": first:8)
  std::string attention_layers = "all";                   // --attention-layers (--model): all | L,M,...
  std::string report_html, plot_svg;            // --report-html PATH, --plot-svg DIR (runtime/report)
  bool sweep_value = false;                     // one value of `headsep sweep`: no rows, no table
  bool profile = false;  // --profile: the stage table on stderr, a "profile" section in --summary
  std::string trace;     // --trace PATH: Chrome trace-event JSON
  dist::Options mpi;     // --mpi-csv, --mpi-rows, --mpi-csv-block, --mpi-stats (runtime/dist/)
};

/// -p and --plugin-dir (run, scaling, sweep), in that --help order.
void add_plugin_options(CLI::App& command, RunArgs& a);
/// --plugin-dir alone (also `headsep plugins`).
void add_plugin_dir_option(CLI::App& command, std::vector<std::string>& dirs);
/// The job's data in the short help of scaling and sweep: -p, --plugin-dir, --input, --report, --axes.
void add_job_options(CLI::App& command, RunArgs& a);
/// --semantic-axes, --direction-axes, --token-axes: a --model job's other axis sources (docs/METRICS.md).
void add_model_axes_options(CLI::App& command, RunArgs& a);
/// The engine's arithmetic in the short help of scaling and sweep: --simd, --precision, --chunk.
void add_engine_options(CLI::App& command, RunArgs& a);
/// --chunk's check: a whole number of reports, 1..2^32 (CLI::PositiveNumber printed double's
/// 300-digit range for 0).
void check_chunk_option(CLI::Option& chunk);

// The job's set-up lives in job/ (shared with the Python module); the CLI names it unqualified.
using job::attention_chunk;
using job::declares;
using job::given;
using job::no_weighting;
using job::plugin_use;
using job::run_info;
using job::run_options;
using job::Setup;

/// Where a front end's plugins come from besides the shared libraries of the searched folders.
/// The executable: nothing more, its builtin folder found beside it (builtin_plugin_dir()). The
/// Python package's CLI (`headsep` from pip, `python -m headsep`; python/src/cli.cpp): the
/// package's plugin folder, and the `.py` plugins of --plugin-dir and HEADSEP_PLUGIN_PATH.
struct PluginHost {
  std::filesystem::path builtin;  ///< empty: builtin_plugin_dir()
  /// Called once per registry with the folders searched before the builtin one, after their
  /// shared libraries were loaded; adds in-process plugins (PluginRegistry::add). May be empty.
  std::function<void(PluginRegistry&, const std::vector<std::filesystem::path>&)> add;
};
/// The app: parses argv, dispatches, maps exceptions to exit codes (main.cpp). The executable's
/// main() calls it with the default host; the Python package with its own.
int run_cli(int argc, char** argv, const PluginHost& host = {});
/// Sets the host load_registry() and builtin_dir() use (run_cli does, before parsing).
void set_plugin_host(const PluginHost& host);
/// The builtin plugin folder of this front end (`headsep info` prints it).
std::filesystem::path builtin_dir();

/// The plugins of --plugin-dir folders, HEADSEP_PLUGIN_PATH and the builtin folder, then the
/// host's own (PluginHost::add).
PluginRegistry load_registry(const std::vector<std::string>& cli_dirs);
/// job::build_setup with load_registry(a.plugin_dirs).
Setup build_setup(const RunArgs& a);
/// The summary's `run` block (headsep/provenance.hpp): job::provenance with this process's rank count.
RunProvenance provenance(const RunArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention);

/// job::report_header with this build's version.
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
