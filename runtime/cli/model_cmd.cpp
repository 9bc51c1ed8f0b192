// headsep run --model: text reports through a BERT encoder, every (layer, head) measured; also
// one count of `headsep scaling --model`. Both open the job the same way (open_model_job).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "headsep/attention.hpp"
#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "headsep/model_run.hpp"
#include "job/model_job.hpp"

namespace headsep::cli {

using job::ModelJob;

namespace {

ModelJob open_model_job(const RunArgs& a, bool report) { return job::open_model_job(a, report, builtin_plugin_dir()); }

}  // namespace

/// One count of `headsep scaling --model`: the job opened afresh (a text file is read again), run
/// with the profiler; the summary compared without what a run measures (seconds, threads).
prof::ScalingPoint model_scaling_point(const RunArgs& a, unsigned threads) {
  RunArgs v = a;
  v.threads = threads;
  ModelJob job = open_model_job(v, false);
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
  const ModelSummary sum = run_model(*source, model, axes, mo);
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
    out.write(a.profile ? with_profile(sum.json(), *prof.profiler, " ") : sum.json());
    out.commit();
  }
  prof.commit_trace();
  if (!a.quiet) {
    std::uint64_t reports = 0, tokens = 0;
    for (const auto& sc : sum.scenarios) reports += sc.reports, tokens += sc.tokens;
    std::printf("%s", sum.table().c_str());
    const double peak = measure_fp32_peak_gflops();
    std::printf("%llu reports, %llu tokens in %.3f s: %.0f tokens/s, forward %.1f GFLOP/s = %.0f %% of %u x %.0f GFLOP/s fp32 peak (%s, %u threads)\n",
                static_cast<unsigned long long>(reports), static_cast<unsigned long long>(tokens), sum.seconds,
                sum.seconds > 0 ? double(tokens) / sum.seconds : 0.0, sum.seconds > 0 ? sum.gflop / sum.seconds : 0.0,
                sum.seconds > 0 ? 100.0 * sum.gflop / sum.seconds / (peak * sum.threads) : 0.0, sum.threads, peak,
                sum.simd.c_str(), sum.threads);
  }
  if (a.profile) std::fprintf(stderr, "%s", prof.profiler->table().c_str());
  return 0;
}

}  // namespace headsep::cli
