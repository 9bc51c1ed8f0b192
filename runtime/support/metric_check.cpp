// A metric row's first non-finite value, named (metric_check.hpp).
#include "support/metric_check.hpp"

#include <cmath>

#include "headsep/attention.hpp"
#include "headsep/finite.hpp"

namespace headsep {
namespace {

std::string head_name(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("the single head"); }

std::string axis_name(const std::vector<std::string>& axes, std::uint32_t c) {
  return c < axes.size() ? "axis '" + axes[c] + "'" : "axis " + std::to_string(c + 1);
}

}  // namespace

std::string nonfinite_metric(const MetricBlock& m, std::size_t r, const std::vector<std::string>& axes) {
  for (std::uint32_t h = 0; h <= m.heads; ++h)
    for (std::uint32_t c = 0; c < m.axes; ++c)
      if (!std::isfinite(m.ctx(h, c, r))) return head_name(h) + "'s context on " + axis_name(axes, c);
  for (std::uint32_t h = 1; h <= m.heads && !m.difference.empty(); ++h)
    for (std::uint32_t c = 0; c < m.axes; ++c)
      if (!std::isfinite(m.diff(h, c, r))) return head_name(h) + "'s difference from the single head on " + axis_name(axes, c);
  std::size_t p = 0;
  for (std::uint32_t i = 1; i <= m.heads; ++i)
    for (std::uint32_t j = i + 1; j <= m.heads; ++j, ++p)
      if (!m.pairwise.empty() && !std::isfinite(m.pair(p, r)))
        return "the context distance of pair head" + std::to_string(i) + "-head" + std::to_string(j);
  if (!m.separation.empty() && !std::isfinite(m.separation[r])) return "head_separation";
  for (std::uint32_t h = 0; h <= m.heads && m.attention(); ++h)
    for (std::uint32_t k = 0; k < m.head_stat_count; ++k)
      if (!std::isfinite(m.head_stat(h, k, r))) return head_name(h) + "'s " + std::string(head_stat_name(k));
  p = 0;
  for (std::uint32_t i = 1; i <= m.heads && m.pair_stat_count; ++i)
    for (std::uint32_t j = i + 1; j <= m.heads; ++j, ++p)
      for (std::uint32_t k = 0; k < m.pair_stat_count; ++k)
        if (!std::isfinite(m.pair_stat(p, k, r)))
          return "pair head" + std::to_string(i) + "-head" + std::to_string(j) + "'s " + std::string(pair_stat_name(k));
  return {};
}

bool any_nonfinite_metric(const MetricBlock& m) noexcept {
  for (const auto* v : {&m.context, &m.difference, &m.pairwise, &m.separation, &m.head_stats, &m.pair_stats})
    if (any_non_finite(v->data(), v->size())) return true;
  return false;
}

}  // namespace headsep
