// The C ABI functions of every Python plugin (plugin.h): each takes the GIL for its call only,
// calls the object (through headsep/python_plugins.py's helpers, which turn what it returns into
// contiguous arrays) and writes through the host's callbacks, so the host's checks apply as for a
// .so. A Python exception becomes HEADSEP_ERROR with "what raised TYPE: MESSAGE (at FILE:LINE in
// FUNCTION)" as last_error(); the host adds the plugin's label and the chunk.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "python_plugin_calls.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

thread_local std::string t_error;  // last_error() of the calling thread
const char* last_error() { return t_error.c_str(); }

template <class T>
using In1 = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <class T>
using In2 = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Runs f with the GIL held; a Python exception or a C++ one becomes HEADSEP_ERROR + t_error.
template <class F>
headsep_status guarded(const PyPlugin& p, const std::string& what, F&& f) noexcept {
  nb::gil_scoped_acquire gil;
  try {
    return f();
  } catch (nb::python_error& e) {
    const bool interrupt = e.matches(PyExc_KeyboardInterrupt);
    try {
      t_error = what + " raised " + nb::cast<std::string>(p.helpers.attr("_describe_exception")(e.value()));
    } catch (...) {
      t_error = what + " raised " + e.what();
    }
    // Not PyErr_SetInterrupt(): with two worker threads in the plugin, the second interrupt
    // arrived after headsep.run had raised, in the caller's handler. The run fails with the
    // plugin's error and headsep.run turns it into one KeyboardInterrupt (run.cpp).
    if (interrupt && p.interrupted) p.interrupted->store(true);
  } catch (const std::exception& e) {
    t_error = what + ": " + e.what();
  } catch (...) {
    t_error = what + ": unknown C++ exception";
  }
  return HEADSEP_ERROR;
}

// The validated parameters (canonical text, table order) in their declared Python types.
nb::dict py_params(const PyPlugin& p, const headsep_param* params, std::uint32_t n) {
  nb::dict d;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::string v = params[i].value ? params[i].value : "";
    ParamType t = ParamType::string;
    for (std::size_t k = 0; k < p.param_names.size(); ++k)
      if (p.param_names[k] == params[i].name) t = p.param_types[k];
    nb::object o;
    switch (t) {
      case ParamType::integer: o = nb::int_(std::stoll(v)); break;
      case ParamType::real: o = nb::float_(std::strtod(v.c_str(), nullptr)); break;
      case ParamType::boolean: o = nb::bool_(v == "true"); break;
      case ParamType::string: o = nb::str(v.c_str(), v.size()); break;
    }
    d[params[i].name] = o;
  }
  return d;
}

// A NumPy copy of n contiguous values (shape `shape`), owned by the array.
template <class T>
nb::object np_copy(const T* src, std::initializer_list<std::size_t> shape) {
  std::size_t n = 1;
  for (auto s : shape) n *= s;
  T* buf = new T[n ? n : 1];
  if (n) std::memcpy(buf, src, n * sizeof(T));
  nb::capsule owner(buf, [](void* q) noexcept { delete[] static_cast<T*>(q); });
  return nb::cast(nb::ndarray<nb::numpy, T>(buf, shape, owner));
}

// ---- scenario generators ----------------------------------------------------------------

struct ScenarioState {
  PyPlugin* p = nullptr;
  std::vector<std::string> features, scenarios;
  std::vector<const char*> feature_ptrs, scenario_ptrs;
  headsep_schema schema{};
};

std::vector<std::string> strings(nb::handle seq) {
  std::vector<std::string> v;
  for (nb::handle s : seq) v.push_back(nb::cast<std::string>(s));
  return v;
}

headsep_status s_open(const headsep_param* params, std::uint32_t n, void** state) {
  auto* p = static_cast<PyPlugin*>(*state);  // the registration's user pointer
  return guarded(*p, "open()", [&] {
    p->obj.attr("open")(py_params(*p, params, n));
    auto s = std::make_unique<ScenarioState>();
    s->p = p;
    // (features, scenarios, given_heads, names_scenarios, random_access, total_reports, d_model)
    nb::tuple t = nb::cast<nb::tuple>(p->helpers.attr("_schema_of")(p->obj));
    s->features = strings(t[0]);
    s->scenarios = strings(t[1]);
    for (const auto& f : s->features) s->feature_ptrs.push_back(f.c_str());
    for (const auto& c : s->scenarios) s->scenario_ptrs.push_back(c.c_str());
    auto& c = s->schema;
    c.struct_size = sizeof(headsep_schema);
    c.n_features = static_cast<std::uint32_t>(s->features.size());
    c.feature_names = s->feature_ptrs.data();
    c.n_scenarios = static_cast<std::uint32_t>(s->scenarios.size());
    c.scenario_names = s->scenario_ptrs.data();
    c.given_heads = nb::cast<std::uint32_t>(t[2]);
    c.flags = (nb::cast<bool>(t[3]) ? HEADSEP_SCHEMA_NAMES_SCENARIOS : 0u) |
              (nb::cast<bool>(t[4]) ? HEADSEP_SCHEMA_RANDOM_ACCESS : 0u);
    c.total_reports = nb::cast<std::uint64_t>(t[5]);
    c.d_model = nb::cast<std::uint32_t>(t[6]);
    *state = s.release();
    return HEADSEP_OK;
  });
}

headsep_status s_describe(void* state, headsep_schema* out) {
  *out = static_cast<ScenarioState*>(state)->schema;
  return HEADSEP_OK;
}

// Appends length-delimited names (bytes objects) through one of the host's callbacks.
bool append_names(nb::handle names, headsep_chunk_out* out, std::int32_t (*fn)(headsep_chunk_out*, const char*, std::uint64_t)) {
  for (nb::handle b : names) {
    char* data = nullptr;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(b.ptr(), &data, &len) != 0) throw nb::python_error();
    if (fn(out, data, static_cast<std::uint64_t>(len)) != 0) return false;
  }
  return true;
}

// Writes the normalised chunk (headsep.python_plugins._chunk_parts) through the host's callbacks; false
// when the host refused one (its message is the error).
bool write_chunk(nb::tuple parts, headsep_chunk_out* out) {
  auto off = nb::cast<In1<std::uint64_t>>(parts[0]);
  const std::uint64_t n = off.shape(0) ? off.shape(0) - 1 : 0;
  std::uint64_t* o = out->token_offsets(out, n);
  if (!o) return false;
  std::memcpy(o, off.data(), (n + 1) * sizeof(std::uint64_t));
  std::uint32_t f = 0;
  for (nb::handle col : nb::cast<nb::list>(parts[1])) {
    if (!col.is_none()) {
      auto a = nb::cast<In1<double>>(col);
      double* d = out->feature(out, f, a.shape(0));
      if (!d) return false;
      std::memcpy(d, a.data(), a.shape(0) * sizeof(double));
    }
    ++f;
  }
  if (!append_names(parts[2], out, out->scenario)) return false;
  if (!parts[3].is_none() && !append_names(parts[3], out, out->report_id)) return false;
  if (!parts[4].is_none() && !append_names(parts[4], out, out->token_name)) return false;
  if (!parts[5].is_none()) {
    auto e = nb::cast<In2<float>>(parts[5]);
    float* d = out->embeddings(out, e.shape(0));
    if (!d) return false;
    std::memcpy(d, e.data(), e.shape(0) * e.shape(1) * sizeof(float));
  }
  for (nb::handle g : nb::cast<nb::list>(parts[6])) {
    nb::tuple t = nb::cast<nb::tuple>(g);
    auto a = nb::cast<In1<double>>(t[2]);
    double* d = out->given_weights(out, nb::cast<std::uint32_t>(t[0]), nb::cast<std::uint32_t>(t[1]), a.shape(0));
    if (!d) return false;
    std::memcpy(d, a.data(), a.shape(0) * sizeof(double));
  }
  out->source_rows = nb::cast<std::uint64_t>(parts[7]);
  out->rows_read = nb::cast<std::uint64_t>(parts[8]);
  return true;
}

headsep_status s_next(void* state, std::uint64_t index, std::uint64_t max_reports, headsep_chunk_out* out) {
  auto* s = static_cast<ScenarioState*>(state);
  const std::string what = "chunk(" + std::to_string(index) + ", " + std::to_string(max_reports) + ")";
  return guarded(*s->p, what, [&] {
    nb::object r = s->p->obj.attr("chunk")(index, max_reports);
    if (r.is_none()) return HEADSEP_END;
    nb::tuple parts = nb::cast<nb::tuple>(s->p->helpers.attr("_chunk_parts")(r, s->p->obj, s->schema.d_model));
    // A refused callback leaves its message with the host, which reports it over t_error.
    t_error = what + ": the host refused what it returned";
    return write_chunk(parts, out) ? HEADSEP_OK : HEADSEP_ERROR;
  });
}

void s_close(void* state) {
  auto* s = static_cast<ScenarioState*>(state);
  guarded(*s->p, "close()", [&] {
    s->p->obj.attr("close")();
    return HEADSEP_OK;
  });
  delete s;
}

// ---- weighting schemes -------------------------------------------------------------------

struct WeightingState {
  PyPlugin* p = nullptr;
  std::uint32_t heads = 0, d_model = 0, given_heads = 0;
  std::vector<std::string> names;
  std::vector<const char*> name_ptrs;
  nb::object feature_names;  // a tuple, handed to every Batch; released under the GIL (destroy)
  std::vector<headsep_attention_spec> specs;  // attention(): the host runs these instead of weights()
  std::deque<std::string> paths;              // their files (stable addresses)
  nb::list matrices;                          // float32 copies the specs point into
};

// attention()'s specs (headsep.python_plugins._attention_specs: shapes checked, float32 copies).
void read_attention(WeightingState& s, nb::handle specs) {
  for (nb::handle h : specs) {
    nb::tuple t = nb::cast<nb::tuple>(h);
    headsep_attention_spec a{};
    a.struct_size = sizeof a;
    a.input = nb::cast<std::uint32_t>(t[0]);
    a.d_model = nb::cast<std::uint32_t>(t[1]);
    a.heads = s.heads;
    a.d_k = nb::cast<std::uint32_t>(t[2]);
    a.d_v = nb::cast<std::uint32_t>(t[3]);
    a.query = nb::cast<std::uint32_t>(t[4]);
    a.query_index = nb::cast<std::int32_t>(t[5]);
    a.mask = nb::cast<std::uint32_t>(t[6]);
    a.seed = nb::cast<std::uint64_t>(t[7]);
    if (!t[8].is_none()) a.weights_path = s.paths.emplace_back(nb::cast<std::string>(t[8])).c_str();
    if (!t[9].is_none()) a.baseline_path = s.paths.emplace_back(nb::cast<std::string>(t[9])).c_str();
    const float** fields[] = {&a.w_q, &a.b_q, &a.w_k, &a.b_k, &a.w_v, &a.b_v, &a.w_o,
                              &a.b_o, &a.s_w_q, &a.s_b_q, &a.s_w_k, &a.s_b_k, &a.s_w_v, &a.s_b_v};
    nb::list mats = nb::cast<nb::list>(t[10]);
    for (std::size_t i = 0; i < std::size(fields) && i < mats.size(); ++i) {
      if (mats[i].is_none()) continue;
      *fields[i] = nb::cast<nb::ndarray<const float, nb::c_contig, nb::device::cpu>>(mats[i]).data();
      s.matrices.append(mats[i]);
    }
    s.specs.push_back(a);
  }
}

headsep_status w_create(const headsep_param* params, std::uint32_t n, const headsep_schema* schema, void** state) {
  auto* p = static_cast<PyPlugin*>(*state);
  return guarded(*p, "open()", [&] {
    auto s = std::make_unique<WeightingState>();
    s->p = p;
    nb::list feats, scens;
    for (std::uint32_t i = 0; i < schema->n_features; ++i) feats.append(nb::str(schema->feature_names[i]));
    for (std::uint32_t i = 0; i < schema->n_scenarios; ++i) scens.append(nb::str(schema->scenario_names[i]));
    s->d_model = schema->struct_size >= offsetof(headsep_schema, d_model) + sizeof(std::uint32_t) ? schema->d_model : 0;
    s->given_heads = schema->given_heads;
    s->feature_names = nb::tuple(feats);
    nb::object py_schema = p->helpers.attr("Schema")(s->feature_names, nb::tuple(scens), schema->given_heads,
                                                     (schema->flags & HEADSEP_SCHEMA_NAMES_SCENARIOS) != 0, s->d_model);
    p->obj.attr("open")(py_params(*p, params, n), py_schema);
    nb::tuple info = nb::cast<nb::tuple>(p->helpers.attr("_weighting_info")(p->obj));  // (heads, scenarios)
    s->heads = nb::cast<std::uint32_t>(info[0]);
    s->names = strings(info[1]);
    for (const auto& c : s->names) s->name_ptrs.push_back(c.c_str());
    nb::object specs = p->helpers.attr("_attention_specs")(p->obj, s->heads);
    if (!specs.is_none()) read_attention(*s, specs);
    *state = s.release();
    return HEADSEP_OK;
  });
}

headsep_status w_describe(void* state, headsep_weighting_info* info) {
  auto* s = static_cast<WeightingState*>(state);
  *info = headsep_weighting_info{};
  info->struct_size = sizeof(headsep_weighting_info);
  info->heads = s->heads;
  info->layout = HEADSEP_LAYOUT_PER_TOKEN;
  info->n_scenarios = static_cast<std::uint32_t>(s->name_ptrs.size());
  info->scenario_names = s->name_ptrs.data();
  info->attention = s->specs.empty() ? nullptr : s->specs.data();
  return HEADSEP_OK;
}

// The batch as a headsep.Batch of NumPy copies (a plugin may keep them past the call).
nb::object py_batch(const WeightingState& s, const headsep_batch_view* b) {
  const std::size_t nr = b->n_reports, nt = b->n_tokens, nf = b->n_features;
  std::vector<double> cols(nf * nt);
  for (std::size_t f = 0; f < nf; ++f)
    if (nt) std::memcpy(cols.data() + f * nt, b->features[f], nt * sizeof(double));
  nb::object given = nb::none(), emb = nb::none();
  if (b->n_given_rows && s.given_heads) {
    const std::size_t per = s.given_heads + 1;
    std::vector<double> g(b->n_given_rows * nt);
    for (std::size_t i = 0; i < b->n_given_rows; ++i)
      if (nt) std::memcpy(g.data() + i * nt, b->given_weights[i], nt * sizeof(double));
    given = np_copy(g.data(), {b->n_given_rows / per, per, nt});
  }
  if (s.d_model && b->embeddings) emb = np_copy(b->embeddings, {nt, std::size_t(s.d_model)});
  return s.p->helpers.attr("Batch")(b->first_report, np_copy(reinterpret_cast<const std::int64_t*>(b->token_offset), {nr + 1}), np_copy(cols.data(), {nf, nt}),
                                    s.feature_names, np_copy(b->scenarios, {std::size_t(b->n_scenarios)}), given, emb);
}

headsep_status w_weights(const void* state, const headsep_batch_view* b, std::uint32_t slot, double* const* rows) {
  const auto* s = static_cast<const WeightingState*>(state);
  const std::string what = "weights(reports " + std::to_string(b->first_report) + ".." +
                           std::to_string(b->first_report + b->n_reports - 1) + ", slot " + std::to_string(slot) + ")";
  return guarded(*s->p, what, [&] {
    nb::object r = s->p->obj.attr("weights")(py_batch(*s, b), slot);
    auto a = nb::cast<In2<double>>(s->p->helpers.attr("_weights_array")(r, s->heads, b->n_tokens));
    for (std::uint32_t h = 0; h <= s->heads; ++h)
      if (rows[h] && b->n_tokens) std::memcpy(rows[h], a.data() + std::size_t(h) * b->n_tokens, b->n_tokens * sizeof(double));
    return HEADSEP_OK;
  });
}

void w_destroy(void* state) {
  auto* s = static_cast<WeightingState*>(state);
  guarded(*s->p, "close()", [&] {
    s->p->obj.attr("close")();
    return HEADSEP_OK;
  });
  nb::gil_scoped_acquire gil;  // its Python objects go under the GIL
  delete s;
}

}  // namespace

headsep_plugin_descriptor python_descriptor(const PyPlugin& p) {
  headsep_plugin_descriptor d{};
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = p.kind == PluginKind::scenario ? HEADSEP_KIND_SCENARIO : HEADSEP_KIND_WEIGHTING;
  d.name = p.name.c_str();
  d.version = p.version.c_str();
  d.description = p.description.c_str();
  d.n_params = static_cast<std::uint32_t>(p.specs.size());
  d.params = p.specs.empty() ? nullptr : p.specs.data();
  d.last_error = &last_error;
  if (p.kind == PluginKind::scenario) {
    d.open = &s_open;
    d.describe = &s_describe;
    d.next_chunk = &s_next;
    d.close = &s_close;
  } else {
    d.create = &w_create;
    d.describe_weighting = &w_describe;
    d.weights = &w_weights;
    d.destroy = &w_destroy;
  }
  return d;
}

}  // namespace headsep::python
