// headsep run --model: text reports through a BERT encoder, every (layer, head) measured; also
// one count of `headsep scaling --model`. Both open the job the same way (open_model_job).
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "headsep/attention.hpp"
#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "headsep/model_run.hpp"

namespace headsep::cli {

namespace {

/// A --model job opened: the encoder, the text source, the axes (the model's three relations
/// unless the user chose axes) and the run's options; every error before anything is written.
struct ModelJob {
  std::optional<BertModel> model;
  std::unique_ptr<ReportSource> source;
  std::optional<AxisMap> axes;
  ModelRunOptions options;
  std::string axes_spec;
  RunOptions run;
  std::vector<PluginUse> plugins;  // the summary's run.plugins
};

ModelJob open_model_job(const RunArgs& a, bool report) {
  if (!a.weighting.empty()) throw UsageError("--model and --weighting exclude each other (the model's heads are the heads)");
  if (!a.input.empty()) throw UsageError("--model reads text reports: --scenario text -p path=FILE, or --scenario ops-text");
  if (a.scenario.empty()) throw UsageError("--model needs --scenario text (-p path=FILE) or --scenario ops-text");
  ModelJob job;
  job.axes_spec = a.axes == kSeedAxes ? "decision=decision_axis;evidence=evidence_axis;condition=condition_axis" : a.axes;
  auto specs = parse_axes(job.axes_spec);
  job.run = run_options(a);
  job.model.emplace(BertModel::load(a.model));  // every model error before anything is opened or written
  PluginRegistry registry = load_registry(a.plugin_dirs);
  const PluginInfo& sp = registry.require(a.scenario, PluginKind::scenario);
  std::vector<std::string> params = a.params;
  if (declares(sp, "model") && !given(params, sp, "model")) params.push_back(sp.name + ".model=" + a.model);
  if (report && declares(sp, "names") && !given(params, sp, "names")) params.push_back(sp.name + ".names=true");  // the maps' token labels
  const PluginInfo none = no_weighting();
  auto [sparams, wparams] = split_params(params, sp, none);
  job.source = open_scenario_plugin(registry, a.scenario, sparams);
  job.plugins = {plugin_use("scenario", sp, sparams)};
  job.axes.emplace(AxisMap::bind(specs, job.source->schema().feature_names));
  ModelRunOptions& mo = job.options;
  mo.threads = a.threads;
  mo.simd = job.run.simd;
  mo.chunk_reports = a.chunk ? a.chunk : 128;
  mo.keep_maps = report;  // the top reports' maps (docs/REPORTS.md)
  mo.map_tokens = report::Limits::model_map_tokens;
  mo.progress = !a.quiet && ::isatty(STDERR_FILENO);  // the engine's bar, on a terminal only
  mo.top_reports = a.top;  // the summary's top list (and the report's maps), as for the engine's runs
  return job;
}

/// The summary's run block of a --model job (start time now; threads and SIMD as the run reports them).
RunProvenance model_provenance(const RunArgs& a, const ModelJob& job) {
  RunProvenance r = provenance(a, job.plugins, job.run, job.axes->names(), true);
  r.command = "run --model";
  r.axes = job.axes_spec;
  r.model_path = a.model;
  r.options = {{"top", std::to_string(a.top)}};
  r.execution.chunk = job.options.chunk_reports;
  return r;
}

}  // namespace

/// The scenario plugin of a --model job as it would be used (run.plugins of `scaling --model`).
std::vector<PluginUse> model_plugins(const RunArgs& a) { return open_model_job(a, false).plugins; }

/// One count of `headsep scaling --model`: the job opened afresh (a text file is read again), run
/// with the profiler; the summary compared without what a run measures (seconds, threads).
prof::ScalingPoint model_scaling_point(const RunArgs& a, unsigned threads) {
  RunArgs v = a;
  v.threads = threads;
  ModelJob job = open_model_job(v, false);
  job.options.progress = false;  // scaling prints its own line per count
  Profiler profiler;
  job.options.profiler = &profiler;
  const ModelSummary sum = run_model(*job.source, *job.model, *job.axes, job.options);
  prof::ScalingPoint p;
  p.threads = threads, p.wall_s = sum.seconds;
  for (const auto& sc : sum.scenarios) p.reports += sc.reports, p.groups += sc.reports;
  p.profile = profiler.result();
  p.profile_json = profiler.json();
  auto j = nlohmann::ordered_json::parse(sum.json());
  j.erase("seconds"), j.erase("threads");
  p.summary_json = j.dump();
  return p;
}

/// --model DIR: text reports (text / ops-text) through a BERT encoder, every (layer, head)
/// measured (model_run.hpp); the per layer x head summary as a table and --summary JSON.
int model_cmd(const RunArgs& a) {
  if (!a.format.empty() || !a.output.empty() || !a.per_report.empty() || !a.attention.empty() || !a.reports.empty())
    throw UsageError("--model writes the per layer x head summary (--summary PATH and the table); "
                     "--format, --output, --per-report, --attention and --report do not apply");
  const bool report = !a.report_html.empty() || !a.plot_svg.empty();
  ModelJob job = open_model_job(a, report);
  const std::string& axes_spec = job.axes_spec;
  const RunOptions& ro = job.run;
  const BertModel& model = *job.model;
  ModelRunOptions& mo = job.options;
  ReportSource* const source = job.source.get();
  const AxisMap& axes = *job.axes;
  ProfileRun prof(a);  // --profile / --trace: the engine's profiler, the model's stages
  mo.profiler = prof.profiler.get();
  RunProvenance origin = model_provenance(a, job);
  const ModelSummary sum = run_model(*source, model, axes, mo);
  origin.model_name = sum.model, origin.execution.threads = sum.threads, origin.execution.simd = sum.simd;
  if (report) {  // docs/REPORTS.md: the layer x head grids
    RunStats st;
    for (const auto& sc : sum.scenarios) st.reports += sc.reports, st.groups += sc.reports;
    st.seconds = sum.seconds;
    report::Header h = report_header(a, ro, st, true);
    h.weighting_plugin = "model " + sum.model + " (" + a.model + ")", h.threads = sum.threads, h.simd = sum.simd;
    if (axes_spec != a.axes) h.params.push_back("--axes " + axes_spec);
    report::write(report::build(sum, h), a.report_html, a.plot_svg);
  }
  if (!a.summary.empty()) {
    OutputFile out(a.summary);
    const std::string text = stamp_summary(sum.json(), "model", origin, 1);
    out.write(a.profile ? with_profile(text, *prof.profiler, " ") : text);
    out.commit();
  }
  prof.commit_trace();
  if (!a.quiet) {
    std::uint64_t reports = 0, tokens = 0;
    for (const auto& sc : sum.scenarios) reports += sc.reports, tokens += sc.tokens;
    std::printf("%s", sum.table().c_str());
    const double peak = measure_fp32_peak_gflops();
    std::printf("%llu reports, %llu tokens in %.3f s: %.0f tokens/s, forward %.1f GFLOP/s = %.0f %% of %u x %.0f GFLOP/s fp32 peak (%s, %u thread%s)\n",
                static_cast<unsigned long long>(reports), static_cast<unsigned long long>(tokens), sum.seconds,
                sum.seconds > 0 ? double(tokens) / sum.seconds : 0.0, sum.seconds > 0 ? sum.gflop / sum.seconds : 0.0,
                sum.seconds > 0 ? 100.0 * sum.gflop / sum.seconds / (peak * sum.threads) : 0.0, sum.threads, peak,
                sum.simd.c_str(), sum.threads, sum.threads == 1 ? "" : "s");
  }
  if (a.profile) std::fprintf(stderr, "%s", prof.profiler->table().c_str());
  return 0;
}

}  // namespace headsep::cli
