// A finished run as the Python module holds it (RunResult, bound as headsep._headsep.RunResult
// and wrapped by headsep.Result in python/headsep/_result.py), and the one way the module runs the
// engine: run_released() -- the GIL released for the whole run, Ctrl-C turned into
// KeyboardInterrupt. Other binding files (headsep.attention) build a RunResult the same way:
//
//   auto res = RunResult::open(args, info, /*rows=*/true, /*report=*/true);   // the sinks
//   RunOptions opt = ...; res->attach(opt);                  // what the sinks need from the engine
//   res->stats = run_released(source, weighting, axes, opt, res->sinks());
//   return res;                                              // headsep.Result(res) in Python
#pragma once
#include <nanobind/nanobind.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/row_columns.hpp"
#include "headsep/summary.hpp"
#include <optional>

#include "headsep/provenance.hpp"
#include "job/job.hpp"
#include "report/report.hpp"

namespace headsep::python {

struct RunResult {
  job::JobArgs args;  ///< what was run (the report's header)
  RunInfo info;
  RunOptions options;  ///< the SIMD level and precision the report names
  RunStats stats;
  std::unique_ptr<Summary> summary;              ///< always: Result.summary
  std::unique_ptr<report::Collector> collector;  ///< with report=True: Result.report_html()
  std::unique_ptr<RowColumns> rows;              ///< with rows=True: Result.rows, Result.arrays
  /// The summary's run block (headsep/provenance.hpp), as the CLI's for the same job; a run that
  /// is no CLI job (none set) gives the summary without it.
  std::optional<RunProvenance> origin;

  /// Result.summary_json(): what `headsep run --summary` writes for the same job.
  std::string summary_json() const;

  /// The sinks of a run with these arguments and this RunInfo (summary options from args.top/bins):
  /// the Summary always, the rows and the report's Collector when asked for.
  static std::unique_ptr<RunResult> open(job::JobArgs args, RunInfo info, bool rows, bool report);
  /// Sets what the sinks need from the engine (attention schemes: the top reports' maps).
  void attach(RunOptions& opt);
  std::vector<ResultSink*> sinks();
  /// The report (docs/REPORTS.md): written to `path` (atomically) when given, else returned.
  /// static_maps = false: the maps only in the head view's data (the notebook's display, docs/REPORTS.md).
  std::string report_html(const std::string& path, bool static_maps = true) const;
};

/// The progress bar of a Python run (progress=True): a sink that counts the reports the run has
/// delivered, and draw(), called by run_interruptibly's waiting thread with the GIL held, which
/// writes the CLI's line (support/progress.hpp's progress_line and timing: first after a second,
/// then every 200 ms, a last line at the end) to Python's sys.stderr -- so a notebook shows it in
/// the cell. A terminal's line is redrawn with "\r" and erase-to-end; elsewhere (a notebook)
/// with "\r" and spaces over the previous line's end.
class PyProgress final : public ResultSink {
 public:
  explicit PyProgress(std::uint64_t total = 0);
  void consume(const BatchResult& result, SinkPartial* partial) override;
  void set_total(std::uint64_t total) noexcept { total_ = total; }
  /// Draws when due (GIL held); `final`: the last line, when one was drawn.
  void draw(bool final);
  /// The run ended (GIL held): `ok`, the last line (100 % with a known total); else the line is
  /// ended without claiming completion.
  void finish(bool ok);

 private:
  std::atomic<std::uint64_t> done_{0};
  std::uint64_t total_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  bool shown_ = false;
  std::size_t width_ = 0;
};

/// body(stop) runs on a thread of its own with the GIL released; the calling (Python) thread
/// checks for signals every 50 ms, taking the GIL briefly (PyErr_CheckSignals), and draws
/// `progress` when given. When a handler raises (Ctrl-C: KeyboardInterrupt), `stop` is set --
/// the engine's input stage stops the pipeline (RunOptions::stop) -- and, once body returns,
/// that Python exception is raised. Exceptions thrown by body are rethrown here (translated by
/// bind_core's translator).
void run_interruptibly(const std::function<void(const std::atomic<bool>* stop)>& body, PyProgress* progress = nullptr);

/// run() through run_interruptibly: the engine's threads never hold the GIL. With `progress`,
/// it is one of the sinks and its bar is drawn (total: the source's, when it knows it).
RunStats run_released(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions opt,
                      const std::vector<ResultSink*>& sinks, PyProgress* progress = nullptr);

void bind_result(nanobind::module_& m);  // result.cpp: the RunResult class
void bind_run(nanobind::module_& m);     // run.cpp: _run
void bind_model(nanobind::module_& m);   // model.cpp: _model_run

}  // namespace headsep::python
