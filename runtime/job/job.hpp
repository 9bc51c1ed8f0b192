// A job, as every front end runs it (the CLI's run/example/scaling/sweep, the Python module):
// its arguments (JobArgs), the plugins loaded and the source/weighting/axes opened (Setup), the
// engine's options, and what the report's header says. No output here: each front end picks its
// sinks. A `--model` job (a BERT encoder over text reports): model_job.hpp.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/context_axes.hpp"
#include "headsep/plugin_host.hpp"
#include "headsep/provenance.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"
#include "report/report.hpp"

namespace headsep::job {

/// What a job is made of. The CLI's RunArgs extends it with its outputs; the Python module fills
/// it from run()'s arguments (python/src/run.cpp).
struct JobArgs {
  std::string input, axes{kSeedAxes}, simd, precision = "f64";
  std::size_t top = 10, bins = 20;             // the summary's top-k and histogram bins
  std::string scenario, weighting;             // plugin names
  std::vector<std::string> params;             // -p [plugin.]key=value
  std::vector<std::string> plugin_dirs;        // --plugin-dir
  std::vector<std::string> reports;            // --report: ids to analyse (default: all)
  unsigned threads = 0;
  std::size_t chunk = 0;  // 0 = automatic (8192; attention schemes: by X's width)
  std::size_t max_report_mb = 2048;
  std::string model;  // --model DIR: a BERT encoder's heads are the heads (model_job.hpp)
  std::string dtype = "auto";  // --dtype: how a decoder's nn.Linear weights are held (WeightDType)
  // A --model job's other axis sources (headsep/context_axes.hpp, docs/METRICS.md): files
  // (--semantic-axes, --direction-axes), the token classes (--token-axes: "all" or names), and
  // from Python the same as data (semantic_json: the file's JSON text; directions: the arrays).
  std::string semantic_axes, direction_axes, token_axes;
  std::string semantic_json;
  std::vector<DirectionTensor> directions;
  std::string command_line, scenario_label;     // for the report's header
  std::string command = "run";                  // the summary's run.command (run, example, sweep, scaling)
  bool slot_by_slot = false;  // --slot-by-slot: RunOptions::all_slots_at_once = false
};

/// What a run needs: plugins loaded, source opened, weighting created, axes bound. Members are
/// destroyed in reverse order: the weighting (which refers to the source's schema) first.
struct Setup {
  PluginRegistry registry;
  std::unique_ptr<ReportSource> source;
  std::unique_ptr<Weighting> weighting;
  AxisMap axes;
  std::vector<PluginUse> plugins;  // the summary's run.plugins: every parameter, given or default
};

/// Every plugin in `dirs` (a folder that does not exist is a UsageError), HEADSEP_PLUGIN_PATH,
/// then `builtin` (the CLI: builtin_plugin_dir(); the Python module: its package's folder).
PluginRegistry load_registry(const std::vector<std::string>& dirs, const std::filesystem::path& builtin);
/// Whether -p items set `key` of plugin `p` (as key, p.key or scenario.key).
bool given(const std::vector<std::string>& params, const PluginInfo& p, const std::string& key);
/// Whether plugin `p` declares parameter `key`.
bool declares(const PluginInfo& p, const std::string& key);
/// The weighting split_params() checks -p items against when there is none: "(none)".
PluginInfo no_weighting();

/// Builds (source, weighting, axes) from the arguments with the plugins of `registry` (which the
/// Setup keeps); every plugin is opened here, before any worker thread starts.
/// `input = FILE` = `scenario csv -p path=FILE, weighting table`.
Setup build_setup(const JobArgs& a, PluginRegistry registry);
/// The arguments' engine options (chunk, threads, SIMD level, precision); UsageError if bad.
RunOptions run_options(const JobArgs& a);
/// run_options() completed for a set-up job: the attention chunk and the report memory bound.
RunOptions engine_options(const JobArgs& a, const Setup& s);
/// The run's axes and heads, and whether the weighting is an attention scheme.
RunInfo run_info(const Setup& s);
/// Attention schemes' default chunk: 65536 floats / X's width, within 32..8192.
std::size_t attention_chunk(const Schema& sc);

/// A plugin as used: every declared parameter, given or default (resolve_params).
PluginUse plugin_use(const char* role, const PluginInfo& p, const PluginParams& given);
/// The summary's `run` block (headsep/provenance.hpp) for a job of these arguments: its plugins,
/// precision, axes, the options that shape the summary, and run.execution (start time now,
/// `ranks` processes).
RunProvenance provenance(const JobArgs& a, const std::vector<PluginUse>& plugins, const RunOptions& opt,
                         const std::vector<std::string>& axis_names, bool attention, unsigned ranks);

/// What the report's header says about a run (docs/REPORTS.md); `version` the build's.
report::Header report_header(const JobArgs& a, const RunOptions& opt, const RunStats& st, bool attention,
                             const std::string& version);

}  // namespace headsep::job
