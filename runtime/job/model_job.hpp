// A `--model` job opened: the model (BERT encoder or decoder), the text source and the axes (the model's three
// relations unless the job names axes), with every error before anything runs or is written.
// The CLI (cli/model_cmd.cpp) and the Python module (headsep.model(...).run) share it.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "headsep/architecture.hpp"
#include "headsep/model_run.hpp"
#include "headsep/model_tokenizer.hpp"
#include "job/job.hpp"

namespace headsep::job {

struct ModelJob {
  std::shared_ptr<const Architecture> model;  ///< load_model: BERT, GPT-2 or a Llama-family decoder
  std::unique_ptr<ReportSource> source;
  std::optional<AxisMap> axes;
  ModelRunOptions options;
  std::string axes_spec;  ///< the feature axes used (the model's default when the job kept the seed's)
  /// Every axis and where its values come from (RunProvenance::axis_sources): the feature axes,
  /// then options.model_axes' semantic and direction axes.
  std::vector<std::pair<std::string, std::string>> axis_sources;
  RunOptions run;
  std::vector<PluginUse> plugins;  ///< the summary's run.plugins
};

/// A model folder loaded once and reused by several jobs (the Python module's headsep.model(DIR)):
/// its weights and its tokenizer (loaded with the folder's truncation length). Immutable: jobs on
/// several threads share it.
struct LoadedModel {
  std::shared_ptr<const Architecture> model;
  std::shared_ptr<const ModelTokenizer> tokenizer;
};

/// Opens `a` (scenario text or ops-text; no weighting, no input): the model first, then the
/// plugins of `dirs`/HEADSEP_PLUGIN_PATH/`builtin` (load_registry). `report`: keep the top
/// reports' maps (docs/REPORTS.md). The folder's tokenizer files are checked against the model
/// here (model_tokenizer.hpp), so their errors name the file, not the plugin. `loaded`: the
/// folder a.model already loaded (its weights and tokenizer are used, not read again).
ModelJob open_model_job(const JobArgs& a, bool report, const std::filesystem::path& builtin,
                        const LoadedModel* loaded = nullptr);
/// The same with the registry a front end builds (the CLI: its plugin host, python -m headsep's
/// .py plugins included), asked for once the model has loaded.
ModelJob open_model_job(const JobArgs& a, bool report, const std::function<PluginRegistry()>& registry,
                        const LoadedModel* loaded = nullptr);

/// The summary's run block of a --model job (headsep/provenance.hpp; start time now, threads and
/// SIMD level as the job asks: the summary's top level says what the run used).
RunProvenance model_provenance(const JobArgs& a, const ModelJob& job, unsigned ranks);

}  // namespace headsep::job
