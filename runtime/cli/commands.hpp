// Each subcommand's entry points, one file each: add_X() puts its options on the app (the
// --help order), X_cmd() runs it once parsed. main.cpp calls them in the app's order.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "headsep/summary.hpp"
#include "profile/scaling.hpp"

namespace headsep::cli {

// headsep example (example_cmd.cpp): the seed exercise from the bundled CSV.
CLI::App* add_example(CLI::App& app, RunArgs& a);
int example_cmd(const RunArgs& given);

// headsep run (run_cmd.cpp): a report set through a weighting scheme into the outputs asked for.
CLI::App* add_run(CLI::App& app, RunArgs& a);
int run_cmd(const RunArgs& a);
/// Runs a set-up source/weighting into the outputs asked for (run, example, sweep); `after`
/// sees the summary and the stats once the run is done.
int execute(Setup& s, const RunArgs& a, const std::function<void(const Summary&, const RunStats&)>& after = {});
/// --attention-reports SPEC (first:N, all, index:I,J,..., id:A,B,...): which reports keep maps.
/// A predicate (RunOptions::keep_maps, the map writer's filter) that notes what it matched; its
/// copies share the notes, from any thread.
class KeepReports {
 public:
  explicit KeepReports(const std::string& spec);  ///< UsageError when SPEC is not one of the forms
  bool operator()(const ReportBatch& batch, std::size_t r) const;
  /// After the run, before any output is committed: Error naming the first index or id of an
  /// index:/id: spec that no report matched (as --report does; `reports`: how many the run read).
  void check_matched(std::uint64_t reports) const;

 private:
  enum class Kind { all, first, index, id } kind_ = Kind::all;
  std::string spec_;
  std::uint64_t first_ = 0;
  std::vector<std::uint64_t> index_;  // sorted, unique
  std::vector<std::string> ids_;      // sorted, unique
  std::shared_ptr<std::vector<std::atomic<bool>>> seen_;  // per index_ or ids_ entry
};
inline KeepReports parse_keep(const std::string& spec) { return KeepReports(spec); }

// headsep run --model (model_cmd.cpp): a BERT encoder's every (layer, head) on text reports.
int model_cmd(const RunArgs& a);
/// The scenario plugin of a --model job, every parameter resolved (the scaling JSON's run block).
std::vector<PluginUse> model_plugins(const RunArgs& a);
/// One count of `headsep scaling --model`.
prof::ScalingPoint model_scaling_point(const RunArgs& a, unsigned threads);

// headsep scaling (scaling_cmd.cpp): the job's options, then the counts.
struct ScalingArgs {
  RunArgs job;
  std::string counts, json, check = "summary", ranks;
  std::string launcher = "mpirun -np {ranks}";
  unsigned repeat = 1;
  bool ceiling = false;
};
CLI::App* add_scaling(CLI::App& app, ScalingArgs& s);
int scaling_cmd(const ScalingArgs& s);

// headsep sweep (sweep_cmd.cpp): one report set over a range of a plugin parameter.
struct SweepArgs {
  RunArgs job;
  std::string vary, json;
};
CLI::App* add_sweep(CLI::App& app, SweepArgs& s);
int sweep_cmd(const SweepArgs& s);

// headsep plugins (plugins_cmd.cpp): the plugins found, or one plugin's parameters.
struct PluginsArgs {
  std::vector<std::string> dirs;
  std::string name;
};
CLI::App* add_plugins(CLI::App& app, PluginsArgs& p);
int plugins_cmd(const PluginsArgs& p);

// headsep tokenize (tokenize_cmd.cpp): texts to ids and tokens with a model folder's tokenizer.
struct TokenizeArgs {
  std::string model, input, output, format = "auto";
  std::vector<std::string> texts;
  long long max_tokens = 0;
};
CLI::App* add_tokenize(CLI::App& app, TokenizeArgs& t);
int tokenize_cmd(const TokenizeArgs& t);

// headsep info (info_cmd.cpp): build and CPU capabilities.
CLI::App* add_info(CLI::App& app, std::string& model);
/// With `model` (a folder): what load_model recognised in it instead.
int info_cmd(const std::string& model);

}  // namespace headsep::cli
