// headsep.model(path): the folder loaded once (LoadedModel: weights and tokenizer, shared by every
// run, from any thread), its tokenizer and what it is (info); .run(texts, ...): `headsep run
// --model DIR --scenario text` from Python (the CLI's job set-up, job/model_job.hpp) on the loaded
// weights, the GIL released; ModelRunResult holds its summary, rows (as --per-report's), the maps
// asked for (as --attention's) and the report. The texts reach the text generator as JSON lines in
// a memfd that headsep.model writes (no file on disk); the summary and the report name them as
// "N texts from Python", not by that file.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>


#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core.hpp"
#include "job/model_job.hpp"
#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/safetensors.hpp"
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
  RunInfo info;                      ///< axes, heads, layers, key/value heads (the tidy tables')

  bool report = false;               ///< with report=True: the top reports' maps for report_html
  std::vector<report::ChosenMap> chosen;  ///< report=True with maps=: those reports whole in the head view

  std::string report_html(const std::string& path, bool static_maps = true) const {
    if (!report) throw nb::value_error("this run kept no report: run it with report=True");
    RunStats st;
    for (const auto& sc : summary->scenarios) st.reports += sc.reports, st.groups += sc.reports;
    st.seconds = summary->seconds;
    report::Header h = job::report_header(args, options, st, true, HEADSEP_VERSION);
    h.weighting_plugin = "model " + summary->model + " (" + args.model + ")", h.threads = summary->threads, h.simd = summary->simd;
    if (axes_spec != args.axes) h.params.push_back("--axes " + axes_spec);
    report::ReportData d = report::build(*summary, h);
    d.chosen = chosen;  // (a copy: the page can be written again)
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

/// The texts' memfd as the summary and the report name it: "N texts from Python" (the path param
/// text.path=/proc/self/fd/N means nothing after the call), and the job's params without it.
void name_the_texts(job::JobArgs& a, RunProvenance& origin, std::uint64_t texts) {
  const std::string label = std::to_string(texts) + (texts == 1 ? " text" : " texts") + " from Python";
  for (auto& use : origin.plugins)
    for (auto& [k, v] : use.params)
      if (k == "path" && v.rfind("/proc/self/fd/", 0) == 0) v = label;
  std::erase_if(a.params, [](const std::string& p) { return p.rfind("text.path=/proc/self/fd/", 0) == 0 || p == "text.format=jsonl"; });
  a.scenario_label = "text (" + label + ")";
}

std::unique_ptr<ModelRunResult> model_run(const job::LoadedModel& loaded, job::JobArgs a, const ModelKeep& keep,
                                          std::uint64_t texts, bool progress) {
  auto res = std::make_unique<ModelRunResult>();
  std::unique_ptr<job::ModelJob> mj;
  {
    nb::gil_scoped_release unlocked;
    mj = std::make_unique<job::ModelJob>(job::open_model_job(a, keep.report, package_plugin_dir(), &loaded));
  }
  res->summary = std::make_unique<ModelSummary>();
  res->origin = job::model_provenance(a, *mj, 1);
  name_the_texts(a, res->origin, texts);
  ModelRunOptions& mo = mj->options;
  res->info = model_run_info(*mj->model, *mj->axes, mo.model_axes);
  if (keep.rows) res->rows = std::make_unique<RowColumns>(res->info), mo.sinks.push_back(res->rows.get());
  PyProgress bar(texts);
  if (progress) mo.sinks.push_back(&bar);
  ModelMapSink maps;
  if (keep.maps()) {
    if (keep.all_maps) mo.dump_reports = [](const ReportBatch&, std::size_t) { return true; };
    else mo.dump_reports = [sel = keep.map_reports](const ReportBatch& b, std::size_t r) {
      return std::binary_search(sel.begin(), sel.end(), b.first_report + r);
    };
    mo.dump_layers = keep.map_layers;
    mo.sinks.push_back(&maps);
  }
  // maps= with a report: those reports whole in the page's head view, as --attention-reports.
  std::unique_ptr<report::ChosenMaps> chosen;
  if (keep.maps() && keep.report) mo.sinks.push_back((chosen = std::make_unique<report::ChosenMaps>(mo.dump_reports)).get());
  run_interruptibly([&](const std::atomic<bool>* stop) {
    mo.stop = stop;
    *res->summary = run_model(*mj->source, *mj->model, *mj->axes, mo);
  }, progress ? &bar : nullptr);
  res->origin.model_name = res->summary->model, res->origin.execution.threads = res->summary->threads;
  res->origin.execution.simd = res->summary->simd;
  if (keep.maps()) res->maps = maps.to_python();
  res->report = keep.report;
  if (chosen) res->chosen = chosen->take();
  res->options = mj->run;
  res->axes_spec = mj->axes_spec;
  res->args = std::move(a);
  return res;
}

/// headsep.model(path)'s C++ side: the folder loaded once (job::LoadedModel), its path, and the
/// package's plugins held loaded -- the text generator keeps the folder's tokenizer while it stays
/// loaded (plugins/text/text_reports.hpp), so runs do not read tokenizer.json again either.
struct PyModel {
  std::string path;
  job::LoadedModel loaded;
  PluginRegistry plugins;
};

/// The weights' stored element types ("F32", "BF16", "F16+F32" ...): model.safetensors's, or
/// every shard's the index lists; load_model has checked them already.
std::string weight_dtypes(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else {
    std::ifstream in(dir / "model.safetensors.index.json", std::ios::binary);
    std::set<std::string> shards;
    for (const auto& [name, file] : nlohmann::json::parse(in).at("weight_map").items()) shards.insert(file.get<std::string>());
    for (const auto& f : shards) files.push_back(dir / f);
  }
  std::set<std::string> seen;
  for (const auto& f : files) {
    const SafeTensors st(f);  // named: a temporary would die before the loop reads its tensors
    for (const auto& t : st.tensors())
      if (readable_as_f32(t.dtype)) seen.insert(std::string(to_string(t.dtype)));
  }
  std::string out;
  for (const auto& d : seen) out += (out.empty() ? "" : "+") + d;
  return out;
}

nb::dict model_info(const PyModel& m) {
  const Architecture& a = *m.loaded.model;
  const ModelShape& s = a.shape();
  const ModelTokenizer& t = *m.loaded.tokenizer;
  nb::dict d;
  d["name"] = a.name();
  d["path"] = m.path;
  d["family"] = s.model_type;
  d["layers"] = s.layers;
  d["heads"] = s.heads;
  d["kv_heads"] = s.kv_heads;
  d["head_dim"] = s.head_dim;
  d["hidden"] = s.hidden;
  d["vocab_size"] = s.vocab_size;
  d["max_positions"] = s.max_positions;
  d["causal"] = s.causal;
  d["sliding_window"] = s.sliding_window;
  std::string dtypes;
  try {
    dtypes = weight_dtypes(m.path);
  } catch (const std::exception&) {
    dtypes = "?";
  }
  d["dtype"] = dtypes;
  // The products' weights (a bf16 decoder: "bf16"); activations and sums are f32 whatever it says.
  const std::string linear = m.loaded.model->weight_memory().linear;
  d["compute_dtype"] = linear.empty() ? "f32" : linear;
  d["tokenizer"] = std::string(t.tokenizer->kind());
  d["max_tokens"] = t.truncation.tokens;
  d["max_tokens_from"] = t.truncation.source;
  return d;
}

/// model.tokenize(texts): per text {"ids", "tokens", "truncated"}, as `headsep tokenize` writes
/// them; the GIL released while encoding. max_tokens 0: the folder's truncation length.
nb::list tokenize(const PyModel& m, const std::vector<std::string>& texts, std::int64_t max_tokens) {
  std::vector<Encoding> out(texts.size());
  {
    nb::gil_scoped_release unlocked;
    std::shared_ptr<const ModelTokenizer> tk = m.loaded.tokenizer;
    if (max_tokens != 0) tk = std::make_shared<ModelTokenizer>(ModelTokenizer::load(m.path, max_tokens));
    for (std::size_t i = 0; i < texts.size(); ++i) {
      try {
        tk->tokenizer->encode(texts[i], out[i]);
      } catch (const Error& e) {
        throw Error("texts[" + std::to_string(i) + "]: " + e.what());
      }
    }
  }
  const TextTokenizer& tok = *m.loaded.tokenizer->tokenizer;
  nb::list result;
  for (const Encoding& e : out) {
    nb::list ids, tokens;
    for (const std::uint32_t id : e.ids) {
      ids.append(id);
      const std::string& s = tok.token(id);
      tokens.append(nb::str(s.c_str(), s.size()));
    }
    nb::dict d;
    d["ids"] = ids, d["tokens"] = tokens, d["truncated"] = e.truncated;
    result.append(d);
  }
  return result;
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<PyModel>(m, "LoadedModel", "A model folder loaded once (wrapped by headsep.Model).")
      .def_ro("path", &PyModel::path)
      .def("info", &model_info, "What the folder holds: family, layers, heads, key/value heads, dtype, tokenizer.")
      .def("tokenize", &tokenize, nb::arg("texts"), nb::arg("max_tokens") = 0,
           "Per text {ids, tokens, truncated}, as `headsep tokenize`.");
  m.def(
      "_load_model",
      [](std::string path, std::string dtype) {
        auto m = std::make_unique<PyModel>();
        {
          nb::gil_scoped_release unlocked;
          m->loaded.model = load_model(path, parse_weight_dtype(dtype));  // every model error first (as run --model)
          m->loaded.tokenizer = std::make_shared<ModelTokenizer>(ModelTokenizer::load(path));
          m->plugins = load_registry({});
        }
        m->path = std::move(path);
        return m;
      },
      nb::arg("path"), nb::arg("dtype") = "auto",
      "Loads a model folder's weights (held as dtype: auto, f32 or bf16) and tokenizer once (headsep.model).");
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
      .def_prop_ro("simd", [](const ModelRunResult& r) { return r.summary->simd; })
      .def_prop_ro("threads", [](const ModelRunResult& r) { return r.summary->threads; })
      .def_prop_ro("model", [](const ModelRunResult& r) { return r.summary->model; })
      .def_prop_ro("reports", [](const ModelRunResult& r) {
        std::uint64_t n = 0;
        for (const auto& sc : r.summary->scenarios) n += sc.reports;
        return n;
      })
      .def_prop_ro("tokens", [](const ModelRunResult& r) {
        std::uint64_t n = 0;
        for (const auto& sc : r.summary->scenarios) n += sc.tokens;
        return n;
      })
      .def_prop_ro("groups", [](const ModelRunResult& r) {
        std::uint64_t n = 0;
        for (const auto& sc : r.summary->scenarios) n += sc.reports;
        return n;
      })
      .def_prop_ro("axes", [](const ModelRunResult& r) { return r.info.axis_names; })
      .def_prop_ro("heads", [](const ModelRunResult& r) { return r.info.heads; })
      .def_prop_ro("layers", [](const ModelRunResult& r) { return r.info.layers; })
      .def_prop_ro("attention", [](const ModelRunResult&) { return true; })
      .def_prop_ro("kv_head_of", [](const ModelRunResult& r) { return r.info.kv_head_of; });
  m.def(
      "_model_run",
      [](const PyModel& model, std::string scenario, std::vector<std::string> params, std::string axes,
         std::vector<std::string> plugin_dirs, unsigned threads, std::size_t chunk, std::size_t top, bool rows,
         bool report, nb::handle maps, std::vector<std::int64_t> map_layers, std::string command_line,
         std::uint64_t texts, bool progress, std::string semantic_path, std::string semantic_json, std::string direction_path,
         std::vector<std::string> direction_names, std::vector<nb::ndarray<const float, nb::c_contig, nb::device::cpu>> directions,
         std::string token_axes) {
        job::JobArgs a;
        a.semantic_axes = std::move(semantic_path), a.semantic_json = std::move(semantic_json);
        a.direction_axes = std::move(direction_path), a.token_axes = std::move(token_axes);
        for (std::size_t k = 0; k < directions.size() && k < direction_names.size(); ++k) {  // direction_axes={name: array}
          const auto& d = directions[k];
          DirectionTensor t{direction_names[k], {}, {}};
          for (std::size_t i = 0; i < d.ndim(); ++i) t.shape.push_back(d.shape(i));
          t.values.assign(d.data(), d.data() + d.size());
          a.directions.push_back(std::move(t));
        }
        a.model = model.path;
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
        return model_run(model.loaded, std::move(a), keep, texts, progress);
      },
      nb::arg("model"), nb::arg("scenario"), nb::arg("params"), nb::arg("axes"), nb::arg("plugin_dirs"),
      nb::arg("threads"), nb::arg("chunk"), nb::arg("top"), nb::arg("rows"), nb::arg("report"), nb::arg("maps").none(),
      nb::arg("map_layers"), nb::arg("command_line"), nb::arg("texts"), nb::arg("progress"), nb::arg("semantic_path") = "", nb::arg("semantic_json") = "",
      nb::arg("direction_path") = "", nb::arg("direction_names") = std::vector<std::string>{},
      nb::arg("directions") = std::vector<nb::ndarray<const float, nb::c_contig, nb::device::cpu>>{},
      nb::arg("token_axes") = "",
      "The engine run behind headsep.model(path).run.");
}

}  // namespace headsep::python
