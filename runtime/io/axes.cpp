#include "headsep/axes.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep {

std::vector<AxisSpec> parse_axes(std::string_view spec) {
  std::vector<AxisSpec> out;
  for (std::string_view part : split(spec, ';')) {
    part = trim(part);
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string_view::npos)
      throw UsageError("--axes: '" + std::string(part) + "' has no '=' (expected name=colA+colB)");
    AxisSpec axis{std::string(trim(part.substr(0, eq))), {}};
    if (axis.name.empty()) throw UsageError("--axes: axis with an empty name in '" + std::string(part) + "'");
    for (const auto& a : out)
      if (a.name == axis.name) throw UsageError("--axes: axis '" + axis.name + "' defined twice");
    std::string_view rhs = part.substr(eq + 1);
    // Split on + and - that start a term (not the sign of an exponent like 1e-3).
    std::size_t i = 0;
    while (i < rhs.size()) {
      double sign = 1.0;
      while (i < rhs.size() && (rhs[i] == ' ' || rhs[i] == '+' || rhs[i] == '-')) {
        if (rhs[i] == '-') sign = -sign;
        ++i;
      }
      std::size_t j = i;
      while (j < rhs.size() && rhs[j] != '+' && !(rhs[j] == '-' && j > i && rhs[j - 1] != 'e' && rhs[j - 1] != 'E' && rhs[j - 1] != '*'))
        ++j;
      std::string_view term = trim(rhs.substr(i, j - i));
      if (term.empty()) throw UsageError("--axes: empty term in axis '" + axis.name + "'");
      double coef = 1.0;
      if (auto star = term.find('*'); star != std::string_view::npos) {
        std::string_view num = trim(term.substr(0, star));
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), coef);
        if (ec != std::errc() || p != num.data() + num.size())
          throw UsageError("--axes: bad coefficient '" + std::string(num) + "' in axis '" + axis.name + "'");
        // from_chars reads "nan" and "inf" too; they would only surface later as a non-finite
        // context blamed on the data (found by tests/fuzz).
        if (!std::isfinite(coef))
          throw UsageError("--axes: coefficient '" + std::string(num) + "' in axis '" + axis.name + "' is not a finite number");
        term = trim(term.substr(star + 1));
      }
      if (term.empty()) throw UsageError("--axes: missing column after '*' in axis '" + axis.name + "'");
      axis.terms.emplace_back(std::string(term), sign * coef);
      i = j;
    }
    if (axis.terms.empty()) throw UsageError("--axes: axis '" + axis.name + "' has no columns");
    out.push_back(std::move(axis));
  }
  if (out.empty()) throw UsageError("--axes: no axis defined");
  return out;
}

std::vector<std::string> axis_columns(const std::vector<AxisSpec>& axes) {
  std::vector<std::string> cols;
  for (const auto& a : axes)
    for (const auto& [col, coef] : a.terms)
      if (std::find(cols.begin(), cols.end(), col) == cols.end()) cols.push_back(col);
  return cols;
}

AxisMap AxisMap::bind(const std::vector<AxisSpec>& specs, const std::vector<std::string>& feature_names) {
  AxisMap map;
  for (const auto& s : specs) {
    Axis axis{s.name, {}};
    for (const auto& [col, coef] : s.terms) {
      auto it = std::find(feature_names.begin(), feature_names.end(), col);
      if (it == feature_names.end())
        throw Error("axis '" + s.name + "' uses column '" + col + "', which the input does not have");
      axis.terms.push_back({static_cast<std::uint32_t>(it - feature_names.begin()), coef});
    }
    map.axes.push_back(std::move(axis));
  }
  return map;
}

std::vector<std::string> AxisMap::names() const {
  std::vector<std::string> n;
  for (const auto& a : axes) n.push_back(a.name);
  return n;
}

template <class T>
void AxisMap::project(const ReportBatch& batch, std::vector<std::vector<T>>& out) const {
  const std::size_t n = batch.n_tokens();
  out.resize(axes.size());
  for (std::size_t c = 0; c < axes.size(); ++c) {
    auto& dst = out[c];
    dst.assign(n, T(0));
    for (const Term& term : axes[c].terms) {
      const double* f = batch.features[term.feature].data();
      const double k = term.coefficient;
      // Computed in double, as Python does, then stored at the run's precision.
      if constexpr (std::is_same_v<T, double>) {
        for (std::size_t t = 0; t < n; ++t) dst[t] += k * f[t];
      } else {
        for (std::size_t t = 0; t < n; ++t) dst[t] = T(double(dst[t]) + k * f[t]);
      }
    }
  }
}

template void AxisMap::project<double>(const ReportBatch&, std::vector<std::vector<double>>&) const;
template void AxisMap::project<float>(const ReportBatch&, std::vector<std::vector<float>>&) const;

}  // namespace headsep
