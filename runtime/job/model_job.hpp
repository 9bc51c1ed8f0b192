// A `--model` job opened: the model (BERT encoder or decoder), the text source and the axes (the model's three
// relations unless the job names axes), with every error before anything runs or is written.
// The CLI (cli/model_cmd.cpp) and the Python module (headsep.model(...).run) share it.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "headsep/architecture.hpp"
#include "headsep/model_run.hpp"
#include "job/job.hpp"

namespace headsep::job {

struct ModelJob {
  std::unique_ptr<Architecture> model;  ///< load_model: BERT, GPT-2 or a Llama-family decoder
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

/// Opens `a` (scenario text or ops-text; no weighting, no input): the model first, then the
/// plugins of `dirs`/HEADSEP_PLUGIN_PATH/`builtin` (load_registry). `report`: keep the top
/// reports' maps (docs/REPORTS.md). The folder's tokenizer files are checked against the model
/// here (model_tokenizer.hpp), so their errors name the file, not the plugin.
ModelJob open_model_job(const JobArgs& a, bool report, const std::filesystem::path& builtin);

/// The summary's run block of a --model job (headsep/provenance.hpp; start time now, threads and
/// SIMD level as the job asks: the summary's top level says what the run used).
RunProvenance model_provenance(const JobArgs& a, const ModelJob& job, unsigned ranks);

}  // namespace headsep::job
