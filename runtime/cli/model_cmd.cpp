// headsep run --model: text reports through a BERT encoder, every (layer, head) measured; also
// one count of `headsep scaling --model`. Both open the job the same way (open_model_job).
#include <tbb/info.h>

#include <algorithm>
#include <charconv>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "support/text_util.hpp"
#include "headsep/attention.hpp"
#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "headsep/model_run.hpp"
#include "headsep/output.hpp"
#include "job/model_job.hpp"
#include "profile/memory.hpp"

namespace headsep::cli {

using job::ModelJob;

namespace {

ModelJob open_model_job(const RunArgs& a, bool report) {
  ModelJob job = job::open_model_job(a, report, [&] { return load_registry(a.plugin_dirs); });
  job.options.progress = !a.quiet && ::isatty(STDERR_FILENO) && dist::rank() == 0;  // the engine's bar: a terminal, rank 0
  return job;
}

/// One line each on stderr (after the outputs): how many reports were cut at the truncation
/// length, how many had no word token (the tokenizer's special tokens only, e.g. [CLS] [SEP] or
/// <s>); the summary counts them per scenario.
void report_text_status(const ModelSummary& sum) {
  std::uint64_t reports = 0, truncated = 0, empty = 0;
  for (const auto& sc : sum.scenarios) reports += sc.reports, truncated += sc.truncated_reports, empty += sc.empty_reports;
  if (truncated)
    std::fprintf(stderr, "headsep: note: %llu of %llu reports truncated at %u tokens (%s; -p max_tokens=N to change)\n",
                 static_cast<unsigned long long>(truncated), static_cast<unsigned long long>(reports), sum.max_tokens,
                 sum.max_tokens_from == "max_tokens" ? "-p max_tokens" : sum.max_tokens_from.c_str());
  if (empty)
    std::fprintf(stderr, "headsep: note: %llu of %llu reports have an empty or whitespace-only text: measured as %s (docs/MODEL.md)\n",
                 static_cast<unsigned long long>(empty), static_cast<unsigned long long>(reports),
                 sum.empty_text_tokens.empty() ? "the tokenizer's special tokens"
                                               : printable(sum.empty_text_tokens).c_str());
}

/// No silent zeros (docs/METRICS.md): one line when over half of the run's tokens carry 0 on every
/// axis — their contexts, differences and separations are then mostly 0 by construction.
void report_axis_coverage(const ModelSummary& sum) {
  std::uint64_t tokens = 0, without = 0;
  for (const auto& sc : sum.scenarios) tokens += sc.tokens, without += sc.tokens_without_axis_value;
  if (tokens == 0 || 2 * without <= tokens) return;
  std::fprintf(stderr,
               "headsep: warning: %.0f %% of the tokens (%llu of %llu) are 0 on every axis, so most contexts and "
               "separations are 0: add axes whose values every token has, --token-axes all, --semantic-axes FILE or "
               "--direction-axes FILE (docs/METRICS.md)\n",
               100.0 * double(without) / double(tokens), static_cast<unsigned long long>(without),
               static_cast<unsigned long long>(tokens));
}

/// The summary's run block of a --model job (start time now; threads and SIMD as the run reports them).
RunProvenance model_provenance(const RunArgs& a, const ModelJob& job) {
  return job::model_provenance(a, job, unsigned(dist::size()));
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

namespace {

/// --attention-layers: "all" or a comma list of layer numbers (checked against the model in run_model).
std::vector<std::uint32_t> parse_layers(const std::string& spec) {
  std::vector<std::uint32_t> v;
  if (spec == "all") return v;
  std::size_t i = 0;
  while (i <= spec.size()) {
    std::size_t j = spec.find(',', i);
    if (j == std::string::npos) j = spec.size();
    const std::string x = spec.substr(i, j - i);
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(x.data(), x.data() + x.size(), n);
    if (x.empty() || ec != std::errc() || end != x.data() + x.size())
      throw UsageError("--attention-layers: expected all or layer numbers L,M,..., got '" + spec + "'");
    v.push_back(n);
    i = j + 1;
  }
  return v;
}

/// The per-report outputs of a model run (docs/MODEL.md): --per-report rows and --attention maps,
/// the engine's writers as run_model's sinks; files opened before the run, committed with the rest.
struct ModelOutputs {
  std::vector<std::unique_ptr<OutputFile>> files;
  std::unique_ptr<ResultWriter> rows;
  std::unique_ptr<ResultSink> maps;
  std::optional<KeepReports> keep;  // --attention-reports: checked after the run, before commit()

  ModelOutputs(const RunArgs& a, const RunInfo& info, ModelRunOptions& mo) {
    if (!a.per_report.empty()) {
      const Format f = format_from_extension(a.per_report);
      if (f == Format::text) throw UsageError("--per-report with --model: rows as .jsonl or .csv");
      files.push_back(std::make_unique<OutputFile>(a.per_report));
      rows = make_writer(f, *files.back(), info);
      mo.sinks.push_back(rows.get());
    }
    if (!a.attention.empty()) {
      keep.emplace(a.attention_reports);
      mo.dump_reports = *keep;
      mo.dump_layers = parse_layers(a.attention_layers);
      files.push_back(std::make_unique<OutputFile>(a.attention));
      maps = make_attention_writer(*files.back(), *keep, info.kv_head_of);  // (the writer sees every kept report)
      mo.sinks.push_back(maps.get());
    }
  }
  void commit() {
    if (rows) rows->finish(0, 0);
    for (auto& f : files) f->commit();
  }
};

void check_model_args(const RunArgs& a, bool report) {
  if (!a.format.empty() || !a.output.empty() || !a.reports.empty())
    throw UsageError("--model writes the per layer x head summary (--summary PATH and the table), rows with "
                     "--per-report PATH and maps with --attention PATH; --format, --output and --report do not apply");
  if (a.attention.empty() && !(report && !a.attention_reports.empty()) &&
      (!a.attention_reports.empty() || a.attention_layers != "all"))
    throw UsageError("--attention-reports and --attention-layers choose what --attention PATH writes and, with "
                     "--report-html, the head view's reports: give --attention or --report-html");
  if (!a.per_report.empty()) format_from_extension(a.per_report);
  if (!a.attention.empty() || report) parse_keep(a.attention_reports), parse_layers(a.attention_layers);
  if (dist::size() > 1 && (a.mpi.csv != dist::Options::Csv::rank0 || a.mpi.rows != dist::Options::Rows::gather))
    throw UsageError("--model under mpirun: --mpi-csv ranges and --mpi-rows offsets do not apply (rank 0 reads the "
                     "text and gathers every row)");
  if (dist::size() > 1 && report)
    throw UsageError("--model under mpirun: --report-html and --plot-svg need the top reports' maps in one process; "
                     "run the report without mpirun");
}

void print_model_table(const ModelSummary& sum) {
  std::uint64_t reports = 0, tokens = 0;
  for (const auto& sc : sum.scenarios) reports += sc.reports, tokens += sc.tokens;
  std::fprintf(data_stdout(), "%s", sum.table().c_str());
  const double peak = measure_fp32_peak_gflops();
  std::fprintf(data_stdout(), "%llu reports, %llu tokens in %.3f s: %.0f tokens/s, forward %.1f GFLOP/s = %.0f %% of %u x %.0f GFLOP/s fp32 peak (%s, %u thread%s)\n",
              static_cast<unsigned long long>(reports), static_cast<unsigned long long>(tokens), sum.seconds,
              sum.seconds > 0 ? double(tokens) / sum.seconds : 0.0, sum.seconds > 0 ? sum.gflop / sum.seconds : 0.0,
              sum.seconds > 0 ? 100.0 * sum.gflop / sum.seconds / (peak * sum.threads) : 0.0, sum.threads, peak,
              sum.simd.c_str(), sum.threads, sum.threads == 1 ? "" : "s");
}

}  // namespace

/// --model DIR: text reports (text / ops-text) through a BERT encoder, every (layer, head)
/// measured (model_run.hpp); the per layer x head summary as a table and --summary JSON, the
/// rows (--per-report) and maps (--attention) through the engine's writers. Under mpirun, ranks
/// 1..K-1 compute their share of the chunks and rank 0 writes everything (runtime/dist/).
int model_cmd(const RunArgs& a) {
  const bool report = !a.report_html.empty() || !a.plot_svg.empty();
  check_model_args(a, report);
  check_outputs(a);
  CommitGroup group;  // the summary, rows, maps, report and trace appear together or not at all
  ModelJob job = open_model_job(a, report);
  const std::string& axes_spec = job.axes_spec;
  const RunOptions& ro = job.run;
  const Architecture& model = *job.model;
  ModelRunOptions& mo = job.options;
  ReportSource* const source = job.source.get();
  const AxisMap& axes = *job.axes;
  // Several ranks on one node share its cores unless --threads says (as execute()).
  if (a.threads == 0 && dist::local_size() > 1)
    mo.threads = std::max(1u, unsigned(tbb::info::default_concurrency()) / unsigned(dist::local_size()));
  if (dist::size() > 1 && dist::rank() != 0) {
    if (!a.attention.empty()) mo.dump_reports = parse_keep(a.attention_reports), mo.dump_layers = parse_layers(a.attention_layers);
    dist::serve_model(*source, model, axes, mo);
    return 0;
  }
  ModelOutputs outputs(a, model_run_info(model, axes, mo.model_axes), mo);
  // --attention-reports with a report: those reports' whole maps, every dumped layer, for the head view.
  std::unique_ptr<report::ChosenMaps> chosen;
  if (report && !a.attention_reports.empty()) {
    if (!outputs.keep) outputs.keep = parse_keep(a.attention_reports);  // (its copies share what they saw)
    if (!mo.dump_reports) mo.dump_reports = *outputs.keep, mo.dump_layers = parse_layers(a.attention_layers);
    mo.sinks.push_back((chosen = std::make_unique<report::ChosenMaps>(*outputs.keep)).get());
  }
  std::unique_ptr<ChunkExchange> exchange;
  if (dist::size() > 1) mo.exchange = (exchange = dist::make_merger(*source, true)).get();
  ProfileRun prof(a);  // --profile / --trace: the engine's profiler, the model's stages
  mo.profiler = prof.profiler.get();
  RunProvenance origin = model_provenance(a, job);
  const ModelSummary sum = run_model(*source, model, axes, mo);
  if (outputs.keep) {  // before anything is committed: no output left
    std::uint64_t reports = 0;
    for (const auto& sc : sum.scenarios) reports += sc.reports;
    outputs.keep->check_matched(reports);
  }
  origin.model_name = sum.model, origin.execution.threads = sum.threads, origin.execution.simd = sum.simd;
  if (report) {  // docs/REPORTS.md: the layer x head grids
    RunStats st;
    for (const auto& sc : sum.scenarios) st.reports += sc.reports, st.groups += sc.reports;
    st.seconds = sum.seconds;
    report::Header h = report_header(a, ro, st, true);
    h.weighting_plugin = "model " + sum.model + " (" + a.model + ")", h.threads = sum.threads, h.simd = sum.simd;
    if (axes_spec != a.axes) h.params.push_back("--axes " + axes_spec);
    report::ReportData data = report::build(sum, h);
    if (chosen) data.chosen = chosen->take();
    report::write(data, a.report_html, a.plot_svg);
  }
  if (!a.summary.empty()) {
    OutputFile out(a.summary);
    const std::string text = stamp_summary(sum.json(), "model", origin, 1);
    out.write(a.profile ? with_profile(text, *prof.profiler, " ") : text);
    out.commit();
  }
  prof.commit_trace();
  outputs.commit();
  group.commit();
  if (!a.quiet) print_model_table(sum);
  if (a.profile) {
    std::fprintf(stderr, "%s", prof.profiler->table().c_str());
    std::fprintf(stderr, "%s", prof::memory_line(model.weight_memory(), prof::peak_rss_bytes()).c_str());
  }
  report_text_status(sum);
  report_axis_coverage(sum);
  return 0;
}

}  // namespace headsep::cli
