// headsep.model(path).run(texts, ...): `headsep run --model DIR --scenario text` from Python (the
// CLI's job set-up, job/model_job.hpp), the GIL released; ModelRunResult holds its summary and
// the report. The texts reach the text generator as JSON lines in a memfd that headsep.model
// writes (no file on disk).
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "core.hpp"
#include "job/model_job.hpp"
#include "result.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

/// A finished model run. Rows per (report, layer, head) come from the model's row writer once
/// `run --model --per-report` exists (has_rows is false until then).
struct ModelRunResult {
  job::JobArgs args;
  std::string axes_spec;
  RunOptions options;
  std::unique_ptr<ModelSummary> summary;

  std::string report_html(const std::string& path) const {
    RunStats st;
    for (const auto& sc : summary->scenarios) st.reports += sc.reports, st.groups += sc.reports;
    st.seconds = summary->seconds;
    report::Header h = job::report_header(args, options, st, true, HEADSEP_VERSION);
    h.weighting_plugin = "model " + summary->model + " (" + args.model + ")", h.threads = summary->threads, h.simd = summary->simd;
    if (axes_spec != args.axes) h.params.push_back("--axes " + axes_spec);
    report::ReportData d = report::build(*summary, h);
    if (path.empty()) return report::html(d, report::figures(d));
    report::write(d, path, "");
    return {};
  }
};

std::unique_ptr<ModelRunResult> model_run(job::JobArgs a, bool maps) {
  auto res = std::make_unique<ModelRunResult>();
  std::unique_ptr<job::ModelJob> mj;
  {
    nb::gil_scoped_release unlocked;
    mj = std::make_unique<job::ModelJob>(job::open_model_job(a, maps, package_plugin_dir()));
  }
  res->summary = std::make_unique<ModelSummary>();
  run_interruptibly([&](const std::atomic<bool>* stop) {
    mj->options.stop = stop;
    *res->summary = run_model(*mj->source, *mj->model, *mj->axes, mj->options);
  });
  res->options = mj->run;
  res->axes_spec = mj->axes_spec;
  res->args = std::move(a);
  return res;
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<ModelRunResult>(m, "ModelRunResult", "A finished model run (wrapped by headsep.Result).")
      .def("summary_json", [](const ModelRunResult& r) { return r.summary->json(); },
           "The summary JSON, byte for byte what `headsep run --model DIR --summary` writes.")
      .def_prop_ro("has_rows", [](const ModelRunResult&) { return false; })
      .def("report_html", [](const ModelRunResult& r, const std::string& path) {
             nb::gil_scoped_release unlocked;
             return r.report_html(path);
           }, nb::arg("path") = "")
      .def_prop_ro("seconds", [](const ModelRunResult& r) { return r.summary->seconds; })
      .def_prop_ro("simd", [](const ModelRunResult& r) { return r.summary->simd; });
  m.def(
      "_model_run",
      [](std::string model, std::string scenario, std::vector<std::string> params, std::string axes,
         std::vector<std::string> plugin_dirs, unsigned threads, std::size_t chunk, std::size_t top, bool maps,
         std::string command_line) {
        job::JobArgs a;
        a.model = std::move(model);
        a.scenario = std::move(scenario);
        a.params = std::move(params);
        if (!axes.empty()) a.axes = std::move(axes);
        a.plugin_dirs = std::move(plugin_dirs);
        a.threads = threads;
        a.chunk = chunk;
        a.top = top;
        a.command_line = std::move(command_line);
        return model_run(std::move(a), maps);
      },
      nb::arg("model"), nb::arg("scenario"), nb::arg("params"), nb::arg("axes"), nb::arg("plugin_dirs"),
      nb::arg("threads"), nb::arg("chunk"), nb::arg("top"), nb::arg("maps"), nb::arg("command_line"),
      "The engine run behind headsep.model(path).run.");
}

}  // namespace headsep::python
