// open_model_job (model_job.hpp): a `--model` job's encoder, text source and axes, every error
// before anything runs; the CLI's run --model / scaling --model and headsep.model(...).run.
#include "job/model_job.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/tokenizer.hpp"

namespace headsep::job {
namespace {

constexpr const char* kLexiconAxes = "decision=decision_axis;evidence=evidence_axis;condition=condition_axis";

bool other_sources(const JobArgs& a) {
  return !a.semantic_axes.empty() || !a.semantic_json.empty() || !a.direction_axes.empty() || !a.directions.empty() ||
         !a.token_axes.empty();
}

/// The feature axes: --axes as given, then the token classes --token-axes names ("all" or a comma
/// list). When the job names no axis at all: the lexicon's three, except for `own_text` (the text
/// generator without -p lexicon: a user's corpus, where the built-in operations lexicon would leave
/// almost every token 0) the token classes, which every text has (docs/METRICS.md).
std::string feature_axes(const JobArgs& a, bool own_text) {
  if (a.axes == kSeedAxes && !other_sources(a) && own_text) return "position=position;punctuation=punctuation;word_start=word_start";
  std::string spec = a.axes != kSeedAxes ? a.axes : other_sources(a) ? "" : kLexiconAxes;
  if (a.token_axes.empty()) return spec;
  std::vector<std::string> names;
  if (a.token_axes == "all") names.assign(std::begin(kTokenAxes), std::end(kTokenAxes));
  for (std::size_t i = 0; a.token_axes != "all" && i <= a.token_axes.size();) {
    std::size_t j = std::min(a.token_axes.find(',', i), a.token_axes.size());
    const std::string n = a.token_axes.substr(i, j - i);
    if (std::find(std::begin(kTokenAxes), std::end(kTokenAxes), n) == std::end(kTokenAxes))
      throw UsageError("--token-axes: '" + n + "' is not a token-class axis (all, or a list of position, punctuation, word_start)");
    names.push_back(n);
    i = j + 1;
  }
  for (const auto& n : names) spec += (spec.empty() ? "" : ";") + n + "=" + n;
  return spec;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + what);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The semantic and direction axes, each name new to the feature axes (one source per axis).
/// `tok`: the folder's tokenizer when the job already holds it (read here otherwise).
void model_axes(const JobArgs& a, ModelJob& job, std::shared_ptr<const ModelTokenizer> tok) {
  ModelAxes& ax = job.options.model_axes;
  if (!a.semantic_axes.empty() || !a.semantic_json.empty()) {
    if (!tok) tok = std::make_shared<const ModelTokenizer>(ModelTokenizer::load(a.model));
    if (!a.semantic_axes.empty())
      add_semantic_axes(read_file(a.semantic_axes, "the semantic axes"), a.semantic_axes, *tok->tokenizer, *job.model, ax);
    if (!a.semantic_json.empty()) add_semantic_axes(a.semantic_json, "semantic_axes", *tok->tokenizer, *job.model, ax);
  }
  if (!a.direction_axes.empty()) add_direction_axes(std::filesystem::path(a.direction_axes), *job.model, ax);
  if (!a.directions.empty()) add_direction_axes(a.directions, "direction_axes", *job.model, ax);
  const auto fixed = job.axes->names();
  for (std::size_t k = 0; k < ax.semantic.size() + ax.direction.size(); ++k) {
    const bool sem = k < ax.semantic.size();
    const std::string& name = sem ? ax.semantic[k] : ax.direction[k - ax.semantic.size()];
    const std::string& from = sem ? ax.semantic_from[k] : ax.direction_from[k - ax.semantic.size()];
    if (std::find(fixed.begin(), fixed.end(), name) != fixed.end())
      throw Error(from + ": axis '" + name + "' is already defined by another source (--axes or --token-axes; each axis has one source)");
    job.axis_sources.emplace_back(name, (sem ? "semantic " : "direction ") + from);
  }
}

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
      if (std::find(std::begin(kTokenAxes), std::end(kTokenAxes), f) != std::end(kTokenAxes)) continue;  // --token-axes
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
  // No feature axis: the model's own axes only (parse_axes refuses an empty spec). Usage errors
  // first; the default (own_text) once the scenario plugin is known.
  if (const std::string spec = feature_axes(a, false); !spec.empty()) parse_axes(spec);
  job.run = run_options(a);
  const WeightDType dtype = parse_weight_dtype(a.dtype);  // (a loaded model was loaded with its own)
  job.model = loaded ? loaded->model : load_model(a.model, dtype);  // every model error before anything is opened or written
  PluginRegistry registry = load();
  const PluginInfo& sp = registry.require(a.scenario, PluginKind::scenario);
  std::vector<std::string> params = a.params;
  if (declares(sp, "model") && !given(params, sp, "model")) params.push_back(sp.name + ".model=" + a.model);
  // Token strings (the rows, dumps and the report's maps) and, for ops-text, report ids: always, so
  // that the summary's top ids do not depend on which outputs were asked for.
  if (declares(sp, "names") && !given(params, sp, "names")) params.push_back(sp.name + ".names=true");
  const PluginInfo none = no_weighting();
  job.axes_spec = feature_axes(a, sp.name == "text" && !given(params, sp, "lexicon"));
  std::vector<AxisSpec> specs = job.axes_spec.empty() ? std::vector<AxisSpec>{} : parse_axes(job.axes_spec);
  auto [sparams, wparams] = split_params(params, sp, none);
  // The folder's tokenizer at its own truncation length, when read here (the semantic axes' too).
  std::shared_ptr<const ModelTokenizer> folder_tok = loaded ? loaded->tokenizer : nullptr;
  if (declares(sp, "max_tokens")) {  // the generator's truncation (docs/MODEL.md): refused by name before it opens
    const PluginParams resolved = resolve_params(sp, sparams);
    std::int64_t max_tokens = 0;
    for (const auto& [k, v] : resolved)
      if (k == "max_tokens") max_tokens = std::stoll(v);
    const std::shared_ptr<const ModelTokenizer> mt =
        loaded && max_tokens == 0 ? loaded->tokenizer : std::make_shared<const ModelTokenizer>(ModelTokenizer::load(a.model, max_tokens));
    if (max_tokens == 0) folder_tok = mt;
    job.options.max_tokens = mt->truncation.tokens, job.options.max_tokens_from = mt->truncation.source;
    Encoding empty;  // what an empty text is measured as: the tokenizer's own special tokens
    mt->tokenizer->encode("", empty);
    for (const std::uint32_t id : empty.ids)
      job.options.empty_text_tokens += (job.options.empty_text_tokens.empty() ? "" : " ") + mt->tokenizer->token(id);
  }
  job.source = open_scenario_plugin(registry, a.scenario, sparams);
  job.plugins = {plugin_use("scenario", sp, sparams)};
  job.axes.emplace(bind_model_axes(a, specs, job.source->schema().feature_names));
  for (const auto& s : specs) {
    const bool token = s.terms.size() == 1 && s.terms[0].first == s.name && s.terms[0].second == 1.0 &&
                       std::find(std::begin(kTokenAxes), std::end(kTokenAxes), s.name) != std::end(kTokenAxes);
    job.axis_sources.emplace_back(s.name, token ? "token class" : declares(sp, "lexicon") ? "lexicon" : "features");
  }
  model_axes(a, job, folder_tok);
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
  r.axis_names = job.axes->names();
  for (const auto& n : job.options.model_axes.names()) r.axis_names.push_back(n);
  r.axis_sources = job.axis_sources;
  r.model_path = a.model;
  r.options = {{"top", std::to_string(a.top)}};
  // The products' weights (f32, bf16, f16): --dtype as the model was loaded (encoders: f32).
  if (const std::string d = job.model->weight_memory().linear; !d.empty()) r.options.emplace_back("dtype", d);
  r.execution.chunk = job.options.chunk_reports;
  r.execution.batch = r.execution.chunk;  // ModelRun runs the chunk as given
  return r;
}

}  // namespace headsep::job
