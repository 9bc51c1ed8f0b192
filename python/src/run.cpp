// headsep.run(...) -> Result: `headsep run`'s job (job/job.hpp: the CLI's set-up, shared) run
// into the sinks a RunResult keeps (summary, report collector, rows), the GIL released.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <memory>

#include "core.hpp"
#include "headsep/error.hpp"
#include "python_plugins.hpp"
#include "result.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

/// The name a scenario/weighting argument gives: a str as it is, None as "", else a Python plugin
/// object (a headsep.ScenarioGenerator / headsep.WeightingScheme instance) made an entry of
/// `registry` (python_plugins.hpp), watched by `interrupted`.
std::string plugin_name(PluginRegistry& registry, nb::handle obj, const std::shared_ptr<std::atomic<bool>>& interrupted) {
  if (obj.is_none()) return {};
  if (nb::isinstance<nb::str>(obj)) return nb::cast<std::string>(obj);
  return register_python_plugin(registry, obj, interrupted);
}

struct RunCall {
  job::JobArgs args;
  bool rows = true, report = true, progress = false;
};

std::unique_ptr<RunResult> run_job(nb::handle scenario, nb::handle weighting, RunCall call,
                                   const std::shared_ptr<std::atomic<bool>>& interrupted) {
  job::JobArgs& a = call.args;
  job::run_options(a);  // usage errors (precision, SIMD level) before any plugin is loaded
  PluginRegistry registry;
  {
    nb::gil_scoped_release unlocked;
    registry = load_registry(a.plugin_dirs);
  }
  a.scenario = plugin_name(registry, scenario, interrupted);
  a.weighting = plugin_name(registry, weighting, interrupted);
  std::unique_ptr<job::Setup> s;
  {
    nb::gil_scoped_release unlocked;
    s = std::make_unique<job::Setup>(job::build_setup(a, std::move(registry)));
  }
  RunOptions opt = job::engine_options(a, *s);
  opt.progress = false;  // the bar is Python's (PyProgress: sys.stderr, a notebook's cell)
  auto res = RunResult::open(a, job::run_info(*s), call.rows, call.report);
  res->attach(opt);
  res->origin = job::provenance(a, s->plugins, opt, res->info.axis_names, res->info.attention, 1);
  PyProgress progress;
  res->stats = run_released(*s->source, *s->weighting, s->axes, opt, res->sinks(), call.progress ? &progress : nullptr);
  res->origin->execution.batch = res->stats.batch;
  return res;
}

/// run_job, where a Python plugin that raised KeyboardInterrupt (PyPlugin::interrupted) makes the
/// run raise exactly that: one KeyboardInterrupt, not the plugin's headsep.Error.
std::unique_ptr<RunResult> run_watched(nb::handle scenario, nb::handle weighting, RunCall call) {
  auto interrupted = std::make_shared<std::atomic<bool>>(false);
  try {
    return run_job(scenario, weighting, std::move(call), interrupted);
  } catch (const nb::python_error&) {
    throw;  // already a Python exception (Ctrl-C while waiting, a TypeError)
  } catch (...) {
    if (!interrupted->load()) throw;
  }
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw nb::python_error();
}

}  // namespace

void bind_run(nb::module_& m) {
  m.def(
      "_run",
      [](nb::handle scenario, nb::handle weighting, std::vector<std::string> params, std::string axes, std::string input,
         std::vector<std::string> reports, std::vector<std::string> plugin_dirs, unsigned threads, std::string simd,
         std::string precision, std::size_t chunk, std::size_t top, std::size_t bins, bool rows, bool report,
         bool progress, std::string command_line) {
        RunCall c;
        c.args.params = std::move(params);
        if (!axes.empty()) c.args.axes = std::move(axes);
        c.args.input = std::move(input);
        c.args.reports = std::move(reports);
        c.args.plugin_dirs = std::move(plugin_dirs);
        c.args.threads = threads;
        c.args.simd = std::move(simd);
        c.args.precision = std::move(precision);
        c.args.chunk = chunk;
        c.args.top = top;
        c.args.bins = bins;
        c.args.command_line = std::move(command_line);
        c.rows = rows;
        c.report = report;
        c.progress = progress;
        return run_watched(scenario, weighting, std::move(c));
      },
      nb::arg("scenario").none(), nb::arg("weighting").none(), nb::arg("params"), nb::arg("axes"), nb::arg("input"),
      nb::arg("reports"), nb::arg("plugin_dirs"), nb::arg("threads"), nb::arg("simd"), nb::arg("precision"),
      nb::arg("chunk"), nb::arg("top"), nb::arg("bins"), nb::arg("rows"), nb::arg("report"), nb::arg("progress"),
      nb::arg("command_line"),
      "The engine run behind headsep.run (arguments already checked and converted there).");
}

}  // namespace headsep::python
