// headsep — context axes: each axis is a weighted sum of feature columns.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headsep/batch.hpp"

namespace headsep {

/// One axis as written by the user: name = [coef*]column (+|- [coef*]column)...
struct AxisSpec {
  std::string name;
  std::vector<std::pair<std::string, double>> terms;  ///< (column, coefficient)
};

/// The seed's axes: decision_axis = decision_axis; evidence_condition_axis = evidence_axis + condition_axis.
inline constexpr std::string_view kSeedAxes =
    "decision_axis=decision_axis;evidence_condition_axis=evidence_axis+condition_axis";

/// Parses "name=colA+colB;name2=0.5*colC-colD". Throws UsageError naming the bad part.
std::vector<AxisSpec> parse_axes(std::string_view spec);

/// Feature columns the axes read, each once, in order of first use.
std::vector<std::string> axis_columns(const std::vector<AxisSpec>& axes);

/// Axes bound to feature indices of a Schema.
struct AxisMap {
  struct Term { std::uint32_t feature; double coefficient; };
  struct Axis { std::string name; std::vector<Term> terms; };
  std::vector<Axis> axes;

  /// Throws Error when an axis names a column the schema lacks.
  static AxisMap bind(const std::vector<AxisSpec>& specs, const std::vector<std::string>& feature_names);
  std::size_t size() const noexcept { return axes.size(); }
  std::vector<std::string> names() const;

  /// out[c][t] = 0 + k1*f1[t] + k2*f2[t] + ... in term order (the seed's Python summation order).
  template <class T>
  void project(const ReportBatch& batch, std::vector<std::vector<T>>& out) const;
};

extern template void AxisMap::project<double>(const ReportBatch&, std::vector<std::vector<double>>&) const;
extern template void AxisMap::project<float>(const ReportBatch&, std::vector<std::vector<float>>&) const;

}  // namespace headsep
