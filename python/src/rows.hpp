// The rows' accessors that headsep.Result reads (columns as NumPy views of the engine's buffers,
// ids and tokens as lists), defined once for every bound result type that keeps a RowColumns:
// RunResult (headsep.run, headsep.attention) and ModelRunResult (headsep.model(...).run); and
// owned_array, the kept maps' arrays.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "engine/row_columns.hpp"

namespace headsep::python {

/// Read-only NumPy view of `v`, alive as long as `owner` (a bound instance: the array's base).
template <class T, class Owner>
nanobind::object view_of(const std::vector<T>& v, const Owner& owner) {
  return nanobind::cast(
      nanobind::ndarray<nanobind::numpy, const T, nanobind::ndim<1>>(v.data(), {v.size()}, nanobind::find(&owner)));
}

/// A NumPy array of `shape` that owns `v` (moved to the heap, freed with the array).
template <class T>
nanobind::object owned_array(std::vector<T>&& v, std::initializer_list<std::size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nanobind::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::cast(nanobind::ndarray<nanobind::numpy, T>(heap->data(), shape, owner));
}

/// Per report: a list of its tokens()[offset[i] .. offset[i + 1]) (str), or of its token ids (int).
template <class T>
nanobind::list per_report(const std::vector<T>& values, const std::vector<std::uint64_t>& offset) {
  nanobind::list out;
  for (std::size_t i = 0; i + 1 < offset.size(); ++i) {
    nanobind::list one;
    for (auto k = offset[i]; k < offset[i + 1]; ++k) {
      if constexpr (std::is_same_v<T, std::string>) one.append(nanobind::str(values[k].c_str(), values[k].size()));
      else one.append(values[k]);
    }
    out.append(one);
  }
  return out;
}

/// Adds has_rows, column_names, column_dtypes, column, report_of, scenario_of, scenarios, report_ids,
/// report_tokens, and for model runs layer_of and report_token_ids, to the class of `R`, whose
/// `rows` member (std::unique_ptr<RowColumns>) is null when the run kept no rows.
template <class R>
void def_rows(nanobind::class_<R>& c) {
  namespace nb = nanobind;
  static constexpr auto rows_of = [](const R& r) -> const RowColumns& {
    if (!r.rows) throw nb::value_error("this run kept no rows (rows=False)");
    return *r.rows;
  };
  c.def_prop_ro("has_rows", [](const R& r) { return r.rows != nullptr; })
      .def("column_names", [](const R& r) { return rows_of(r).names(); },
           "The numeric row columns, in the order of --per-report x.csv (after the id, scenario and token columns).")
      .def("column_dtypes", [](const R& r) {
             std::vector<std::string> out;
             for (RowColumnKind k : rows_of(r).kinds())
               out.emplace_back(k == RowColumnKind::kv_head ? "int64" : k == RowColumnKind::shared_kv ? "bool" : "float64");
             return out;
           }, "Per column the NumPy dtype of its values: float64 (metrics), int64 (a decoder's headH_kv_head), "
              "bool (a decoder's headI_headJ_shared_kv); column() gives every one as float64.")
      .def("column", [](const R& r, std::size_t i) {
             const auto& rows = rows_of(r);
             if (i >= rows.values().size()) throw nb::index_error("no such column");
             return view_of(rows.values()[i], r);
           }, nb::arg("index"), "Column `index` as a read-only float64 NumPy view.")
      .def("report_of", [](const R& r) { return view_of(rows_of(r).report_of(), r); },
           "Per row: its report's index (run order), uint64.")
      .def("scenario_of", [](const R& r) { return view_of(rows_of(r).scenario_of(), r); },
           "Per row: its scenario's index into scenarios(), uint32.")
      .def("layer_of", [](const R& r) { return view_of(rows_of(r).layer_of(), r); },
           "A model run: per row its layer, uint32 (empty for other runs).")
      .def("scenarios", [](const R& r) { return rows_of(r).scenarios(); })
      .def("report_ids", [](const R& r) { return rows_of(r).report_ids(); }, "Per report: its id.")
      .def("report_tokens", [](const R& r) { return per_report(rows_of(r).tokens(), rows_of(r).token_offset()); },
           "Per report: its tokens.")
      .def("report_token_ids", [](const R& r) {
             const auto& rows = rows_of(r);
             if (rows.token_ids().empty() && !rows.tokens().empty()) return nb::list();
             return per_report(rows.token_ids(), rows.token_offset());
           }, "A model run: per report its vocabulary ids (empty list for other runs).");
}

}  // namespace headsep::python
