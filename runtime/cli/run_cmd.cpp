// headsep run: its options, the checks made before anything is opened, and execute() (the
// engine run into the outputs asked for), which example and sweep reuse. --model: model_cmd.cpp.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <oneapi/tbb/info.h>

#include "cli/commands.hpp"
#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"
#include "headsep/error.hpp"
#include "support/progress.hpp"
#include "support/text_util.hpp"

namespace headsep::cli {

/// --attention-reports: first:N | all | index:I,J,... | id:A,B,... -> which reports keep maps.
KeepReports::KeepReports(const std::string& given) : spec_(given.empty() ? "first:8" : given) {  // (not given: the default)
  const std::string& spec = spec_;
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon), rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::vector<std::string> list;
  for (std::size_t i = 0; i <= rest.size() && !rest.empty();) {
    auto j = rest.find(',', i);
    if (j == std::string::npos) j = rest.size();
    if (j > i) list.push_back(rest.substr(i, j - i));
    i = j + 1;
  }
  auto number = [&](const std::string& x) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(x.data(), x.data() + x.size(), v);
    if (ec != std::errc() || p != x.data() + x.size() || x.empty())
      throw UsageError("--attention-reports " + printable(spec, 200) + ": '" + printable(x, 200) + "' is not a report index");
    return v;
  };
  if (kind == "all" && rest.empty()) {
    kind_ = Kind::all;
  } else if (kind == "first" && !rest.empty()) {
    kind_ = Kind::first, first_ = number(rest);
  } else if (kind == "index" && !list.empty()) {
    kind_ = Kind::index;
    for (const auto& x : list) index_.push_back(number(x));
    std::sort(index_.begin(), index_.end());
    index_.erase(std::unique(index_.begin(), index_.end()), index_.end());
  } else if (kind == "id" && !list.empty()) {
    kind_ = Kind::id;
    ids_ = std::move(list);
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  } else {
    throw UsageError("--attention-reports: expected first:N, all, index:I,J,... or id:A,B,..., got '" + printable(spec, 200) + "'");
  }
  seen_ = std::make_shared<std::vector<std::atomic<bool>>>(std::max(index_.size(), ids_.size()));
}

bool KeepReports::operator()(const ReportBatch& b, std::size_t r) const {
  std::size_t at = 0;
  switch (kind_) {
    case Kind::all: return true;
    case Kind::first: return b.first_report + r < first_;
    case Kind::index: {
      const auto it = std::lower_bound(index_.begin(), index_.end(), b.first_report + r);
      if (it == index_.end() || *it != b.first_report + r) return false;
      at = std::size_t(it - index_.begin());
      break;
    }
    case Kind::id: {
      const std::string id = b.report_id(r);
      const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
      if (it == ids_.end() || *it != id) return false;
      at = std::size_t(it - ids_.begin());
      break;
    }
  }
  (*seen_)[at].store(true, std::memory_order_relaxed);  // read after the run's threads have joined
  return true;
}

void KeepReports::check_matched(std::uint64_t reports) const {
  for (std::size_t i = 0; i < seen_->size(); ++i) {
    if ((*seen_)[i].load(std::memory_order_relaxed)) continue;
    const std::string head = "--attention-reports " + printable(spec_, 200) + ": ";
    if (kind_ == Kind::index)
      throw Error(head + "no report has index " + std::to_string(index_[i]) + " (the input has " + std::to_string(reports) +
                  " report" + (reports == 1 ? "" : "s") + ", indices from 0)");
    throw Error(head + "no report has id '" + printable(ids_[i], 200) + "'");
  }
}

CLI::App* add_run(CLI::App& app, RunArgs& ra) {
  auto* runc = app.add_subcommand("run", "Analyse a report set: a scenario generator through a weighting scheme");
  runc->add_option("--scenario,-s", ra.scenario, "Scenario generator plugin (see 'headsep plugins')");
  runc->add_option("--weighting,-w", ra.weighting, "Weighting scheme plugin (default: table when the data carries weights)");
  add_plugin_options(*runc, ra);
  runc->add_option("--input,-i", ra.input, "CSV in the seed schema ('-' = stdin): --scenario csv -p path=FILE --weighting table");
  runc->add_option("--report", ra.reports, "Report id to analyse (repeatable; default: all)");
  runc->add_option("--axes", ra.axes, "Context axes, e.g. 'd=decision_axis;ec=evidence_axis+condition_axis'")
      ->capture_default_str();
  runc->add_option("--format,-f", ra.format, "Rows on stdout (or --output) as text (the seed's format), jsonl or csv");
  runc->add_option("--output,-o", ra.output, "Write the rows to this file (atomically) instead of stdout");
  runc->add_option("--per-report", ra.per_report, "Stream every (report, scenario) row to PATH (.jsonl or .csv)");
  runc->add_option("--summary", ra.summary, "Write the per-scenario summary (stats, quantiles, histogram, top-k) as JSON");
  runc->add_option("--top", ra.top, "Reports with the largest separation kept per scenario")
      ->check(CLI::Range(std::size_t(0), std::size_t(1) << 20))
      ->capture_default_str();
  runc->add_option("--bins", ra.bins, "Histogram bins of head_separation")
      ->check(CLI::Range(std::size_t(1), std::size_t(100000)))
      ->capture_default_str();
  runc->add_flag("--quiet,-q", ra.quiet, "No progress bar and no summary table");
  runc->add_option("--threads", ra.threads, "Worker threads (0 = all cores)");
  runc->add_option("--simd", ra.simd, "Force a SIMD level: scalar, sse2, avx2, avx512 (default: best, or $HEADSEP_SIMD)");
  runc->add_option("--precision", ra.precision, "f64 (default, the seed's arithmetic) or f32")->capture_default_str();
  check_chunk_option(*runc->add_option("--chunk", ra.chunk,
                                       "Reports per batch (default 8192, fewer to keep ~1 MiB of tokens per batch when "
                                       "the source has random access; attention schemes: 65536 / d_model, within 32..8192)"));
  runc->add_option("--attention", ra.attention,
                   "Attention schemes: write the attention maps (and multi-head output) of chosen reports as JSON lines");
  runc->add_option("--attention-reports", ra.attention_reports,
                   "Reports --attention keeps (default first:8) and, with a report, the head view shows whole: first:N, all, "
                   "index:I,J,.., id:A,B,..")
      ->capture_default_str();
  runc->add_option("--attention-layers", ra.attention_layers, "--model: the layers whose maps --attention writes: all, or L,M,...")
      ->capture_default_str();
  runc->add_option("--model", ra.model,
                   "A BERT encoder folder (config.json, model.safetensors): its every (layer, head) measured on text reports "
                   "(--scenario text or ops-text)");
  add_model_axes_options(*runc, ra);
  runc->add_option("--max-report-mb", ra.max_report_mb,
                   "Attention: refuse a report whose working memory exceeds this many MiB")->capture_default_str();
  runc->add_flag("--profile", ra.profile,
                 "Where the time goes: per stage, plugin and thread (table on stderr, 'profile' in --summary)");
  runc->add_option("--trace", ra.trace, "Write a Chrome trace-event JSON timeline (Perfetto, chrome://tracing)");
  runc->add_option("--report-html", ra.report_html, "Write an offline HTML report (seed plot, distributions, attention)");
  runc->add_option("--plot-svg", ra.plot_svg, "Write each figure of the report as an SVG file into this folder");
  dist::add_options(*runc, ra.mpi);  // --mpi-csv, --mpi-rows, --mpi-csv-block, --mpi-stats
  return runc;
}

/// Runs a set-up source/weighting into the outputs asked for; files appear only when complete.
///  - rows (one per report and scenario): --per-report PATH (format from the extension), or
///    --output PATH / stdout in --format (default text). Rows go to stdout when --format is
///    given, or when nothing else is asked for and the data names its scenarios (CSV input).
///  - the per-scenario summary: JSON with --summary PATH, and a table on stdout when stdout is
///    not carrying rows and no rows were asked for, or with --summary/--per-report (not --quiet).
int execute(Setup& s, const RunArgs& a, const std::function<void(const Summary&, const RunStats&)>& after) {
  RunOptions opt = job::engine_options(a, s);  // the attention chunk and the report memory bound too
  opt.progress = !a.quiet && ::isatty(STDERR_FILENO);
  RunInfo info = run_info(s);
  const bool report = !a.report_html.empty() || !a.plot_svg.empty();
  const bool rows_to_stdout = !a.sweep_value && a.output.empty() &&
                              (!a.format.empty() || (a.per_report.empty() && a.summary.empty() && s.source->schema().names_scenarios));
  std::vector<ResultSink*> sinks;
  std::vector<std::unique_ptr<OutputFile>> files;
  std::vector<std::unique_ptr<ResultWriter>> writers;
  std::vector<std::unique_ptr<ResultSink>> writers_any;
  auto add_rows = [&](const std::string& path, Format format) {
    files.push_back(std::make_unique<OutputFile>(path));
    writers.push_back(make_writer(format, *files.back(), info));
    sinks.push_back(writers.back().get());
  };
  std::optional<KeepReports> keep;  // --attention-reports, checked after the run: every index or id it names was seen
  if (!a.attention.empty()) {
    if (!info.attention)
      throw UsageError("--attention: weighting '" + a.weighting + "' is not an attention scheme (try qkv or positional)");
    opt.keep_maps = *(keep = parse_keep(a.attention_reports));
  }
  // --attention-reports with a report: those reports' whole maps for the head view (ChosenMaps).
  const bool pick = report && info.attention && !a.attention_reports.empty();
  if (pick && !keep) keep = parse_keep(a.attention_reports);  // (its copies share what they saw)
  if (pick && !opt.keep_maps) opt.keep_maps = *keep;
  // Scale-out (runtime/dist/): several ranks on one node share its cores unless --threads says;
  // ranks 1..K-1 compute their share and leave every output to rank 0.
  if (a.threads == 0 && dist::local_size() > 1)
    opt.threads = std::max(1u, unsigned(oneapi::tbb::info::default_concurrency()) / unsigned(dist::local_size()));
  if (report && info.attention) opt.keep_top_maps = a.top;  // the report's maps: the summary's top (docs/REPORTS.md)
  bool full = !a.per_report.empty() || !a.output.empty() || rows_to_stdout || !a.attention.empty() || report;
  // --mpi-rows offsets (measured alternative, docs/DISTRIBUTED.md): each rank formats its rows
  // and writes them at their offset in rank 0's file; only the summary's rows travel.
  const bool offsets = dist::size() > 1 && a.mpi.rows == dist::Options::Rows::offsets;
  if (offsets) {
    const bool one_file = a.per_report.empty() != (a.output.empty() || rows_to_stdout) && !rows_to_stdout;
    const Format f = !one_file ? Format::text : !a.per_report.empty() ? format_from_extension(a.per_report)
                                              : a.format.empty() ? Format::text : parse_format(a.format);
    if (!one_file || f == Format::text || !a.attention.empty() || report || dist::local_size() != dist::size())
      throw UsageError("--mpi-rows offsets: rows to one file (--per-report or --output) in csv or jsonl, no --attention or report, all ranks on one host");
    dist::set_offset_rows(f, info);
    full = false;
  }
  if (dist::size() > 1 && dist::rank() != 0) {
    dist::serve(*s.source, *s.weighting, s.axes, opt, full);
    return 0;
  }
  CommitGroup outputs;  // every file of this run appears together, at the end, or none does
  std::unique_ptr<ChunkExchange> exchange;
  if (dist::size() > 1) opt.exchange = (exchange = dist::make_merger(*s.source, full)).get();
  if (!a.per_report.empty()) add_rows(a.per_report, format_from_extension(a.per_report));
  if (!a.output.empty() || rows_to_stdout) add_rows(a.output, a.format.empty() ? Format::text : parse_format(a.format));
  if (offsets) {  // the writer's sink slot goes to the one that leaves other ranks' rows to them
    writers_any.push_back(dist::offset_rows_sink(*exchange, *writers.back(), *files.back()));
    sinks.back() = writers_any.back().get();
  }
  if (!a.attention.empty()) {
    files.push_back(std::make_unique<OutputFile>(a.attention));
    writers_any.push_back(make_attention_writer(*files.back(), opt.keep_maps));
    sinks.push_back(writers_any.back().get());
  }
  std::unique_ptr<report::Collector> collector;  // what the report needs beyond the summary
  if (report) {
    report::Limits limits;
    limits.map_reports = a.top;
    collector = std::make_unique<report::Collector>(info, limits);
    sinks.push_back(collector.get());
  }
  std::unique_ptr<report::ChosenMaps> chosen;
  if (pick) sinks.push_back((chosen = std::make_unique<report::ChosenMaps>(*keep)).get());
  std::unique_ptr<Summary> summary;
  // The table is the answer when no rows were asked for, or alongside --summary/--per-report.
  const bool table = !rows_to_stdout && !a.quiet && (a.output.empty() || !a.summary.empty() || !a.per_report.empty());
  if (!a.summary.empty() || table || report || after) {
    summary = std::make_unique<Summary>(info, SummaryOptions{a.top, a.bins, 0.005, opt.simd});
    sinks.push_back(summary.get());
  }
  ProfileRun prof(a);  // --profile / --trace (runtime/profile/)
  opt.profiler = prof.profiler.get();
  RunProvenance origin = provenance(a, s.plugins, opt, info.axis_names, info.attention);
  RunStats stats = run(*s.source, *s.weighting, s.axes, opt, sinks);
  if (keep) keep->check_matched(stats.reports);  // before anything is committed: no output left
  origin.execution.batch = stats.batch;
  for (auto& w : writers) w->finish(s.source->rows_read(), stats.source_rows);
  if (!a.summary.empty()) {
    OutputFile out(a.summary);
    std::string text = stamp_summary(summary->json(), "run", origin, 2);
    if (a.profile) text = with_profile(text, *prof.profiler, "  ");
    out.write(text);
    out.commit();
  }
  if (report) {
    report::ReportData data = report::build(*summary, *collector, report_header(a, opt, stats, info.attention));
    if (chosen) data.chosen = chosen->take();
    report::write(data, a.report_html, a.plot_svg);
  }
  if (after) after(*summary, stats);
  prof.commit_trace();
  for (auto& f : files) f->commit();
  outputs.commit();
  if (table) {
    std::fprintf(data_stdout(), "%s", summary->table().c_str());
    std::fprintf(data_stdout(), "%llu reports, %llu (report, scenario) groups in %.3f s: %s groups/s (%s, %s)\n",
                static_cast<unsigned long long>(stats.reports), static_cast<unsigned long long>(stats.groups),
                stats.seconds, detail::human_count(stats.seconds > 0 ? double(stats.groups) / stats.seconds : 0.0).c_str(),
                std::string(to_string(opt.simd)).c_str(),
                info.attention ? "attention f32, metrics summed in f64" : opt.precision == Precision::f64 ? "f64" : "f32");
  }
  if (a.profile) std::fprintf(stderr, "%s", prof.profiler->table().c_str());
  return 0;
}

int run_cmd(const RunArgs& a) {
  if (!a.model.empty()) return model_cmd(a);
  if (a.attention_layers != "all") throw UsageError("--attention-layers applies to --model runs (a model's layers)");
  if (!a.semantic_axes.empty() || !a.direction_axes.empty() || !a.token_axes.empty())
    throw UsageError("--semantic-axes, --direction-axes and --token-axes apply to --model runs (their values come from the model and its tokenizer)");
  // Usage errors before any plugin is loaded or file touched.
  if (!a.format.empty()) parse_format(a.format);
  if (!a.per_report.empty()) format_from_extension(a.per_report);
  run_options(a);
  if (!a.attention_reports.empty()) parse_keep(a.attention_reports);
  if (dist::size() > 1 && a.input == "-")
    throw UsageError("--input -: standard input reaches rank 0 only; under mpirun give a file every rank can open");
  if (dist::rank() == 0) check_outputs(a);
  Setup s = build_setup(a);
  // --mpi-csv ranges (measured alternative, docs/DISTRIBUTED.md): every rank parses its
  // byte ranges of the CSV instead of rank 0 reading it all.
  if (dist::size() > 1 && !a.input.empty() && a.mpi.csv == dist::Options::Csv::ranges) {
    if (!a.reports.empty() || !a.attention.empty() || !a.report_html.empty() || !a.plot_svg.empty())
      throw UsageError("--mpi-csv ranges: --report, --attention and the report need report indices while computing; run without it");
    CsvSourceOptions o;
    o.path = a.input;
    o.features = s.source->schema().feature_names;
    o.weights = s.source->schema().given_heads > 0;
    s.source = dist::split_csv(o, s.source->schema(), a.mpi);
  }
  return execute(s, a);
}

}  // namespace headsep::cli
