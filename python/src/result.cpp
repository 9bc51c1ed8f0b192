// RunResult (result.hpp): the sinks a Python run keeps, their contents as NumPy views and Python
// lists, the report; run_interruptibly(): the engine on its own thread, the GIL released, Ctrl-C
// checked from the Python thread.
#include "result.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "headsep/error.hpp"
#include "rows.hpp"
#include "support/progress.hpp"

namespace nb = nanobind;

namespace headsep::python {

std::unique_ptr<RunResult> RunResult::open(job::JobArgs args, RunInfo info, bool rows, bool report) {
  auto r = std::make_unique<RunResult>();
  r->summary = std::make_unique<Summary>(info, SummaryOptions{args.top, args.bins, 0.005, job::run_options(args).simd});
  if (report) {
    report::Limits limits;
    limits.map_reports = args.top;
    r->collector = std::make_unique<report::Collector>(info, limits);
  }
  if (rows) r->rows = std::make_unique<RowColumns>(info);
  r->args = std::move(args);
  r->info = std::move(info);
  return r;
}

void RunResult::attach(RunOptions& opt) {
  if (info.attention && collector) opt.keep_top_maps = args.top;  // the report's maps: the summary's top (as the CLI's report)
  options = opt;
}

std::vector<ResultSink*> RunResult::sinks() {
  std::vector<ResultSink*> s{summary.get()};
  if (collector) s.push_back(collector.get());
  if (rows) s.push_back(rows.get());
  return s;
}

std::string RunResult::summary_json() const {
  return origin ? stamp_summary(summary->json(), "run", *origin, 2) : summary->json();
}

std::string RunResult::report_html(const std::string& path, bool static_maps) const {
  if (!collector) throw nb::value_error("this run kept no report: run it with report=True");
  report::ReportData d = report::build(*summary, *collector, job::report_header(args, options, stats, info.attention, HEADSEP_VERSION));
  d.limits.static_maps = static_maps;
  if (path.empty()) return report::html(d, report::figures(d));
  report::write(d, path, "");
  return {};
}

PyProgress::PyProgress(std::uint64_t total) : total_(total), start_(std::chrono::steady_clock::now()), last_(start_) {}

void PyProgress::consume(const BatchResult& r, SinkPartial*) {
  done_.fetch_add(r.batch->n_reports(), std::memory_order_relaxed);
}

void PyProgress::finish(bool ok) {
  if (!shown_) return;
  if (ok) return draw(true);
  // A run that failed ends the line without claiming completion (the exception follows).
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);  // a pending KeyboardInterrupt survives the write
  try {
    nb::object err = nb::module_::import_("sys").attr("stderr");
    err.attr("write")("\n");
    err.attr("flush")();
  } catch (const nb::python_error&) {
  }
  PyErr_Restore(type, value, trace);
  shown_ = false;
}

void PyProgress::draw(bool final) {
  using namespace std::chrono;
  const auto now = steady_clock::now();
  if (final ? !shown_ : (now - last_ < milliseconds(200) || now - start_ < seconds(1))) return;
  last_ = now;
  const std::uint64_t done = done_.load(std::memory_order_relaxed);
  std::string line = detail::progress_line(done, total_, duration<double>(now - start_).count(),
                                           final && (!total_ || done >= total_));
  try {
    nb::object err = nb::module_::import_("sys").attr("stderr");
    if (err.is_none()) return;
    bool tty = false;
    try {
      tty = nb::cast<bool>(err.attr("isatty")());
    } catch (const nb::python_error&) {
    }
    const std::size_t width = line.size();
    if (tty) line += "\x1b[K";  // erase what a longer line left
    else if (width < width_) line.append(width_ - width, ' ');
    width_ = width;
    err.attr("write")("\r" + line + (final ? "\n" : ""));
    err.attr("flush")();
    shown_ = true;
  } catch (const nb::python_error&) {
    // A stderr that refuses to be written to (closed, replaced) costs the bar, not the run.
  }
}

void run_interruptibly(const std::function<void(const std::atomic<bool>* stop)>& body, PyProgress* progress) {
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  bool signalled = false;
  {
    nb::gil_scoped_release unlocked;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread worker([&] {
      try {
        body(&stop);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> l(mu);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
      if (signalled) continue;  // stopping: wait for the batches in flight
      lock.unlock();
      {
        nb::gil_scoped_acquire held;  // briefly: signal handlers run on this (the main) thread only
        signalled = PyErr_CheckSignals() != 0;
        if (progress && !signalled) progress->draw(false);
      }
      if (signalled) stop = true;
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (progress) progress->finish(!signalled && !error);
  if (signalled) throw nb::python_error();  // KeyboardInterrupt (or what a handler raised)
  if (error) std::rethrow_exception(error);
}

RunStats run_released(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions opt,
                      const std::vector<ResultSink*>& sinks, PyProgress* progress) {
  RunStats stats;
  std::vector<ResultSink*> all = sinks;
  if (progress) all.push_back(progress), progress->set_total(source.total_reports());
  run_interruptibly([&](const std::atomic<bool>* stop) {
    opt.stop = stop;
    stats = run(source, weighting, axes, opt, all);
  }, progress);
  return stats;
}

void bind_result(nb::module_& m) {
  nb::class_<RunResult> c(m, "RunResult", "A finished run (wrapped by headsep.Result).");
  def_rows(c);
  c.def("summary_json", [](const RunResult& r) { return r.summary_json(); },
           "The summary JSON, byte for byte what `headsep run --summary` writes.")
      .def("report_html", [](const RunResult& r, const std::string& path, bool static_maps) {
             nb::gil_scoped_release unlocked;
             return r.report_html(path, static_maps);
           }, nb::arg("path") = "", nb::arg("static_maps") = true, "The HTML report: written to `path` (atomically) and '' returned, or returned.")
      .def_prop_ro("reports", [](const RunResult& r) { return r.stats.reports; })
      .def_prop_ro("groups", [](const RunResult& r) { return r.stats.groups; })
      .def_prop_ro("seconds", [](const RunResult& r) { return r.stats.seconds; })
      .def_prop_ro("simd", [](const RunResult& r) { return std::string(to_string(r.options.simd)); })
      .def_prop_ro("axes", [](const RunResult& r) { return r.info.axis_names; })
      .def_prop_ro("heads", [](const RunResult& r) { return r.info.heads; })
      .def_prop_ro("attention", [](const RunResult& r) { return r.info.attention; })
      .def_prop_ro("threads", [](const RunResult& r) { return r.origin ? r.origin->execution.threads : r.options.threads; })
      .def_prop_ro("layers", [](const RunResult&) { return 0; })
      .def_prop_ro("kv_head_of", [](const RunResult&) { return std::vector<std::uint32_t>{}; });
}

}  // namespace headsep::python
