// headsep — command-line front end.
// Exit status: 0 ok, 1 bad input or plugin error (message on stderr), 2 usage error.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <iostream>
#include <latch>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <oneapi/tbb/info.h>
#include <string>
#include <thread>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/axes.hpp"
#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "headsep/model_run.hpp"
#include "headsep/output.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"
#include "headsep/profile.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"
#include "headsep/summary.hpp"
#include "report/report.hpp"
#include "support/text_util.hpp"
#include "profile/scaling.hpp"
#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"

namespace headsep {
extern const std::string_view seed_csv;
}

namespace {

using namespace headsep;

struct RunArgs {
  std::string input, axes{kSeedAxes}, format, output, simd, precision = "f64";
  std::string per_report, summary;             // --per-report PATH, --summary PATH
  std::size_t top = 10, bins = 20;
  bool quiet = false;
  std::string scenario, weighting;             // plugin names
  std::vector<std::string> params;             // -p [plugin.]key=value
  std::vector<std::string> plugin_dirs;        // --plugin-dir
  std::vector<std::string> reports;
  unsigned threads = 0;
  std::size_t chunk = 0;  // 0 = automatic (8192; attention schemes: by X's width)
  std::string attention, attention_reports = "first:8";  // --attention PATH, --attention-reports SPEC
  std::size_t max_report_mb = 2048;
  std::string model;  // --model DIR: a BERT encoder's heads are the heads (model_cmd)
  std::string report_html, plot_svg;            // --report-html PATH, --plot-svg DIR (runtime/report)
  std::string command_line, scenario_label;     // for the report's header
  bool sweep_value = false;                     // one value of `headsep sweep`: no rows, no table
  bool profile = false;  // --profile: the stage table on stderr, a "profile" section in --summary
  std::string trace;     // --trace PATH: Chrome trace-event JSON
  bool slot_by_slot = false;  // --slot-by-slot: RunOptions::all_slots_at_once = false
};

/// --attention-reports: first:N | all | index:I,J,... | id:A,B,... -> which reports keep maps.
std::function<bool(const ReportBatch&, std::size_t)> parse_keep(const std::string& spec) {
  auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon), rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto list = [&] {
    std::vector<std::string> v;
    std::size_t i = 0;
    while (i <= rest.size() && !rest.empty()) {
      auto j = rest.find(',', i);
      if (j == std::string::npos) j = rest.size();
      if (j > i) v.push_back(rest.substr(i, j - i));
      i = j + 1;
    }
    return v;
  };
  auto number = [&](const std::string& x) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(x.data(), x.data() + x.size(), v);
    if (ec != std::errc() || p != x.data() + x.size() || x.empty())
      throw UsageError("--attention-reports " + spec + ": '" + x + "' is not a report index");
    return v;
  };
  if (kind == "all" && rest.empty()) return [](const ReportBatch&, std::size_t) { return true; };
  if (kind == "first" && !rest.empty()) {
    const std::uint64_t n = number(rest);
    return [n](const ReportBatch& b, std::size_t r) { return b.first_report + r < n; };
  }
  if (kind == "index" && !rest.empty()) {
    std::set<std::uint64_t> keep;
    for (const auto& x : list()) keep.insert(number(x));
    return [keep](const ReportBatch& b, std::size_t r) { return keep.count(b.first_report + r) > 0; };
  }
  if (kind == "id" && !rest.empty()) {
    auto v = list();
    std::set<std::string> keep(v.begin(), v.end());
    return [keep](const ReportBatch& b, std::size_t r) { return keep.count(b.report_id(r)) > 0; };
  }
  throw UsageError("--attention-reports: expected first:N, all, index:I,J,... or id:A,B,..., got '" + spec + "'");
}

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

/// What a run needs: plugins loaded, source opened, weighting created, axes bound. Members are
/// destroyed in reverse order: the weighting (which refers to the source's schema) first.
struct Setup {
  PluginRegistry registry;
  std::unique_ptr<ReportSource> source;
  std::unique_ptr<Weighting> weighting;
  AxisMap axes;
};

PluginRegistry load_registry(const std::vector<std::string>& cli_dirs) {
  for (const auto& d : cli_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) throw UsageError("--plugin-dir " + d + ": no such directory");
  }
  return PluginRegistry::discover(plugin_search_path(cli_dirs));
}

bool given(const std::vector<std::string>& params, const PluginInfo& p, const std::string& key) {
  for (const auto& item : params) {
    auto k = item.substr(0, item.find('='));
    if (k == key || k == p.name + "." + key || k == "scenario." + key) return true;
  }
  return false;
}

bool declares(const PluginInfo& p, const std::string& key) {
  for (const auto& q : p.params)
    if (q.name == key) return true;
  return false;
}

/// Builds (source, weighting, axes) from the arguments; every plugin is loaded here, before
/// any worker thread starts. `--input FILE` = `--scenario csv -p path=FILE --weighting table`.
Setup build_setup(const RunArgs& a) {
  auto specs = parse_axes(a.axes);
  std::string scenario = a.scenario, weighting = a.weighting;
  std::vector<std::string> params = a.params;
  if (!a.input.empty()) {
    if (!scenario.empty()) throw UsageError("--input and --scenario exclude each other (--input FILE = --scenario csv -p path=FILE)");
    scenario = "csv";
    params.insert(params.begin(), "csv.path=" + a.input);
    if (weighting.empty()) weighting = "table";
  }
  if (scenario.empty()) throw UsageError("run needs --scenario NAME or --input FILE (see 'headsep plugins')");

  Setup s;
  s.registry = load_registry(a.plugin_dirs);
  const PluginInfo& sp = s.registry.require(scenario, PluginKind::scenario);
  // The scenario generator reads the columns the axes use, and the reports asked for.
  if (declares(sp, "features") && !given(params, sp, "features"))
    params.push_back(sp.name + ".features=" + join(axis_columns(specs)));
  if (!a.reports.empty()) {
    if (!declares(sp, "report")) throw UsageError("--report: scenario plugin '" + sp.name + "' does not select reports");
    params.push_back(sp.name + ".report=" + join(a.reports));
  }
  const PluginInfo* wp = nullptr;
  if (!weighting.empty()) wp = &s.registry.require(weighting, PluginKind::weighting);
  // Split -p items before opening anything, so a typo is a usage error, not a half-open run.
  PluginInfo none;
  none.kind = PluginKind::weighting;
  none.name = "(none)";
  auto [sparams, wparams] = split_params(params, sp, wp ? *wp : none);
  s.source = open_scenario_plugin(s.registry, scenario, sparams);
  if (!wp) {
    if (s.source->schema().given_heads == 0)
      throw UsageError("run needs --weighting NAME: the data of scenario plugin '" + scenario +
                       "' carries no weights (try axis-focus or uniform; see 'headsep plugins')");
    wp = &s.registry.require("table", PluginKind::weighting);
  }
  s.weighting = open_weighting_plugin(s.registry, wp->name, wparams, s.source->schema());
  s.axes = AxisMap::bind(specs, s.source->schema().feature_names);
  for (const auto& f : s.registry.failures()) std::fprintf(stderr, "headsep: warning: skipped %s\n", f.what.c_str());
  return s;
}

RunOptions run_options(const RunArgs& a) {
  RunOptions opt;
  opt.chunk_reports = a.chunk ? a.chunk : 8192;
  opt.threads = a.threads;
  opt.simd = a.simd.empty() ? default_level() : parse_simd_level(a.simd);
  if (a.precision == "f64") opt.precision = Precision::f64;
  else if (a.precision == "f32") opt.precision = Precision::f32;
  else throw UsageError("--precision must be f64 or f32");
  opt.all_slots_at_once = !a.slot_by_slot;
  return opt;
}

/// Runs a set-up source/weighting into the outputs asked for; files appear only when complete.
///  - rows (one per report and scenario): --per-report PATH (format from the extension), or
///    --output PATH / stdout in --format (default text). Rows go to stdout when --format is
///    given, or when nothing else is asked for and the data names its scenarios (CSV input).
///  - the per-scenario summary: JSON with --summary PATH, and a table on stdout when stdout is
///    not carrying rows and no rows were asked for, or with --summary/--per-report (not --quiet).
/// What the report's header says about a run (docs/REPORTS.md).
report::Header report_header(const RunArgs& a, const RunOptions& opt, const RunStats& st, bool attention) {
  report::Header h;
  h.command_line = a.command_line;
  h.version = HEADSEP_VERSION;
  h.scenario_plugin = !a.scenario_label.empty() ? a.scenario_label : a.input.empty() ? a.scenario : "csv (--input " + a.input + ")";
  h.weighting_plugin = a.weighting.empty() ? "table" : a.weighting;
  h.params = a.params;
  if (a.axes != kSeedAxes) h.params.push_back("--axes " + a.axes);
  for (const auto& r : a.reports) h.params.push_back("--report " + r);
  h.reports = st.reports, h.groups = st.groups, h.seconds = st.seconds;
  h.threads = a.threads ? a.threads : unsigned(tbb::info::default_concurrency());
  h.simd = std::string(to_string(opt.simd));
  h.precision = attention ? "attention f32, metrics summed in f64" : opt.precision == Precision::f64 ? "f64" : "f32";
  return h;
}

/// The summary JSON with the profile as its last member, "profile" (the profiler's dump(2)
/// layout, one `indent` deeper: the summary's own indent).
std::string with_profile(std::string text, const Profiler& profiler, const std::string& indent) {
  std::string p = profiler.json(), indented;
  for (char c : p) indented += c == '\n' ? "\n" + indent : std::string(1, c);
  text = text.substr(0, text.rfind('}'));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text + ",\n" + indent + "\"profile\": " + indented + "\n}\n";
}

/// --profile / --trace of one run, the engine's or the model's: the profiler (null without
/// either option) and the trace file, opened before the run so an unwritable path fails first.
struct ProfileRun {
  std::unique_ptr<Profiler> profiler;
  std::unique_ptr<OutputFile> trace;
  explicit ProfileRun(const RunArgs& a) {
    if (!a.profile && a.trace.empty()) return;
    ProfileOptions po;
    po.trace = !a.trace.empty();
    profiler = std::make_unique<Profiler>(po);
    if (!a.trace.empty()) trace = std::make_unique<OutputFile>(a.trace);
  }
  void commit_trace() {
    if (trace) trace->write(profiler->trace_json()), trace->commit();
  }
};

int execute(Setup& s, const RunArgs& a, const std::function<void(const Summary&, const RunStats&)>& after = {}) {
  RunOptions opt = run_options(a);
  opt.progress = !a.quiet && ::isatty(STDERR_FILENO);
  RunInfo info{s.axes.names(), s.weighting->heads()};
  info.attention = s.weighting->per_query() || s.weighting->attention(0) != nullptr;
  opt.max_report_bytes = a.max_report_mb << 20;
  if (info.attention && a.chunk == 0) {
    // A batch holds chunk x tokens x d_model floats of X (and the engine keeps 2 x threads batches
    // alive): scale the default so wide embeddings do not multiply memory, 64 KiB-floats / width.
    const auto& sc = s.source->schema();
    const std::size_t width = std::max<std::size_t>(1, sc.d_model ? sc.d_model : sc.feature_names.size());
    opt.chunk_reports = std::clamp<std::size_t>(65536 / width, 32, 8192);
  }
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
  if (!a.attention.empty()) {
    if (!info.attention)
      throw UsageError("--attention: weighting '" + a.weighting + "' is not an attention scheme (try qkv or positional)");
    opt.keep_maps = parse_keep(a.attention_reports);
  }
  // Scale-out (runtime/dist/): several ranks on one node share its cores unless --threads says;
  // ranks 1..K-1 compute their share and leave every output to rank 0.
  if (a.threads == 0 && dist::local_size() > 1)
    opt.threads = std::max(1u, unsigned(oneapi::tbb::info::default_concurrency()) / unsigned(dist::local_size()));
  if (report && info.attention) opt.keep_top_maps = a.top;  // the report's maps: the summary's top (docs/REPORTS.md)
  bool full = !a.per_report.empty() || !a.output.empty() || rows_to_stdout || !a.attention.empty() || report;
  // HEADSEP_ROWS=offsets (measured alternative, docs/DISTRIBUTED.md): each rank formats its rows
  // and writes them at their offset in rank 0's file; only the summary's rows travel.
  const bool offsets = dist::size() > 1 && dist::rows_by_offset_requested();
  if (offsets) {
    const bool one_file = a.per_report.empty() != (a.output.empty() || rows_to_stdout) && !rows_to_stdout;
    const Format f = !one_file ? Format::text : !a.per_report.empty() ? format_from_extension(a.per_report)
                                              : a.format.empty() ? Format::text : parse_format(a.format);
    if (!one_file || f == Format::text || !a.attention.empty() || report || dist::local_size() != dist::size())
      throw UsageError("HEADSEP_ROWS=offsets: rows to one file (--per-report or --output) in csv or jsonl, no --attention or report, all ranks on one host");
    dist::set_offset_rows(f, info);
    full = false;
  }
  if (dist::size() > 1 && dist::rank() != 0) {
    dist::serve(*s.source, *s.weighting, s.axes, opt, full);
    return 0;
  }
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
  std::unique_ptr<Summary> summary;
  // The table is the answer when no rows were asked for, or alongside --summary/--per-report.
  const bool table = !rows_to_stdout && !a.quiet && (a.output.empty() || !a.summary.empty() || !a.per_report.empty());
  if (!a.summary.empty() || table || report || after) {
    summary = std::make_unique<Summary>(info, SummaryOptions{a.top, a.bins, 0.005});
    sinks.push_back(summary.get());
  }
  ProfileRun prof(a);  // --profile / --trace (runtime/profile/)
  opt.profiler = prof.profiler.get();
  RunStats stats = run(*s.source, *s.weighting, s.axes, opt, sinks);
  for (auto& w : writers) w->finish(s.source->rows_read(), stats.source_rows);
  if (!a.summary.empty()) {
    OutputFile out(a.summary);
    std::string text = summary->json();
    if (a.profile) text = with_profile(text, *prof.profiler, "  ");
    out.write(text);
    out.commit();
  }
  if (report)
    report::write(report::build(*summary, *collector, report_header(a, opt, stats, info.attention)), a.report_html, a.plot_svg);
  if (after) after(*summary, stats);
  prof.commit_trace();
  for (auto& f : files) f->commit();
  if (table) {
    std::printf("%s", summary->table().c_str());
    std::printf("%llu reports, %llu (report, scenario) groups in %.3f s: %.3g groups/s (%s, %s)\n",
                static_cast<unsigned long long>(stats.reports), static_cast<unsigned long long>(stats.groups),
                stats.seconds, stats.seconds > 0 ? double(stats.groups) / stats.seconds : 0.0,
                std::string(to_string(opt.simd)).c_str(),
                info.attention ? "attention f32, metrics summed in f64" : opt.precision == Precision::f64 ? "f64" : "f32");
  }
  if (a.profile) std::fprintf(stderr, "%s", prof.profiler->table().c_str());
  return 0;
}

struct ModelJob;
ModelJob open_model_job(const RunArgs& a, bool report);
prof::ScalingPoint model_scaling_point(const RunArgs& a, unsigned threads);

std::string read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": " + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, got);
  std::fclose(f);
  return text;
}

/// A private folder under $TMPDIR for one command's scratch files, removed with everything in it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "headsep-scaling-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw Error("cannot create a folder in " + std::filesystem::temp_directory_path().string() + ": " + std::strerror(errno));
    path = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// One count of `headsep scaling --ranks`: the job as `headsep run` under the MPI launcher with
/// `ranks` ranks of a.threads threads each, its summary (with rank 0's profile) read back. The
/// launcher is a command template, split at spaces, with {ranks} standing for the count.
prof::ScalingPoint rank_scaling_point(const RunArgs& a, unsigned ranks, const std::string& launcher,
                                      const std::filesystem::path& dir) {
  std::vector<std::string> argv;
  bool placed = false;
  for (std::size_t i = 0; i < launcher.size();) {
    while (i < launcher.size() && launcher[i] == ' ') ++i;
    std::size_t j = launcher.find(' ', i);
    if (j == std::string::npos) j = launcher.size();
    if (j > i) {
      std::string word = launcher.substr(i, j - i);
      for (std::size_t at; (at = word.find("{ranks}")) != std::string::npos; placed = true)
        word.replace(at, 7, std::to_string(ranks));
      argv.push_back(std::move(word));
    }
    i = j;
  }
  if (argv.empty() || !placed) throw UsageError("--launcher needs {ranks} where the rank count goes, e.g. 'mpirun -np {ranks}'");
  const std::string tag = std::to_string(ranks) + "-" + std::to_string(::getpid());
  const std::filesystem::path summary = dir / ("summary-" + tag + ".json"), log = dir / ("stderr-" + tag + ".txt");
  argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (const char* w : {"run", "-q", "--profile"}) argv.emplace_back(w);
  auto opt = [&](const char* flag, const std::string& v) { argv.emplace_back(flag), argv.push_back(v); };
  if (!a.scenario.empty()) opt("--scenario", a.scenario);
  if (!a.weighting.empty()) opt("--weighting", a.weighting);
  if (!a.input.empty()) opt("--input", a.input);
  for (const auto& p : a.params) opt("-p", p);
  for (const auto& d : a.plugin_dirs) opt("--plugin-dir", d);
  for (const auto& r : a.reports) opt("--report", r);
  opt("--axes", a.axes);
  if (!a.simd.empty()) opt("--simd", a.simd);
  opt("--precision", a.precision);
  if (a.chunk) opt("--chunk", std::to_string(a.chunk));
  opt("--top", std::to_string(a.top));
  opt("--threads", std::to_string(a.threads));
  opt("--summary", summary.string());

  std::vector<char*> cargv;
  for (auto& w : argv) cargv.push_back(w.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // The child's profile table and progress go to a file, shown only when the run fails.
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  std::string command;
  for (const auto& w : argv) command += (command.empty() ? "" : " ") + w;
  if (err != 0) throw Error("scaling --ranks: cannot start '" + argv[0] + "': " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string tail = read_text_file(log.string());
    if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
    throw Error("scaling --ranks " + std::to_string(ranks) + ": `" + command + "` " +
                (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status)) : std::string("was killed by a signal")) +
                (tail.empty() ? std::string() : ":\n" + tail));
  }
  auto doc = nlohmann::ordered_json::parse(read_text_file(summary.string()));
  if (!doc.contains("profile")) throw Error("scaling --ranks: " + summary.string() + " has no profile section");
  prof::ScalingPoint p;
  p.profile_json = doc["profile"].dump(2);
  p.profile = prof::profile_from_json(p.profile_json);
  doc.erase("profile");  // the rest must be byte-identical at every count
  p.summary_json = doc.dump(2);
  p.ranks = ranks, p.threads = a.threads;
  p.wall_s = p.profile.wall_s, p.reports = p.profile.reports, p.groups = p.profile.groups;
  std::filesystem::remove(summary), std::filesystem::remove(log);
  return p;
}

/// headsep scaling: the same job at each thread count, profiled; the summary (and with
/// --check all every metric bit) must be identical at every count and every repetition.
/// --repeat R runs the counts R times, interleaved and in reverse order every other round (1,2 then
/// 2,1 ...), and keeps each count's median run: a shared machine's speed drifts within seconds,
/// and one run per count measures the drift as much as the code.
int scaling_cmd(const RunArgs& a, const std::string& counts, const std::string& json, const std::string& check,
                unsigned repeat, bool ceiling, const std::string& rank_counts, const std::string& launcher) {
  if (check != "summary" && check != "all") throw UsageError("--check must be summary or all");
  if (!a.model.empty() && check == "all")
    throw UsageError("--model: scaling compares the per layer x head summaries (--check summary); --check all is for the engine's metrics");
  const bool by_ranks = !rank_counts.empty();
  if (by_ranks) {
    if (!counts.empty()) throw UsageError("--ranks and --counts exclude each other (--threads sets each rank's threads)");
    if (ceiling) throw UsageError("--ceiling is for thread counts (one process), not --ranks");
    if (!a.model.empty()) throw UsageError("--ranks: --model runs in one process (its pipeline is not sharded over MPI ranks)");
    if (check == "all") throw UsageError("--ranks compares the summaries (--check summary): the ranks' metrics stay in their processes");
    if (a.input == "-") throw UsageError("--ranks: --input - (standard input) cannot be read again for every count");
  } else if (a.threads != 0) {
    throw UsageError("--threads is each rank's thread count with --ranks; for thread counts use --counts");
  }
  std::optional<ScratchDir> scratch;
  if (by_ranks) scratch.emplace();
  const auto list = by_ranks ? prof::parse_thread_counts(rank_counts, 1, "--ranks")
                             : prof::parse_thread_counts(counts, unsigned(std::max(1, oneapi::tbb::info::default_concurrency())));
  if (ceiling && !a.model.empty()) throw UsageError("--ceiling: engine jobs only (not --model)");
  if (ceiling && std::find(list.begin(), list.end(), 1u) == list.end())
    throw UsageError("--ceiling compares with the 1-thread run: put 1 in --counts");
  run_options(a);
  // One run of the engine job at n threads: opened here (plugins, source), run when asked.
  struct EngineJob {
    Setup setup;
    RunOptions opt;
    std::optional<Summary> summary;
    std::unique_ptr<ResultSink> hash;
    Profiler profiler;
    prof::ScalingPoint point;
    RunStats stats;
  };
  bool attention = false;  // for the report's header: precision, axes, heads
  std::vector<std::string> axis_names;
  std::uint32_t heads = 0;
  auto open_job = [&](unsigned n) {
    auto j = std::make_unique<EngineJob>();
    RunArgs v = a;
    v.threads = n;
    v.report_html.clear(), v.plot_svg.clear();  // the page is the scaling's own, written below
    j->setup = build_setup(v);
    j->opt = run_options(v);
    const Setup& s = j->setup;
    RunInfo info{s.axes.names(), s.weighting->heads()};
    info.attention = s.weighting->per_query() || s.weighting->attention(0) != nullptr;
    attention = info.attention, axis_names = info.axis_names, heads = info.heads;
    if (info.attention && a.chunk == 0) {  // as execute() does
      const auto& sc = s.source->schema();
      const std::size_t width = std::max<std::size_t>(1, sc.d_model ? sc.d_model : sc.feature_names.size());
      j->opt.chunk_reports = std::clamp<std::size_t>(65536 / width, 32, 8192);
    }
    j->summary.emplace(info, SummaryOptions{a.top, a.bins, 0.005});
    if (check == "all") j->hash = prof::make_metric_hash(j->point.metrics_hash);
    j->opt.profiler = &j->profiler;
    return j;
  };
  auto run_job = [](EngineJob& j) {
    std::vector<ResultSink*> sinks{&*j.summary};
    if (j.hash) sinks.push_back(j.hash.get());
    j.stats = run(*j.setup.source, *j.setup.weighting, j.setup.axes, j.opt, sinks);
    prof::ScalingPoint& p = j.point;
    p.threads = unsigned(j.opt.threads), p.wall_s = j.stats.seconds, p.reports = j.stats.reports, p.groups = j.stats.groups;
    p.profile = j.profiler.result();
    p.profile_json = j.profiler.json();
    p.summary_json = j.summary->json();
  };
  RunArgs ranked = a;
  if (by_ranks) {
    if (ranked.threads == 0) ranked.threads = 1;
    open_job(1);  // every plugin, parameter and input error here, before the launcher starts
  }
  auto one = [&](unsigned n) {
    if (!a.model.empty()) return model_scaling_point(a, n);  // a BERT model's heads (run_model's pipeline)
    if (by_ranks) return rank_scaling_point(ranked, n, launcher, scratch->path);
    auto j = open_job(n);
    run_job(*j);
    return std::move(j->point);
  };
  // The machine's ceiling at n: n copies of the 1-thread job, each opened on its own and run at
  // once on its own thread (max_allowed_parallelism is 1 while they run, so no copy borrows a
  // worker): n times the work of the 1-thread run, sharing nothing but the machine.
  auto copies = [&](unsigned n, std::uint64_t want_hash, const std::string& want_summary, bool& identical) {
    std::vector<std::unique_ptr<EngineJob>> jobs;
    for (unsigned c = 0; c < n; ++c) jobs.push_back(open_job(1));
    std::latch start(std::ptrdiff_t(n) + 1);
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> threads;
    for (unsigned c = 0; c < n; ++c)
      threads.emplace_back([&, c] {
        start.arrive_and_wait();
        try {
          run_job(*jobs[c]);
        } catch (...) {
          errors[c] = std::current_exception();
        }
      });
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    // The slowest copy's engine time, measured as the counts' runs are (run()'s own clock: no
    // setup, no summary JSON), so the ceiling and the runs compare like with like.
    double wall = 0;
    for (const auto& j : jobs) {
      wall = std::max(wall, j->stats.seconds);
      identical = identical && j->point.summary_json == want_summary && j->point.metrics_hash == want_hash;
    }
    return wall;
  };
  std::vector<std::vector<prof::ScalingPoint>> runs(list.size());
  for (auto& r : runs) r.reserve(repeat);  // `ref` points into one of them
  const prof::ScalingPoint* ref = nullptr;  // the first run: every other must give its output
  for (unsigned round = 0; round < repeat; ++round)
    for (std::size_t k = 0; k < list.size(); ++k) {
      const std::size_t i = round % 2 ? list.size() - 1 - k : k;
      const unsigned n = list[i];
      prof::ScalingPoint p = one(n);
      p.identical = !ref || (p.summary_json == ref->summary_json && p.metrics_hash == ref->metrics_hash);
      if (!a.quiet) {
        const double rate = p.wall_s > 0 ? double(a.model.empty() ? p.groups : p.reports) / p.wall_s : 0.0;
        std::fprintf(stderr, "scaling: %u %s%s: %.3f s, %.4g %s/s%s\n", n, by_ranks ? "rank" : "thread", n == 1 ? "" : "s", p.wall_s, rate,
                     a.model.empty() ? "groups" : "reports", p.identical ? "" : "  OUTPUT DIFFERS");
      }
      runs[i].push_back(std::move(p));
      if (!ref) ref = &runs[i].front();
      if (ceiling && n > 1) {
        prof::ScalingPoint& q = runs[i].back();
        q.copies = n;
        q.ceiling_walls_s.push_back(copies(n, ref->metrics_hash, ref->summary_json, q.copies_identical));
        if (!a.quiet)
          std::fprintf(stderr, "scaling: %u independent 1-thread copies at once: %.3f s%s\n", n, q.ceiling_walls_s.back(),
                       q.copies_identical ? "" : "  OUTPUT DIFFERS");
      }
    }
  std::vector<prof::ScalingPoint> points;
  for (auto& r : runs) {
    std::vector<double> walls, ceiling_walls;
    bool identical = true, copies_identical = true;
    for (const auto& p : r) {
      walls.push_back(p.wall_s), identical = identical && p.identical;
      copies_identical = copies_identical && p.copies_identical;
      ceiling_walls.insert(ceiling_walls.end(), p.ceiling_walls_s.begin(), p.ceiling_walls_s.end());
    }
    std::vector<std::size_t> order(r.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return r[x].wall_s < r[y].wall_s; });
    prof::ScalingPoint p = std::move(r[order[(order.size() - 1) / 2]]);  // the median run (the lower of two)
    p.walls_s = std::move(walls);
    p.identical = identical;
    p.copies_identical = copies_identical;
    p.ceiling_walls_s = std::move(ceiling_walls);
    if (!p.ceiling_walls_s.empty()) {
      std::vector<double> w = p.ceiling_walls_s;
      std::sort(w.begin(), w.end());
      p.ceiling_wall_s = w[(w.size() - 1) / 2];  // the median (the lower of two), as for the runs
    }
    points.push_back(std::move(p));
  }
  if (!json.empty()) {
    OutputFile out(json);
    std::string job = a.input.empty() ? "scenario " + a.scenario : "input " + a.input;
    job += a.model.empty() ? ", weighting " + (a.weighting.empty() ? std::string("table") : a.weighting) : ", model " + a.model;
    for (const auto& p : a.params) job += ", -p " + p;
    out.write(prof::scaling_json(points, job));
    out.commit();
  }
  if (!a.report_html.empty() || !a.plot_svg.empty()) {
    report::ReportData d;
    RunStats st;
    st.reports = points[0].reports, st.groups = points[0].groups;
    for (const auto& p : points) st.seconds += p.wall_s;
    d.header = report_header(a, run_options(a), st, attention || !a.model.empty());
    if (!a.model.empty()) d.header.weighting_plugin = "the model's heads (--model " + a.model + ")";
    if (repeat > 1) d.header.params.push_back("--repeat " + std::to_string(repeat));
    d.axes = axis_names, d.heads = heads;
    report::Scaling sc;
    for (const auto& k : prof::stage_kinds(points)) sc.kinds.push_back(k);
    for (const auto& p : points) {
      report::ScalingRun r;
      r.threads = prof::count_of(p), r.wall_s = p.wall_s, r.min_s = r.max_s = p.wall_s;
      for (double w : p.walls_s) r.min_s = std::min(r.min_s, w), r.max_s = std::max(r.max_s, w);
      if (p.copies && p.ceiling_wall_s > 0) r.copies_wall_s = p.ceiling_wall_s;
      for (const auto& k : sc.kinds) r.busy.push_back(prof::stage_busy(p, k));
      sc.identical = sc.identical && p.identical && p.copies_identical;
      sc.runs.push_back(std::move(r));
    }
    if (by_ranks) sc.unit = "ranks";
    d.scaling = std::move(sc);
    report::write(d, a.report_html, a.plot_svg);
  }
  std::printf("%s", prof::scaling_table(points).c_str());
  for (const auto& p : points) {
    if (!p.identical)
      throw Error("scaling: the output at " + std::to_string(prof::count_of(p)) + (by_ranks ? " ranks" : " threads") +
                  " differs from the output at " + std::to_string(prof::count_of(points[0])) +
                  (by_ranks ? " (results must not depend on the rank count)" : " (results must not depend on the thread count)"));
    if (!p.copies_identical)
      throw Error("scaling: an independent 1-thread copy of the job (--ceiling, " + std::to_string(p.copies) +
                  " at once) gave a different output from the first run");
  }
  return 0;
}

/// A --model job opened: the encoder, the text source, the axes (the model's three relations
/// unless the user chose axes) and the run's options; every error before anything is written.
struct ModelJob {
  std::optional<BertModel> model;
  std::unique_ptr<ReportSource> source;
  std::optional<AxisMap> axes;
  ModelRunOptions options;
  std::string axes_spec;
  RunOptions run;
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
  PluginInfo none;
  none.kind = PluginKind::weighting;
  none.name = "(none)";
  auto [sparams, wparams] = split_params(params, sp, none);
  job.source = open_scenario_plugin(registry, a.scenario, sparams);
  job.axes.emplace(AxisMap::bind(specs, job.source->schema().feature_names));
  ModelRunOptions& mo = job.options;
  mo.threads = a.threads;
  mo.simd = job.run.simd;
  mo.chunk_reports = a.chunk ? a.chunk : 128;
  mo.keep_maps = report;  // the top reports' maps (docs/REPORTS.md)
  mo.map_tokens = report::Limits{}.map_tokens;
  mo.top_reports = a.top;  // the summary's top list (and the report's maps), as for the engine's runs
  return job;
}

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

int run_cmd(const RunArgs& a) {
  if (!a.model.empty()) {
    if (dist::size() > 1) throw UsageError("--model runs in one process (its pipeline is not sharded over MPI ranks): run it without mpirun");
    return model_cmd(a);
  }
  // Usage errors before any plugin is loaded or file touched.
  if (!a.format.empty()) parse_format(a.format);
  if (!a.per_report.empty()) format_from_extension(a.per_report);
  run_options(a);
  if (a.attention_reports != "first:8") parse_keep(a.attention_reports);
  if (dist::size() > 1 && a.input == "-")
    throw UsageError("--input -: standard input reaches rank 0 only; under mpirun give a file every rank can open");
  Setup s = build_setup(a);
  // HEADSEP_CSV_SPLIT=ranges (measured alternative, docs/DISTRIBUTED.md): every rank parses its
  // byte ranges of the CSV instead of rank 0 reading it all.
  if (dist::size() > 1 && !a.input.empty() && dist::csv_ranges_requested()) {
    if (!a.reports.empty() || !a.attention.empty() || !a.report_html.empty() || !a.plot_svg.empty())
      throw UsageError("HEADSEP_CSV_SPLIT=ranges: --report, --attention and the report need report indices while computing; run without it");
    CsvSourceOptions o;
    o.path = a.input;
    o.features = s.source->schema().feature_names;
    o.weights = s.source->schema().given_heads > 0;
    s.source = dist::split_csv(o, s.source->schema());
  }
  return execute(s, a);
}

/// The seed exercise from the bundled CSV, with the core's reader (no plugin needed).
int example_cmd(const RunArgs& given) {
  RunArgs a;
  a.report_html = given.report_html, a.plot_svg = given.plot_svg, a.command_line = given.command_line;
  a.scenario_label = "the seed CSV (bundled), report ops_pressure_return";
  Setup s;
  CsvSourceOptions so;
  so.path = "qkv-multihead-report-scenarios.csv";
  so.bytes = seed_csv;
  auto specs = parse_axes(a.axes);
  so.features = axis_columns(specs);
  so.reports = {"ops_pressure_return"};
  s.source = open_csv_source(so);
  s.axes = AxisMap::bind(specs, s.source->schema().feature_names);
  s.weighting = make_table_weighting(s.source->schema().given_heads);
  return execute(s, a);
}

/// headsep sweep: the run's report set once per value of one plugin parameter (the report set is
/// generated again for each value: docs/REPORTS.md has the measured cost).
int sweep_cmd(RunArgs a, std::string vary, const std::string& json) {
  if (!a.format.empty() || !a.output.empty() || !a.per_report.empty() || !a.summary.empty() || !a.attention.empty())
    throw UsageError("sweep writes --json, --report-html and --plot-svg only");
  if (vary.empty())  // -p KEY=LO:HI:N names the swept parameter too
    for (auto it = a.params.begin(); it != a.params.end(); ++it) {
      auto parts = split(std::string_view(*it).substr(std::min(it->size(), it->find('=') + 1)), ':');
      if (parts.size() == 3 && parse_finite_double(parts[0]) && parse_finite_double(parts[1]) && parse_finite_double(parts[2])) {
        vary = *it;
        a.params.erase(it);
        break;
      }
    }
  if (vary.empty()) throw UsageError("sweep needs --vary KEY=LO:HI:N or KEY=V1,V2,... (or one -p KEY=LO:HI:N)");
  const auto spec = report::parse_sweep(vary);
  RunOptions opt = run_options(a);
  report::Sweep sw = report::make_sweep(spec);
  RunStats total;
  for (std::size_t i = 0; i < spec.values.size(); ++i) {
    RunArgs v = a;
    v.quiet = true, v.sweep_value = true, v.report_html.clear(), v.plot_svg.clear();
    v.params.push_back(spec.key + "=" + spec.values[i]);
    Setup s = build_setup(v);
    execute(s, v, [&](const Summary& sum, const RunStats& st) {
      report::add_sweep_run(sw, i, sum, st.seconds);
      total.reports += st.reports, total.groups += st.groups, total.seconds += st.seconds;
    });
    if (!a.quiet) std::fprintf(stderr, "sweep: %s=%s (%zu of %zu)\n", spec.key.c_str(), spec.values[i].c_str(), i + 1, spec.values.size());
  }
  if (!json.empty()) {
    OutputFile out(json);
    out.write(report::sweep_json(sw));
    out.commit();
  }
  if (!a.report_html.empty() || !a.plot_svg.empty()) {
    report::ReportData d;
    d.header = report_header(a, opt, total, false);
    d.header.params.push_back("--vary " + vary);
    d.sweep = sw;
    report::write(d, a.report_html, a.plot_svg);
  }
  if (!a.quiet) std::printf("%s", report::sweep_table(sw).c_str());
  return 0;
}

int plugins_cmd(const std::vector<std::string>& dirs, const std::string& name) {
  auto reg = load_registry(dirs);
  for (const auto& f : reg.failures()) std::fprintf(stderr, "headsep: warning: skipped %s\n", f.what.c_str());
  if (!name.empty()) {
    const PluginInfo* p = reg.find(name);
    if (!p) {
      std::string msg = "no plugin named '" + name + "' (see 'headsep plugins')";
      throw PluginError(msg);
    }
    std::printf("%s (%s plugin) %s\n", p->name.c_str(), std::string(to_string(p->kind)).c_str(), p->version.c_str());
    std::printf("  %s\n", p->description.c_str());
    std::printf("  file: %s\n  abi:  %u.%u\n", p->file.string().c_str(), p->abi_major, p->abi_minor);
    if (p->params.empty()) {
      std::printf("parameters: none\n");
      return 0;
    }
    std::printf("parameters (-p key=value):\n");
    for (const auto& q : p->params) {
      std::string def = q.default_value ? "default: " + (q.default_value->empty() ? std::string("\"\"") : *q.default_value)
                                        : std::string("required");
      std::printf("  %-18s %-6s %s\n", q.name.c_str(), std::string(to_string(q.type)).c_str(), def.c_str());
      if (!q.help.empty()) std::printf("  %-18s        %s\n", "", q.help.c_str());
    }
    return 0;
  }
  std::printf("%-10s %-14s %-8s %-4s %s\n", "KIND", "NAME", "VERSION", "ABI", "FILE");
  for (int kind = 1; kind <= 2; ++kind)
    for (const auto& p : reg.plugins()) {
      if (static_cast<int>(p.kind) != kind) continue;
      std::string abi = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
      std::printf("%-10s %-14s %-8s %-4s %s\n", std::string(to_string(p.kind)).c_str(), p.name.c_str(), p.version.c_str(),
                  abi.c_str(), p.file.string().c_str());
      std::printf("%-10s %s\n", "", p.description.c_str());
    }
  if (reg.plugins().empty()) {
    std::string where;
    for (const auto& d : reg.dirs()) where += " " + d.string();
    std::printf("(no plugins found; searched:%s)\n", where.empty() ? " nothing" : where.c_str());
  }
  return 0;
}

int info_cmd() {
  auto join_levels = [](const std::vector<SimdLevel>& v) {
    std::string s;
    for (auto l : v) s += (s.empty() ? "" : " ") + std::string(to_string(l));
    return s;
  };
  std::printf("headsep %s\n", "0.1.0");
  std::printf("plugin abi:     %d.%d\n", HEADSEP_PLUGIN_ABI_MAJOR, HEADSEP_PLUGIN_ABI_MINOR);
  std::printf("plugin folder:  %s\n", builtin_plugin_dir().string().c_str());
  std::printf("simd compiled:  %s\n", join_levels(compiled_levels()).c_str());
  std::printf("simd supported: %s\n", join_levels(supported_levels()).c_str());
  std::printf("simd chosen:    %s\n", std::string(to_string(default_level())).c_str());
  if (dist::compiled())
    std::printf("mpi:            %s; %d rank%s%s\n", dist::library().c_str(), dist::size(), dist::size() == 1 ? "" : "s",
                dist::active() ? "" : " (not started by an MPI launcher)");
  else
    std::printf("mpi:            not compiled in (one process)\n");
  std::printf("fp32 peak:      %.1f GFLOP/s per core (measured: FMA chains at %s)\n", measure_fp32_peak_gflops(),
              std::string(to_string(default_level())).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headsep — how multi-head attention keeps relations apart"};
  app.require_subcommand(1);
  RunArgs ra;

  auto* example = app.add_subcommand("example", "Print the seed exercise's output, computed from the bundled seed CSV");
  RunArgs ea;
  example->add_option("--report-html", ea.report_html, "Also write the HTML report (the seed's plot, distributions)");
  example->add_option("--plot-svg", ea.plot_svg, "Also write each figure as an SVG file into this folder");

  auto* runc = app.add_subcommand("run", "Analyse a report set: a scenario generator through a weighting scheme");
  runc->add_option("--scenario,-s", ra.scenario, "Scenario generator plugin (see 'headsep plugins')");
  runc->add_option("--weighting,-w", ra.weighting, "Weighting scheme plugin (default: table when the data carries weights)");
  runc->add_option("-p,--param", ra.params, "Plugin parameter [plugin.]key=value (repeatable)");
  runc->add_option("--plugin-dir", ra.plugin_dirs, "Search this folder for plugins first (repeatable)");
  runc->add_option("--input,-i", ra.input, "CSV in the seed schema ('-' = stdin): --scenario csv -p path=FILE --weighting table");
  runc->add_option("--report", ra.reports, "Report id to analyse (repeatable; default: all)");
  runc->add_option("--axes", ra.axes, "Context axes, e.g. 'd=decision_axis;ec=evidence_axis+condition_axis'")
      ->capture_default_str();
  runc->add_option("--format,-f", ra.format, "Rows on stdout (or --output) as text (the seed's format), jsonl or csv");
  runc->add_option("--output,-o", ra.output, "Write the rows to this file (atomically) instead of stdout");
  runc->add_option("--per-report", ra.per_report, "Stream every (report, scenario) row to PATH (.jsonl or .csv)");
  runc->add_option("--summary", ra.summary, "Write the per-scenario summary (stats, quantiles, histogram, top-k) as JSON");
  runc->add_option("--top", ra.top, "Reports with the largest separation kept per scenario")->capture_default_str();
  runc->add_option("--bins", ra.bins, "Histogram bins of head_separation")->check(CLI::PositiveNumber)->capture_default_str();
  runc->add_flag("--quiet,-q", ra.quiet, "No progress bar and no summary table");
  runc->add_option("--threads", ra.threads, "Worker threads (0 = all cores)");
  runc->add_option("--simd", ra.simd, "Force a SIMD level: scalar, sse2, avx2, avx512 (default: best, or $HEADSEP_SIMD)");
  runc->add_option("--precision", ra.precision, "f64 (default, the seed's arithmetic) or f32")->capture_default_str();
  runc->add_option("--chunk", ra.chunk,
                   "Reports per batch (default 8192; attention schemes: 65536 / d_model, within 32..8192)")
      ->check(CLI::PositiveNumber);
  runc->add_option("--attention", ra.attention,
                   "Attention schemes: write the attention maps (and multi-head output) of chosen reports as JSON lines");
  runc->add_option("--attention-reports", ra.attention_reports, "Reports --attention keeps: first:N, all, index:I,J,.., id:A,B,..")
      ->capture_default_str();
  runc->add_option("--model", ra.model,
                   "A BERT encoder folder (config.json, model.safetensors): its every (layer, head) measured on text reports "
                   "(--scenario text or ops-text)");
  runc->add_option("--max-report-mb", ra.max_report_mb,
                   "Attention: refuse a report whose working memory exceeds this many MiB")->capture_default_str();
  runc->add_flag("--profile", ra.profile,
                 "Where the time goes: per stage, plugin and thread (table on stderr, 'profile' in --summary)");
  runc->add_option("--trace", ra.trace, "Write a Chrome trace-event JSON timeline (Perfetto, chrome://tracing)");

  RunArgs ca;  // headsep scaling: the job's options, then the counts
  std::string scaling_counts, scaling_json, scaling_check = "summary", scaling_ranks;
  std::string scaling_launcher = "mpirun -np {ranks}";
  unsigned scaling_repeat = 1;
  bool scaling_ceiling = false;
  auto* scalingc = app.add_subcommand("scaling", "Run one job at several thread counts (or MPI rank counts, --ranks): speedup, efficiency, stages");
  scalingc->add_option("--counts", scaling_counts, "Thread counts, e.g. 1,2,4 (default 1, 2, 4, ... up to the cores)");
  scalingc->add_option("--json", scaling_json, "Write the table and every count's profile as JSON");
  scalingc->add_option("--repeat", scaling_repeat,
                       "Run the counts this many times, interleaved (order reversed every other round); each count's median run is shown")
      ->capture_default_str()->check(CLI::Range(1u, 1000u));
  scalingc->add_flag("--ceiling", scaling_ceiling,
                     "Also run N independent 1-thread copies of the job at once for each count N > 1: the speedup fully "
                     "independent work gets on this machine, to tell the engine's scaling losses from the machine's");
  scalingc->add_option("--ranks", scaling_ranks,
                       "MPI rank counts instead of thread counts, e.g. 1,2,4: the job under --launcher at each");
  scalingc->add_option("--launcher", scaling_launcher,
                       "With --ranks: the MPI launcher, {ranks} for the count (split at spaces)")->capture_default_str();
  scalingc->add_option("--threads", ca.threads, "With --ranks: threads per rank (default 1)");
  scalingc->add_option("--check", scaling_check,
                       "What must be identical at every count: summary (its JSON) or all (also every metric bit)")
      ->capture_default_str();
  scalingc->add_option("--scenario,-s", ca.scenario, "Scenario generator plugin");
  scalingc->add_option("--model", ca.model, "A BERT encoder's folder: its heads are the heads (as run --model)");
  scalingc->add_option("--weighting,-w", ca.weighting, "Weighting scheme plugin");
  scalingc->add_option("-p,--param", ca.params, "Plugin parameter [plugin.]key=value (repeatable)");
  scalingc->add_option("--plugin-dir", ca.plugin_dirs, "Search this folder for plugins first (repeatable)");
  scalingc->add_option("--input,-i", ca.input, "CSV in the seed schema");
  scalingc->add_option("--report", ca.reports, "Report id to analyse (repeatable; default: all)");
  scalingc->add_option("--axes", ca.axes, "Context axes")->capture_default_str();
  scalingc->add_option("--simd", ca.simd, "Force a SIMD level");
  scalingc->add_option("--precision", ca.precision, "f64 or f32")->capture_default_str();
  scalingc->add_option("--chunk", ca.chunk, "Reports per batch")->check(CLI::PositiveNumber);
  scalingc->add_option("--top", ca.top, "Top-k reports per scenario in the summary")->capture_default_str();
  scalingc->add_flag("--quiet,-q", ca.quiet, "No progress lines");
  scalingc->add_option("--report-html", ca.report_html, "Write an offline HTML page: speedup and per-stage figures, the table");
  scalingc->add_option("--plot-svg", ca.plot_svg, "Write the figures as SVG files into this folder");

  runc->add_option("--report-html", ra.report_html, "Write an offline HTML report (seed plot, distributions, attention)");
  runc->add_option("--plot-svg", ra.plot_svg, "Write each figure of the report as an SVG file into this folder");

  RunArgs sa;
  std::string sweep_vary, sweep_json;
  auto* sweepc = app.add_subcommand("sweep", "Run one report set over a range of a plugin parameter (docs/REPORTS.md)");
  sweepc->add_option("--vary", sweep_vary, "KEY=LO:HI:N or KEY=V1,V2,... (a -p key, e.g. axis-focus.single_sharpness=0.25:4:9)");
  sweepc->add_option("--scenario,-s", sa.scenario, "Scenario generator plugin");
  sweepc->add_option("--weighting,-w", sa.weighting, "Weighting scheme plugin");
  sweepc->add_option("-p,--param", sa.params, "Plugin parameter [plugin.]key=value (repeatable)");
  sweepc->add_option("--plugin-dir", sa.plugin_dirs, "Search this folder for plugins first (repeatable)");
  sweepc->add_option("--input,-i", sa.input, "CSV in the seed schema");
  sweepc->add_option("--report", sa.reports, "Report id to analyse (repeatable; default: all)");
  sweepc->add_option("--axes", sa.axes, "Context axes")->capture_default_str();
  sweepc->add_option("--threads", sa.threads, "Worker threads (0 = all cores)");
  sweepc->add_option("--simd", sa.simd, "Force a SIMD level");
  sweepc->add_option("--precision", sa.precision, "f64 or f32")->capture_default_str();
  sweepc->add_option("--chunk", sa.chunk, "Reports per batch")->check(CLI::PositiveNumber);
  sweepc->add_option("--json", sweep_json, "Write the sweep (quantiles per value and scenario) as JSON");
  sweepc->add_option("--report-html", sa.report_html, "Write the sweep's HTML report");
  sweepc->add_option("--plot-svg", sa.plot_svg, "Write the sweep's figure as SVG into this folder");
  sweepc->add_flag("--quiet,-q", sa.quiet, "No table");

  std::vector<std::string> list_dirs;
  std::string list_name;
  auto* pluginsc = app.add_subcommand("plugins", "List the plugins found, or show one plugin's parameters");
  pluginsc->add_option("name", list_name, "Plugin to describe");
  pluginsc->add_option("--plugin-dir", list_dirs, "Search this folder for plugins first (repeatable)");

  auto* infoc = app.add_subcommand("info", "Show build and CPU capabilities");

  runc->add_flag("--slot-by-slot", ra.slot_by_slot,
                 "Ask an every-slot weighting (ABI 1.3) for one scenario at a time: same output, for A/B timing");
  std::string temporaries = "unnamed";  // --temporaries: set_output_temporaries (headsep/output.hpp)
  for (auto* c : {example, runc, scalingc, sweepc})
    c->add_option("--temporaries", temporaries,
                  "Unfinished output files: unnamed (O_TMPFILE, linked in when complete; nothing is left even if "
                  "killed) or named (PATH.tmp-*, renamed when complete; left behind by SIGKILL)")
        ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Under an MPI launcher: every rank runs `run` (rank 0 merges and writes); the other commands
  // run on rank 0 alone.
  headsep::dist::init(&argc, &argv);
  install_signal_handlers();
  {
    std::string cl;  // the header of a report says what was run, as a shell would read it back
    for (int i = 0; i < argc; ++i) {
      std::string w = argv[i];
      const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/@+%") == std::string::npos;
      if (!plain) {
        std::string q = "'";
        for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        w = q + "'";
      }
      cl += (i ? " " : "") + w;
    }
    ra.command_line = ea.command_line = sa.command_line = ca.command_line = cl;
  }
  // Ranks 1..K-1 write no files: when the launcher stops them (rank 0 failed), they end quietly.
  if (headsep::dist::rank() != 0)
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  // A failure on any rank: one message, from rank 0, naming the rank; then every rank stops.
  auto failed = [](const char* kind, const std::string& what, int code) {
    const std::string cause = headsep::dist::where() + what;
    if (headsep::dist::rank() == 0) std::fprintf(stderr, "headsep: %s%s\n", kind, cause.c_str());
    headsep::dist::fail(cause, code);
    return code;
  };
  const bool lead = headsep::dist::rank() == 0;
  try {
    set_output_temporaries(parse_temporaries(temporaries));
    int rc = 0;
    if (*example) rc = lead ? example_cmd(ea) : 0;
    else if (*sweepc) rc = lead ? sweep_cmd(sa, sweep_vary, sweep_json) : 0;
    else if (*runc) rc = run_cmd(ra);
    else if (*scalingc) rc = lead ? scaling_cmd(ca, scaling_counts, scaling_json, scaling_check, scaling_repeat, scaling_ceiling,
                                                     scaling_ranks, scaling_launcher) : 0;
    else if (*pluginsc) rc = lead ? plugins_cmd(list_dirs, list_name) : 0;
    else if (*infoc) rc = lead ? info_cmd() : 0;
    // What went to standard output (rows, the table) must have arrived: a full disk there is an
    // error, not a silent success.
    const int flushed = std::fflush(stdout), err = errno;
    if (flushed != 0 || std::ferror(stdout))
      throw Error(std::string("<stdout>: write failed: ") + (flushed != 0 ? std::strerror(err) : "write error"));
    headsep::dist::print_stats();
    headsep::dist::finalize();
    return rc;
  } catch (const headsep::dist::RemoteError& e) {  // already names its rank
    std::fprintf(stderr, "headsep: error: %s\n", e.what());
    headsep::dist::fail(e.what(), 1);
    return 1;
  } catch (const UsageError& e) {
    return failed("", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return failed("error: ", "out of memory (docs/LIMITS.md)", 1);
  } catch (const std::exception& e) {
    return failed("error: ", e.what(), 1);
  }
  return 0;
}
