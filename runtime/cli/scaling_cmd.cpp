// headsep scaling: one job at several thread counts (or MPI rank counts under a launcher),
// profiled; each count's median run as a table, --json and a report, and a check that every
// count (and every repetition) gave the same output.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <latch>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/info.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "headsep/error.hpp"
#include "support/json_input.hpp"

namespace headsep::cli {

CLI::App* add_scaling(CLI::App& app, ScalingArgs& s) {
  RunArgs& ca = s.job;
  auto* scalingc = app.add_subcommand("scaling", "Run one job at several thread counts (or MPI rank counts, --ranks): speedup, efficiency, stages");
  scalingc->add_option("--counts", s.counts, "Thread counts, e.g. 1,2,4 (default 1, 2, 4, ... up to the cores)");
  scalingc->add_option("--json", s.json, "Write the table and every count's profile as JSON");
  scalingc->add_option("--repeat", s.repeat,
                       "Run the counts this many times, interleaved (order reversed every other round); each count's median run is shown")
      ->capture_default_str()->check(CLI::Range(1u, 1000u));
  scalingc->add_flag("--ceiling", s.ceiling,
                     "Also run N independent 1-thread copies of the job at once for each count N > 1: the speedup fully "
                     "independent work gets on this machine, to tell the engine's scaling losses from the machine's");
  scalingc->add_option("--ranks", s.ranks,
                       "MPI rank counts instead of thread counts, e.g. 1,2,4: the job under --launcher at each");
  scalingc->add_option("--launcher", s.launcher,
                       "With --ranks: the MPI launcher, {ranks} for the count (split at spaces)")->capture_default_str();
  scalingc->add_option("--threads", ca.threads, "With --ranks: threads per rank (default 1)");
  scalingc->add_option("--check", s.check,
                       "What must be identical at every count: summary (its JSON) or all (also every metric bit)")
      ->capture_default_str();
  scalingc->add_option("--scenario,-s", ca.scenario, "Scenario generator plugin");
  scalingc->add_option("--model", ca.model, "A BERT encoder's folder: its heads are the heads (as run --model)");
  add_model_axes_options(*scalingc, ca);
  scalingc->add_option("--weighting,-w", ca.weighting, "Weighting scheme plugin");
  add_job_options(*scalingc, ca);
  add_engine_options(*scalingc, ca);
  scalingc->add_option("--top", ca.top, "Top-k reports per scenario in the summary")
      ->check(CLI::Range(std::size_t(0), std::size_t(1) << 20))
      ->capture_default_str();
  scalingc->add_flag("--quiet,-q", ca.quiet, "No progress lines");
  scalingc->add_option("--report-html", ca.report_html, "Write an offline HTML page: speedup and per-stage figures, the table");
  scalingc->add_option("--plot-svg", ca.plot_svg, "Write the figures as SVG files into this folder");
  return scalingc;
}

namespace {

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
  auto doc = parse_json<nlohmann::ordered_json>(read_text_file(summary.string()), summary.string());
  if (!doc.contains("profile")) throw Error("scaling --ranks: " + summary.string() + " has no profile section");
  prof::ScalingPoint p;
  p.profile_json = doc["profile"].dump(2);
  p.profile = prof::profile_from_json(p.profile_json);
  doc.erase("profile");  // the rest must be byte-identical at every count, but for what a run measures
  if (doc.contains("run")) doc["run"].erase("execution");
  p.summary_json = doc.dump(2);
  p.ranks = ranks, p.threads = a.threads;
  p.wall_s = p.profile.wall_s, p.reports = p.profile.reports, p.groups = p.profile.groups;
  std::filesystem::remove(summary), std::filesystem::remove(log);
  return p;
}

/// --check, and the options that --ranks excludes or needs; true: counts are rank counts.
bool check_scaling_args(const ScalingArgs& o) {
  const RunArgs& a = o.job;
  if (o.check != "summary" && o.check != "all") throw UsageError("--check must be summary or all");
  if (!a.model.empty() && o.check == "all")
    throw UsageError("--model: scaling compares the per layer x head summaries (--check summary); --check all is for the engine's metrics");
  const bool by_ranks = !o.ranks.empty();
  if (by_ranks) {
    // It starts this executable under the launcher: a build without MPI (the pip package's
    // `headsep`, which is Python running the extension) has none to start.
    if (!dist::compiled())
      throw UsageError("--ranks needs MPI compiled in (`headsep info`: mpi); this build runs one process: use --counts");
    if (!o.counts.empty()) throw UsageError("--ranks and --counts exclude each other (--threads sets each rank's threads)");
    if (o.ceiling) throw UsageError("--ceiling is for thread counts (one process), not --ranks");
    if (!a.model.empty()) throw UsageError("--ranks: --model runs in one process (its pipeline is not sharded over MPI ranks)");
    if (o.check == "all") throw UsageError("--ranks compares the summaries (--check summary): the ranks' metrics stay in their processes");
    if (a.input == "-") throw UsageError("--ranks: --input - (standard input) cannot be read again for every count");
  } else if (a.threads != 0) {
    throw UsageError("--threads is each rank's thread count with --ranks; for thread counts use --counts");
  }
  return by_ranks;
}

/// One run of the engine job at n threads: opened here (plugins, source), run when asked.
struct EngineJob {
  Setup setup;
  RunOptions opt;
  std::optional<Summary> summary;
  std::unique_ptr<ResultSink> hash;
  Profiler profiler;
  prof::ScalingPoint point;
  RunStats stats;
};

/// For the report's header: precision, axes, heads (of the last engine job opened).
struct JobShape {
  bool attention = false;
  std::vector<std::string> axis_names;
  std::uint32_t heads = 0;
  std::vector<PluginUse> plugins;  // the JSON's run.plugins
};

void run_job(EngineJob& j) {
  std::vector<ResultSink*> sinks{&*j.summary};
  if (j.hash) sinks.push_back(j.hash.get());
  j.stats = run(*j.setup.source, *j.setup.weighting, j.setup.axes, j.opt, sinks);
  prof::ScalingPoint& p = j.point;
  p.threads = unsigned(j.opt.threads), p.wall_s = j.stats.seconds, p.reports = j.stats.reports, p.groups = j.stats.groups;
  p.profile = j.profiler.result();
  p.profile_json = j.profiler.json();
  p.summary_json = j.summary->json();
}

/// One `headsep scaling`: the counts, and how one count is measured (the engine's job at n
/// threads, a model's job, or the job under the MPI launcher at n ranks). Every check of the
/// options, and with --ranks every plugin and input error, comes from the constructor.
class ScalingJob {
 public:
  ScalingJob(const ScalingArgs& o, bool by_ranks);
  /// --repeat rounds of every count, interleaved; runs[i] holds count i's runs.
  std::vector<std::vector<prof::ScalingPoint>> measure();
  JobShape shape;

 private:
  std::unique_ptr<EngineJob> open_job(unsigned n);
  prof::ScalingPoint one(unsigned n);
  double copies(unsigned n, std::uint64_t want_hash, const std::string& want_summary, bool& identical);

  const ScalingArgs& o_;
  const RunArgs& a_;
  const bool by_ranks_;
  std::optional<ScratchDir> scratch_;
  std::vector<unsigned> list_;
  RunArgs ranked_;
};

ScalingJob::ScalingJob(const ScalingArgs& o, bool by_ranks) : o_(o), a_(o.job), by_ranks_(by_ranks) {
  const RunArgs& a = a_;
  if (by_ranks_) scratch_.emplace();
  list_ = by_ranks_ ? prof::parse_thread_counts(o.ranks, 1, "--ranks")
                    : prof::parse_thread_counts(o.counts, unsigned(std::max(1, oneapi::tbb::info::default_concurrency())));
  if (o.ceiling && !a.model.empty()) throw UsageError("--ceiling: engine jobs only (not --model)");
  if (o.ceiling && std::find(list_.begin(), list_.end(), 1u) == list_.end())
    throw UsageError("--ceiling compares with the 1-thread run: put 1 in --counts");
  run_options(a);
  ranked_ = a;
  if (by_ranks_) {
    if (ranked_.threads == 0) ranked_.threads = 1;
    open_job(1);  // every plugin, parameter and input error here, before the launcher starts
  }
}

std::unique_ptr<EngineJob> ScalingJob::open_job(unsigned n) {
  auto j = std::make_unique<EngineJob>();
  RunArgs v = a_;
  v.threads = n;
  v.report_html.clear(), v.plot_svg.clear();  // the page is the scaling's own, written below
  j->setup = build_setup(v);
  j->opt = run_options(v);
  const Setup& s = j->setup;
  RunInfo info = run_info(s);
  shape.attention = info.attention, shape.axis_names = info.axis_names, shape.heads = info.heads;
  shape.plugins = s.plugins;
  if (info.attention && a_.chunk == 0) j->opt.chunk_reports = attention_chunk(s.source->schema());  // as execute() does
  j->summary.emplace(info, SummaryOptions{a_.top, a_.bins, 0.005, j->opt.simd});
  if (o_.check == "all") j->hash = prof::make_metric_hash(j->point.metrics_hash);
  j->opt.profiler = &j->profiler;
  return j;
}

prof::ScalingPoint ScalingJob::one(unsigned n) {
  if (!a_.model.empty()) return model_scaling_point(a_, n);  // a BERT model's heads (run_model's pipeline)
  if (by_ranks_) return rank_scaling_point(ranked_, n, o_.launcher, scratch_->path);
  auto j = open_job(n);
  run_job(*j);
  return std::move(j->point);
}

/// The machine's ceiling at n: n copies of the 1-thread job, each opened on its own and run at
/// once on its own thread (max_allowed_parallelism is 1 while they run, so no copy borrows a
/// worker): n times the work of the 1-thread run, sharing nothing but the machine.
double ScalingJob::copies(unsigned n, std::uint64_t want_hash, const std::string& want_summary, bool& identical) {
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
}

std::vector<std::vector<prof::ScalingPoint>> ScalingJob::measure() {
  const RunArgs& a = a_;
  std::vector<std::vector<prof::ScalingPoint>> runs(list_.size());
  for (auto& r : runs) r.reserve(o_.repeat);  // `ref` points into one of them
  const prof::ScalingPoint* ref = nullptr;  // the first run: every other must give its output
  for (unsigned round = 0; round < o_.repeat; ++round)
    for (std::size_t k = 0; k < list_.size(); ++k) {
      const std::size_t i = round % 2 ? list_.size() - 1 - k : k;
      const unsigned n = list_[i];
      prof::ScalingPoint p = one(n);
      p.identical = !ref || (p.summary_json == ref->summary_json && p.metrics_hash == ref->metrics_hash);
      if (!a.quiet) {
        const double rate = p.wall_s > 0 ? double(a.model.empty() ? p.groups : p.reports) / p.wall_s : 0.0;
        std::fprintf(stderr, "scaling: %u %s%s: %.3f s, %.4g %s/s%s\n", n, by_ranks_ ? "rank" : "thread", n == 1 ? "" : "s", p.wall_s, rate,
                     a.model.empty() ? "groups" : "reports", p.identical ? "" : "  OUTPUT DIFFERS");
      }
      runs[i].push_back(std::move(p));
      if (!ref) ref = &runs[i].front();
      if (o_.ceiling && n > 1) {
        prof::ScalingPoint& q = runs[i].back();
        q.copies = n;
        q.ceiling_walls_s.push_back(copies(n, ref->metrics_hash, ref->summary_json, q.copies_identical));
        if (!a.quiet)
          std::fprintf(stderr, "scaling: %u independent 1-thread copies at once: %.3f s%s\n", n, q.ceiling_walls_s.back(),
                       q.copies_identical ? "" : "  OUTPUT DIFFERS");
      }
    }
  return runs;
}

/// Each count's median run (the lower of two), with every run's wall time and the ceiling's median.
std::vector<prof::ScalingPoint> median_points(std::vector<std::vector<prof::ScalingPoint>>& runs) {
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
  return points;
}

void write_scaling_json(const ScalingArgs& o, const JobShape& shape, const std::vector<prof::ScalingPoint>& points,
                        const std::string& start) {
  const RunArgs& a = o.job;
  OutputFile out(o.json);
  std::string job = a.input.empty() ? "scenario " + a.scenario : "input " + a.input;
  job += a.model.empty() ? ", weighting " + (a.weighting.empty() ? std::string("table") : a.weighting) : ", model " + a.model;
  for (const auto& p : a.params) job += ", -p " + p;
  // The run block: the job's plugins and options; run.execution the scaling command's own.
  RunProvenance r = provenance(a, a.model.empty() ? shape.plugins : model_plugins(a), run_options(a), shape.axis_names,
                               shape.attention || !a.model.empty());
  if (!a.model.empty()) r.model_path = a.model, r.options = {{"top", std::to_string(a.top)}};
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, std::string>>{
           {"counts", o.counts}, {"ranks", o.ranks}, {"launcher", o.ranks.empty() ? "" : o.launcher},
           {"check", o.check}, {"repeat", std::to_string(o.repeat)}, {"ceiling", o.ceiling ? "true" : "false"}})
    if (!v.empty()) r.options.emplace_back(k, v);
  r.execution.start_time = start;
  r.execution.threads = 0;  // every count's own: runs[].threads
  out.write(stamp_summary(prof::scaling_json(points, job), "scaling", r, 2));
  out.commit();
}

/// --report-html / --plot-svg: speedup and per-stage figures, the table (docs/REPORTS.md).
void write_scaling_report(const ScalingArgs& o, const JobShape& shape, const std::vector<prof::ScalingPoint>& points,
                          bool by_ranks) {
  const RunArgs& a = o.job;
  report::ReportData d;
  RunStats st;
  st.reports = points[0].reports, st.groups = points[0].groups;
  for (const auto& p : points) st.seconds += p.wall_s;
  d.header = report_header(a, run_options(a), st, shape.attention || !a.model.empty());
  if (!a.model.empty()) d.header.weighting_plugin = "the model's heads (--model " + a.model + ")";
  if (!o.counts.empty()) d.header.params.push_back("--counts " + o.counts);
  if (by_ranks) d.header.params.push_back("--ranks " + o.ranks), d.header.params.push_back("--launcher " + o.launcher);
  if (o.ceiling) d.header.params.push_back("--ceiling");
  if (o.check != "summary") d.header.params.push_back("--check " + o.check);
  if (o.repeat > 1) d.header.params.push_back("--repeat " + std::to_string(o.repeat));
  d.axes = shape.axis_names, d.heads = shape.heads;
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

/// Every count, and every --ceiling copy, must have given the first run's output.
void check_identical(const std::vector<prof::ScalingPoint>& points, bool by_ranks) {
  for (const auto& p : points) {
    if (!p.identical)
      throw Error("scaling: the output at " + std::to_string(prof::count_of(p)) + (by_ranks ? " ranks" : " threads") +
                  " differs from the output at " + std::to_string(prof::count_of(points[0])) +
                  (by_ranks ? " (results must not depend on the rank count)" : " (results must not depend on the thread count)"));
    if (!p.copies_identical)
      throw Error("scaling: an independent 1-thread copy of the job (--ceiling, " + std::to_string(p.copies) +
                  " at once) gave a different output from the first run");
  }
}

}  // namespace

/// headsep scaling: the same job at each thread count, profiled; the summary (and with
/// --check all every metric bit) must be identical at every count and every repetition.
/// --repeat R runs the counts R times, interleaved and in reverse order every other round (1,2 then
/// 2,1 ...), and keeps each count's median run: a shared machine's speed drifts within seconds,
/// and one run per count measures the drift as much as the code.
int scaling_cmd(const ScalingArgs& o) {
  const RunArgs& a = o.job;
  const bool by_ranks = check_scaling_args(o);
  const std::string start = utc_now();
  ScalingJob job(o, by_ranks);
  auto runs = job.measure();
  const std::vector<prof::ScalingPoint> points = median_points(runs);
  if (!o.json.empty()) write_scaling_json(o, job.shape, points, start);
  if (!a.report_html.empty() || !a.plot_svg.empty()) write_scaling_report(o, job.shape, points, by_ranks);
  std::fprintf(data_stdout(), "%s", prof::scaling_table(points).c_str());
  check_identical(points, by_ranks);
  return 0;
}

}  // namespace headsep::cli
