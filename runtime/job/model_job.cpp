// open_model_job (model_job.hpp): a `--model` job's encoder, text source and axes, every error
// before anything runs; the CLI's run --model / scaling --model and headsep.model(...).run.
#include "job/model_job.hpp"

#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/tokenizer.hpp"

namespace headsep::job {

namespace {

/// The axes bound to the source's features. With the default axes and a lexicon of other axes,
/// the error says what to pass: the --axes (Python: axes=) naming the lexicon's columns.
AxisMap bind_model_axes(const JobArgs& a, const std::vector<AxisSpec>& specs, const std::vector<std::string>& features) {
  try {
    return AxisMap::bind(specs, features);
  } catch (const Error& e) {
    if (a.axes != kSeedAxes) throw;
    std::string have, spec;
    for (const auto& f : features) {
      if (f == "token_id" || f == "text_status") continue;  // the text generators' own features
      have += (have.empty() ? "'" : ", '") + f + "'";
      spec += (spec.empty() ? "" : ";") + f + "=" + f;
    }
    if (spec.empty()) throw;
    throw UsageError(std::string(e.what()) + ": the default axes read the built-in lexicon's columns; this lexicon has " +
                     have + ": pass --axes '" + spec + "' (Python: axes='" + spec + "'), or a subset or sums of them");
  }
}

}  // namespace

ModelJob open_model_job(const JobArgs& a, bool report, const std::filesystem::path& builtin, const LoadedModel* loaded) {
  return open_model_job(a, report, [&] { return load_registry(a.plugin_dirs, builtin); }, loaded);
}

ModelJob open_model_job(const JobArgs& a, bool report, const std::function<PluginRegistry()>& load,
                        const LoadedModel* loaded) {
  if (!a.weighting.empty()) throw UsageError("--model and --weighting exclude each other (the model's heads are the heads)");
  if (!a.input.empty()) throw UsageError("--model reads text reports: --scenario text -p path=FILE, or --scenario ops-text");
  if (a.scenario.empty()) throw UsageError("--model needs --scenario text (-p path=FILE) or --scenario ops-text");
  ModelJob job;
  job.axes_spec = a.axes == kSeedAxes ? "decision=decision_axis;evidence=evidence_axis;condition=condition_axis" : a.axes;
  auto specs = parse_axes(job.axes_spec);
  job.run = run_options(a);
  job.model = loaded ? loaded->model : load_model(a.model);  // every model error before anything is opened or written
  PluginRegistry registry = load();
  const PluginInfo& sp = registry.require(a.scenario, PluginKind::scenario);
  std::vector<std::string> params = a.params;
  if (declares(sp, "model") && !given(params, sp, "model")) params.push_back(sp.name + ".model=" + a.model);
  // Token strings (the rows, dumps and the report's maps) and, for ops-text, report ids: always, so
  // that the summary's top ids do not depend on which outputs were asked for.
  if (declares(sp, "names") && !given(params, sp, "names")) params.push_back(sp.name + ".names=true");
  const PluginInfo none = no_weighting();
  auto [sparams, wparams] = split_params(params, sp, none);
  if (declares(sp, "max_tokens")) {  // the generator's truncation (docs/MODEL.md): refused by name before it opens
    const PluginParams resolved = resolve_params(sp, sparams);
    std::int64_t max_tokens = 0;
    for (const auto& [k, v] : resolved)
      if (k == "max_tokens") max_tokens = std::stoll(v);
    const std::shared_ptr<const ModelTokenizer> mt =
        loaded && max_tokens == 0 ? loaded->tokenizer : std::make_shared<const ModelTokenizer>(ModelTokenizer::load(a.model, max_tokens));
    job.options.max_tokens = mt->truncation.tokens, job.options.max_tokens_from = mt->truncation.source;
    Encoding empty;  // what an empty text is measured as: the tokenizer's own special tokens
    mt->tokenizer->encode("", empty);
    for (const std::uint32_t id : empty.ids)
      job.options.empty_text_tokens += (job.options.empty_text_tokens.empty() ? "" : " ") + mt->tokenizer->token(id);
  }
  job.source = open_scenario_plugin(registry, a.scenario, sparams);
  job.plugins = {plugin_use("scenario", sp, sparams)};
  job.axes.emplace(bind_model_axes(a, specs, job.source->schema().feature_names));
  ModelRunOptions& mo = job.options;
  mo.threads = a.threads;
  mo.simd = job.run.simd;
  mo.chunk_reports = a.chunk ? a.chunk : 128;
  mo.keep_maps = report;  // the top reports' maps (docs/REPORTS.md)
  mo.map_tokens = report::Limits::model_map_tokens;
  mo.top_reports = a.top;  // the summary's top list (and the report's maps), as for the engine's runs
  return job;
}

RunProvenance model_provenance(const JobArgs& a, const ModelJob& job, unsigned ranks) {
  RunProvenance r = provenance(a, job.plugins, job.run, job.axes->names(), true, ranks);
  r.command = "run --model";
  r.axes = job.axes_spec;
  r.model_path = a.model;
  r.options = {{"top", std::to_string(a.top)}};
  r.execution.chunk = job.options.chunk_reports;
  r.execution.batch = r.execution.chunk;  // ModelRun runs the chunk as given
  return r;
}

}  // namespace headsep::job
