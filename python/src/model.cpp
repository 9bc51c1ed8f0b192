// headsep.model(path).run(texts, ...): `headsep run --model DIR --scenario text` from Python (the
// CLI's job set-up, job/model_job.hpp), the GIL released; ModelRunResult holds its summary, rows
// (as --per-report's), the maps asked for (as --attention's) and the report. The texts reach the text generator as JSON lines in a memfd that headsep.model
// writes (no file on disk).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "core.hpp"
#include "job/model_job.hpp"
#include "headsep/error.hpp"
#include "result.hpp"
#include "rows.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

/// The maps of the reports headsep.model(...).run(maps=...) asked for, every kept layer: per
/// report [layers, heads, n, n] and the baseline's [layers, n, n] (ModelBatch::dumps' blocks).
class ModelMapSink final : public ResultSink {
 public:
  void consume(const BatchResult& r, SinkPartial*) override {
    const std::size_t first = reports_.size();  // this batch's kept reports start here
    for (std::size_t l = 0; l < r.dumps.size(); ++l) {
      const AttentionDump& d = r.dumps[l];  // every kept layer keeps the same reports (ModelBatch::dumps)
      if (d.reports.empty()) continue;
      if (reports_.size() == first) {  // the batch's first kept layer: its reports
        for (const std::uint32_t i : d.reports)
          reports_.push_back(r.batch->first_report + i), n_.push_back(r.batch->report_length(i)), blocks_.emplace_back();
      }
      if (std::find(layers_.begin(), layers_.end(), l) == layers_.end()) layers_.push_back(static_cast<std::uint32_t>(l));
      heads_ = d.heads;
      for (std::size_t i = 0; i < d.reports.size(); ++i) {
        const std::size_t k = first + i, n = n_[k];
        const float* src = d.maps.data() + d.maps_offset[i];
        blocks_[k].insert(blocks_[k].end(), src, src + (d.heads + 1) * n * n);
      }
    }
  }

  /// {"reports": uint64 [R], "layers": uint32 [L], "maps": [R] x [L, H, n, n], "single": [R] x [L, n, n]}.
  nb::dict to_python() {
    nb::dict out;
    out["reports"] = owned_array(std::vector<std::uint64_t>(reports_), {reports_.size()});
    out["layers"] = owned_array(std::vector<std::uint32_t>(layers_), {layers_.size()});
    nb::list maps, single;
    const std::size_t L = layers_.size();
    for (std::size_t k = 0; k < reports_.size(); ++k) {
      const std::size_t n = n_[k], block = n * n;
      std::vector<float> heads(L * heads_ * block), base(L * block);
      for (std::size_t l = 0; l < L; ++l) {  // per layer: the baseline's block, then heads 1..H
        const float* src = blocks_[k].data() + l * (heads_ + 1) * block;
        std::copy(src, src + block, base.begin() + l * block);
        std::copy(src + block, src + (heads_ + 1) * block, heads.begin() + l * heads_ * block);
      }
      maps.append(owned_array(std::move(heads), {L, heads_, n, n}));
      single.append(owned_array(std::move(base), {L, n, n}));
      blocks_[k] = {};
    }
    out["maps"] = maps, out["single"] = single;
    return out;
  }

 private:
  std::vector<std::uint64_t> reports_;
  std::vector<std::size_t> n_;
  std::vector<std::vector<float>> blocks_;  // per report: per kept layer (H + 1) x n x n
  std::vector<std::uint32_t> layers_;
  std::size_t heads_ = 0;
};

/// A finished model run: its summary, rows per (report, scenario, layer) as --per-report's, the
/// maps asked for, the report.
struct ModelRunResult {
  job::JobArgs args;
  std::string axes_spec;
  RunOptions options;
  std::unique_ptr<ModelSummary> summary;
  std::unique_ptr<RowColumns> rows;  ///< with rows=True
  nb::object maps = nb::none();      ///< ModelMapSink::to_python() with maps=, else None
  RunProvenance origin;              ///< the summary's run block, as the CLI's

  bool report = false;               ///< with report=True: the top reports' maps for report_html

  std::string report_html(const std::string& path, bool static_maps = true) const {
    if (!report) throw nb::value_error("this run kept no report: run it with report=True");
    RunStats st;
    for (const auto& sc : summary->scenarios) st.reports += sc.reports, st.groups += sc.reports;
    st.seconds = summary->seconds;
    report::Header h = job::report_header(args, options, st, true, HEADSEP_VERSION);
    h.weighting_plugin = "model " + summary->model + " (" + args.model + ")", h.threads = summary->threads, h.simd = summary->simd;
    if (axes_spec != args.axes) h.params.push_back("--axes " + axes_spec);
    report::ReportData d = report::build(*summary, h);
    d.limits.static_maps = static_maps;
    if (path.empty()) return report::html(d, report::figures(d));
    report::write(d, path, "");
    return {};
  }
};

/// What headsep.model(...).run keeps besides the summary.
struct ModelKeep {
  bool rows = true, report = true;
  bool all_maps = false;                  // maps=True
  std::vector<std::uint64_t> map_reports; // maps=[i, ...] (sorted, unique)
  std::vector<std::uint32_t> map_layers;  // map_layers=[l, ...] (empty: all)
  bool maps() const { return all_maps || !map_reports.empty(); }
};

std::unique_ptr<ModelRunResult> model_run(job::JobArgs a, const ModelKeep& keep) {
  auto res = std::make_unique<ModelRunResult>();
  std::unique_ptr<job::ModelJob> mj;
  {
    nb::gil_scoped_release unlocked;
    mj = std::make_unique<job::ModelJob>(job::open_model_job(a, keep.report, package_plugin_dir()));
  }
  res->summary = std::make_unique<ModelSummary>();
  res->origin = job::model_provenance(a, *mj, 1);
  ModelRunOptions& mo = mj->options;
  if (keep.rows) res->rows = std::make_unique<RowColumns>(model_run_info(*mj->model, *mj->axes)), mo.sinks.push_back(res->rows.get());
  ModelMapSink maps;
  if (keep.maps()) {
    if (keep.all_maps) mo.dump_reports = [](const ReportBatch&, std::size_t) { return true; };
    else mo.dump_reports = [sel = keep.map_reports](const ReportBatch& b, std::size_t r) {
      return std::binary_search(sel.begin(), sel.end(), b.first_report + r);
    };
    mo.dump_layers = keep.map_layers;
    mo.sinks.push_back(&maps);
  }
  run_interruptibly([&](const std::atomic<bool>* stop) {
    mo.stop = stop;
    *res->summary = run_model(*mj->source, *mj->model, *mj->axes, mo);
  });
  res->origin.model_name = res->summary->model, res->origin.execution.threads = res->summary->threads;
  res->origin.execution.simd = res->summary->simd;
  if (keep.maps()) res->maps = maps.to_python();
  res->report = keep.report;
  res->options = mj->run;
  res->axes_spec = mj->axes_spec;
  res->args = std::move(a);
  return res;
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<ModelRunResult> c(m, "ModelRunResult", "A finished model run (wrapped by headsep.Result).");
  def_rows(c);
  c.def("summary_json", [](const ModelRunResult& r) { return stamp_summary(r.summary->json(), "model", r.origin, 1); },
           "The summary JSON, byte for byte what `headsep run --model DIR --summary` writes.")
      .def_prop_ro("maps", [](const ModelRunResult& r) { return r.maps; })
      .def("report_html", [](const ModelRunResult& r, const std::string& path, bool static_maps) {
             nb::gil_scoped_release unlocked;
             return r.report_html(path, static_maps);
           }, nb::arg("path") = "", nb::arg("static_maps") = true)
      .def_prop_ro("seconds", [](const ModelRunResult& r) { return r.summary->seconds; })
      .def_prop_ro("simd", [](const ModelRunResult& r) { return r.summary->simd; });
  m.def(
      "_model_run",
      [](std::string model, std::string scenario, std::vector<std::string> params, std::string axes,
         std::vector<std::string> plugin_dirs, unsigned threads, std::size_t chunk, std::size_t top, bool rows,
         bool report, nb::handle maps, std::vector<std::int64_t> map_layers, std::string command_line) {
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
        ModelKeep keep;
        keep.rows = rows, keep.report = report;
        if (nb::isinstance<nb::bool_>(maps)) keep.all_maps = nb::cast<bool>(maps);
        else if (!maps.is_none())
          for (auto v : nb::cast<std::vector<std::int64_t>>(maps)) {
            if (v < 0) throw UsageError("maps: report index " + std::to_string(v) + " is negative");
            keep.map_reports.push_back(static_cast<std::uint64_t>(v));
          }
        std::sort(keep.map_reports.begin(), keep.map_reports.end());
        keep.map_reports.erase(std::unique(keep.map_reports.begin(), keep.map_reports.end()), keep.map_reports.end());
        for (auto l : map_layers) {
          if (l < 0) throw UsageError("map_layers: layer " + std::to_string(l) + " is negative");
          keep.map_layers.push_back(static_cast<std::uint32_t>(l));
        }
        return model_run(std::move(a), keep);
      },
      nb::arg("model"), nb::arg("scenario"), nb::arg("params"), nb::arg("axes"), nb::arg("plugin_dirs"),
      nb::arg("threads"), nb::arg("chunk"), nb::arg("top"), nb::arg("rows"), nb::arg("report"), nb::arg("maps").none(),
      nb::arg("map_layers"), nb::arg("command_line"),
      "The engine run behind headsep.model(path).run.");
}

}  // namespace headsep::python
