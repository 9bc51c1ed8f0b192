// headsep — what produced a result: the `run` block every summary JSON carries, with its
// `schema_version` and `kind` (docs/SUMMARY.md; docs/summary.schema.json is the schema).
//
//   RunProvenance p;                       // the CLI fills it from its arguments (cli/options.cpp);
//   p.command = "run";                     // another front end (Python) fills it the same way
//   p.plugins = {{"scenario", "ops-reports", "1.0.0", {{"reports", "1000"}, {"seed", "1"}}}};
//   p.execution = {"headsep run ...", utc_now(), 4, 1, "avx2", 8192};
//   std::string json = stamp_summary(summary.json(), "run", p, 2);
//
// run.execution holds what may differ between two runs that give the same numbers (command line,
// start time, threads, ranks, SIMD level, batch size): the identity checks across threads, ranks
// and SIMD levels compare summaries with `run.execution` removed. Everything else in `run` is
// part of what must match for two summaries to be comparable.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headsep {

/// The summary layout's version: raised when a member changes meaning or is removed.
inline constexpr int kSummarySchemaVersion = 1;

/// headsep's version ("0.1.0"), the project's CMake version.
std::string_view version() noexcept;

/// The time now as ISO 8601 UTC to the second ("2026-12-01T18:32:00Z").
std::string utc_now();

/// A plugin as a run used it: every declared parameter, given or default (resolve_params order
/// and canonical values), so the run can be repeated with `-p name.key=value` for each.
struct PluginUse {
  std::string role;  ///< "scenario" or "weighting"
  std::string name, version;
  std::vector<std::pair<std::string, std::string>> params;
};

struct RunProvenance {
  std::string command;  ///< "run", "run --model", "example", "sweep", "scaling", or a front end's own ("python")
  std::vector<PluginUse> plugins;
  std::string model_name, model_path;  ///< run --model: the encoder (config's name) and its folder
  std::string precision;               ///< "f64", "f32" or "attention f32, metrics summed in f64"
  std::string axes;                    ///< the axes as given (the --axes grammar)
  std::vector<std::string> axis_names;
  /// Where each axis's values come from (run --model: "lexicon", "token class", "semantic FILE",
  /// "direction FILE"; docs/METRICS.md), in axis order; empty: not written.
  std::vector<std::pair<std::string, std::string>> axis_sources;
  /// Options that change what the summary holds (top, bins, a sweep's vary, ...), as given.
  std::vector<std::pair<std::string, std::string>> options;
  struct Execution {
    std::string command_line;  ///< as a shell reads it back (empty: no command line)
    std::string start_time;    ///< utc_now() when the run started
    unsigned threads = 0, ranks = 1;
    std::string simd;
    std::size_t chunk = 0;  ///< reports per batch asked for (--chunk, or the command's default)
    std::size_t batch = 0;  ///< reports per batch the engine ran (RunStats::batch); 0: not known, not written
  } execution;
};

/// The plugins' seeds: every plugin parameter named "seed", as {plugin name: value}.
std::vector<std::pair<std::string, long long>> seeds(const RunProvenance& run);

/// `json` (one JSON object) with "schema_version", "kind" and "run" put first, the rest kept in
/// order, written with `indent` spaces as the summaries are. kind: "run", "model", "sweep", "scaling".
std::string stamp_summary(const std::string& json, std::string_view kind, const RunProvenance& run, int indent);

}  // namespace headsep
