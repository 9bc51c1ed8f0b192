// headsep.attention (bind_attention): X and the attention weights as arrays (NumPy, or torch
// through DLPack), run as `-s tensor -w qkv` runs them -- the array source (X read in place) and
// the array attention scheme of include/headsep/array_input.hpp -- into pycore's RunResult, plus
// the attention maps asked for. The Python side (python/headsep/_attention.py) only converts
// types; every check is made in C++ (array_input.hpp, plan_from_spec).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "core.hpp"
#include "headsep/array_input.hpp"
#include "headsep/error.hpp"
#include "result.hpp"
#include "rows.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

using FloatArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using DoubleArray = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;

std::string shape_text(std::size_t ndim, const std::size_t* shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (ndim == 1 ? ",)" : ")");
}

/// weights= / baseline=: a safetensors path (str), a dict {name: float32 array}, or None.
ArrayWeights weights_from(nb::handle obj, const char* what, std::vector<FloatArray>& keep) {
  ArrayWeights w;
  if (obj.is_none()) return w;
  if (nb::isinstance<nb::str>(obj)) {
    w.path = nb::cast<std::string>(obj);
    if (w.path.empty()) throw UsageError(std::string(what) + ": an empty path");
    return w;
  }
  if (!nb::isinstance<nb::dict>(obj))
    throw nb::type_error((std::string(what) + ": expected a dict of float32 arrays or a path").c_str());
  for (auto [k, v] : nb::borrow<nb::dict>(obj)) {
    if (!nb::isinstance<nb::str>(k)) throw nb::type_error((std::string(what) + ": tensor names must be str").c_str());
    const std::string name = nb::cast<std::string>(k);
    FloatArray a;
    if (!nb::try_cast(v, a, false))
      throw nb::type_error((std::string(what) + ": tensor '" + name + "' is not a C-contiguous float32 CPU array").c_str());
    keep.push_back(a);
    ArrayRef ref{a.data(), {}};
    for (std::size_t i = 0; i < a.ndim(); ++i) ref.shape.push_back(a.shape(i));
    w.tensors.emplace(name, std::move(ref));
  }
  return w;
}

/// The kept attention maps, in report order: heads 1..H, the baseline, the multi-head output;
/// and the address of the X the engine's first batch read (the in-place test).
class MapSink final : public ResultSink {
 public:
  MapSink(std::function<bool(std::uint64_t)> keep, std::uint32_t heads) : keep_(std::move(keep)), heads_(heads) {}

  void consume(const BatchResult& r, SinkPartial*) override {
    if (r.batch && r.batch->first_report == 0 && r.batch->n_tokens()) x_address_ = r.batch->embedding_data();
    if (!keep_ || r.dumps.empty()) return;
    const AttentionDump& d = r.dumps[0];
    for (std::size_t i = 0; i < d.reports.size(); ++i) {
      const std::uint64_t g = r.batch->first_report + d.reports[i];
      if (!keep_(g)) continue;  // a report the summary's top kept for the report, not asked for
      const std::size_t n = r.batch->report_length(d.reports[i]), nq = d.n_queries[i], block = nq * n;
      const float* src = d.maps.data() + d.maps_offset[i];
      reports_.push_back(g), n_.push_back(n), nq_.push_back(nq), query_.push_back(d.queries[i]);
      single_.insert(single_.end(), src, src + block);
      maps_.insert(maps_.end(), src + block, src + (heads_ + 1) * block);
      if (d.d_model) {
        const float* o = d.output.data() + d.output_offset[i];
        output_.insert(output_.end(), o, o + nq * d.d_model);
        d_out_ = d.d_model;
      }
    }
  }

  /// {"reports", "queries", "maps", "single", "output"}: arrays (maps [R, H, nq, n]) for reports
  /// of one length (x [B, n, d]), lists of one array per report for ragged ones (x [T, d] + offsets).
  /// `n`, `nq`: the uniform reports' tokens and query rows (the shape of an empty selection).
  nb::dict to_python(bool ragged, std::size_t n_uniform, std::size_t nq_uniform) {
    nb::dict out;
    out["reports"] = owned_array(std::vector<std::uint64_t>(reports_), {reports_.size()});
    out["queries"] = owned_array(std::vector<std::uint32_t>(query_), {query_.size()});
    const std::size_t R = reports_.size();
    const bool same = std::all_of(n_.begin(), n_.end(), [&](std::size_t v) { return v == n_[0]; }) &&
                      std::all_of(nq_.begin(), nq_.end(), [&](std::size_t v) { return v == nq_[0]; });
    if (!ragged && same) {  // uniform reports always have one shape
      const std::size_t n = R ? n_[0] : n_uniform, nq = R ? nq_[0] : nq_uniform;
      out["maps"] = owned_array(std::move(maps_), {R, heads_, nq, n});
      out["single"] = owned_array(std::move(single_), {R, nq, n});
      out["output"] = d_out_ ? owned_array(std::move(output_), {R, nq, d_out_}) : nb::none();
      return out;
    }
    nb::list maps, single, output;
    std::size_t m = 0, s = 0, o = 0;
    for (std::size_t i = 0; i < R; ++i) {
      const std::size_t block = nq_[i] * n_[i];
      maps.append(owned_array(std::vector<float>(maps_.begin() + m, maps_.begin() + m + heads_ * block), {heads_, nq_[i], n_[i]}));
      single.append(owned_array(std::vector<float>(single_.begin() + s, single_.begin() + s + block), {nq_[i], n_[i]}));
      if (d_out_)
        output.append(owned_array(std::vector<float>(output_.begin() + o, output_.begin() + o + nq_[i] * d_out_), {nq_[i], d_out_}));
      m += heads_ * block, s += block, o += nq_[i] * d_out_;
    }
    out["maps"] = maps, out["single"] = single;
    out["output"] = d_out_ ? nb::object(output) : nb::none();
    return out;
  }

  std::uintptr_t x_address() const { return reinterpret_cast<std::uintptr_t>(x_address_); }

 private:
  std::function<bool(std::uint64_t)> keep_;
  std::uint32_t heads_;
  std::vector<std::uint64_t> reports_;
  std::vector<std::size_t> n_, nq_;
  std::vector<std::uint32_t> query_;
  std::vector<float> maps_, single_, output_;
  std::size_t d_out_ = 0;
  const float* x_address_ = nullptr;
};

struct AttentionCall {
  ArrayEmbeddings x;
  ArrayAttention attention;
  std::string axes;        // empty: the seed's axes with features, else x0=x[0];x1=x[1]
  bool all_maps = false;   // maps=True
  bool some_maps = false;  // maps=[i, j, ...] (possibly empty)
  std::set<std::uint64_t> map_reports;
  job::JobArgs args;
  bool rows = true, report = true;
};

/// The axes of a call: given, the seed's (as `headsep run`) when there are features, else the
/// first two embedding components (documented in headsep.attention's docstring).
std::string axes_of(const AttentionCall& c) {
  if (!c.axes.empty()) return c.axes;
  if (c.x.features) return std::string(kSeedAxes);
  return c.x.d_model > 1 ? "x0=x[0];x1=x[1]" : "x0=x[0]";
}

nb::tuple run_attention(AttentionCall c) {
  const bool ragged = c.x.uniform == 0;
  const std::size_t uniform = c.x.uniform;
  auto specs = parse_axes(axes_of(c));
  c.args.axes = axes_of(c);
  c.x.columns = axis_columns(specs);
  job::Setup s;
  s.source = open_array_source(std::move(c.x));
  s.weighting = make_array_attention(c.attention, s.source->schema());
  s.axes = AxisMap::bind(specs, s.source->schema().feature_names);
  RunOptions opt = job::engine_options(c.args, s);
  auto res = RunResult::open(c.args, job::run_info(s), c.rows, c.report);
  res->attach(opt);
  std::function<bool(std::uint64_t)> keep;
  if (c.all_maps) keep = [](std::uint64_t) { return true; };
  else if (c.some_maps) keep = [sel = c.map_reports](std::uint64_t g) { return sel.count(g) > 0; };
  if (keep) {
    const std::uint64_t total = s.source->total_reports();
    for (std::uint64_t g : c.map_reports)
      if (g >= total)
        throw UsageError("maps: report index " + std::to_string(g) + " is out of range (" + std::to_string(total) + " reports)");
    opt.keep_maps = [keep](const ReportBatch& b, std::size_t r) { return keep(b.first_report + r); };
  }
  MapSink maps(keep, s.weighting->heads());
  std::vector<ResultSink*> sinks = res->sinks();
  sinks.push_back(&maps);
  res->stats = run_released(*s.source, *s.weighting, s.axes, opt, sinks);
  const std::size_t n = ragged ? 0 : uniform;
  const bool all_queries = s.weighting->attention(0)->config().query == QueryMode::all;
  nb::object m = keep ? nb::object(maps.to_python(ragged, n, all_queries ? n : 1)) : nb::none();
  return nb::make_tuple(std::move(res), m, maps.x_address());
}

/// x [B, n, d] or [T, d] (+ offsets) into the call; nothing is copied.
void set_x(AttentionCall& c, const FloatArray& x, nb::handle offsets) {
  const std::size_t nd = x.ndim();
  std::vector<std::size_t> shape(nd);
  for (std::size_t i = 0; i < nd; ++i) shape[i] = x.shape(i);
  if (nd != 2 && nd != 3)
    throw UsageError("x: shape " + shape_text(nd, shape.data()) + ", expected [B, n, d_model] or [T, d_model] with offsets");
  if (shape.back() == 0 || shape.back() > (1u << 20))
    throw UsageError("x: shape " + shape_text(nd, shape.data()) + ": d_model " + std::to_string(shape.back()) +
                     " is not in 1..1048576");
  c.x.data = x.data();
  c.x.d_model = static_cast<std::uint32_t>(shape.back());
  c.x.tokens = nd == 3 ? std::uint64_t(shape[0]) * shape[1] : shape[0];
  if (nd == 3) {
    if (!offsets.is_none()) throw UsageError("offsets: only with x as [T, d_model] (x is [B, n, d_model])");
    if (shape[1] == 0 && shape[0] > 0)
      throw UsageError("x: shape " + shape_text(nd, shape.data()) + " [B, n, d_model]: reports of 0 tokens");
    c.x.uniform = shape[1] ? shape[1] : 1;
  } else {
    if (offsets.is_none())
      throw UsageError("x: shape " + shape_text(nd, shape.data()) +
                       " is [T, d_model]: give offsets [B+1] (report r = rows offsets[r]..offsets[r+1]), or x as [B, n, d_model]");
    for (auto v : nb::cast<std::vector<std::int64_t>>(offsets)) {
      if (v < 0) throw UsageError("offsets: " + std::to_string(v) + " is negative");
      c.x.offsets.push_back(static_cast<std::uint64_t>(v));
    }
  }
}

void set_features(AttentionCall& c, nb::handle features, std::vector<std::string> names) {
  if (features.is_none()) {
    if (!names.empty()) throw UsageError("feature_names: given without features");
    return;
  }
  DoubleArray f;
  if (!nb::try_cast(features, f, false)) throw nb::type_error("features: expected a C-contiguous float64 CPU array");
  const std::size_t nd = f.ndim();
  std::vector<std::size_t> shape(nd);
  for (std::size_t i = 0; i < nd; ++i) shape[i] = f.shape(i);
  const bool flat = nd == 2 && shape[0] == c.x.tokens;
  const bool nested = nd == 3 && c.x.uniform && std::uint64_t(shape[0]) * shape[1] == c.x.tokens && shape[1] == c.x.uniform;
  if ((!flat && !nested) || shape.back() == 0)
    throw UsageError("features: shape " + shape_text(nd, shape.data()) + ", expected [T, F] with T = " +
                     std::to_string(c.x.tokens) + " token rows of x" + (c.x.uniform ? " (or [B, n, F])" : ""));
  c.x.features = f.data();
  c.x.n_features = static_cast<std::uint32_t>(shape.back());
  c.x.feature_names = std::move(names);
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def(
      "_attention",
      [](FloatArray x, nb::handle offsets, nb::handle weights, nb::handle baseline, std::uint32_t heads, std::string query,
         bool causal, nb::handle maps, unsigned threads, std::string axes, nb::handle features,
         std::vector<std::string> feature_names, std::vector<std::string> report_ids, std::size_t top, std::size_t bins,
         bool rows, bool report, std::uint64_t seed, std::string command_line) {
        AttentionCall c;
        set_x(c, x, offsets);
        set_features(c, features, std::move(feature_names));
        c.x.report_ids = std::move(report_ids);
        std::vector<FloatArray> keep;  // the weight arrays, alive while the plan copies them
        c.attention.heads = heads, c.attention.query = std::move(query), c.attention.causal = causal;
        c.attention.seed = seed;
        c.attention.weights = weights_from(weights, "weights", keep);
        c.attention.baseline = weights_from(baseline, "baseline", keep);
        if (nb::isinstance<nb::bool_>(maps)) c.all_maps = nb::cast<bool>(maps);
        else if (!maps.is_none() && (c.some_maps = true))
          for (auto v : nb::cast<std::vector<std::int64_t>>(maps)) {
            if (v < 0) throw UsageError("maps: report index " + std::to_string(v) + " is negative");
            c.map_reports.insert(static_cast<std::uint64_t>(v));
          }
        c.axes = std::move(axes);
        c.args.scenario = "(arrays)";
        c.args.scenario_label = "headsep.attention: x " + std::string(x.ndim() == 3 ? "[B, n, d_model]" : "[T, d_model] + offsets");
        c.args.weighting = "qkv";
        c.args.params = {"qkv.heads=" + std::to_string(heads), "qkv.query=" + c.attention.query,
                         std::string("qkv.causal=") + (causal ? "true" : "false")};
        if (!c.attention.weights.path.empty()) c.args.params.push_back("qkv.weights=" + c.attention.weights.path);
        if (!c.attention.baseline.path.empty()) c.args.params.push_back("qkv.baseline=" + c.attention.baseline.path);
        c.args.threads = threads, c.args.top = top, c.args.bins = bins;
        c.args.command_line = std::move(command_line);
        c.rows = rows, c.report = report;
        return run_attention(std::move(c));
      },
      nb::arg("x").noconvert(), nb::arg("offsets").none(), nb::arg("weights").none(), nb::arg("baseline").none(),
      nb::arg("heads"), nb::arg("query"), nb::arg("causal"), nb::arg("maps").none(), nb::arg("threads"), nb::arg("axes"),
      nb::arg("features").none(), nb::arg("feature_names"), nb::arg("report_ids"), nb::arg("top"), nb::arg("bins"),
      nb::arg("rows"), nb::arg("report"), nb::arg("seed"), nb::arg("command_line"),
      "The engine run behind headsep.attention: (RunResult, maps dict or None, address of the X the engine read).");
}

}  // namespace headsep::python
