// The last check before a number leaves the program: a metric row's first non-finite value,
// named as a reader of the rows would look for it (the engine's and the model's result checks,
// the row writers).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "headsep/batch.hpp"

namespace headsep {

/// Report r's first non-finite value in m ("pair head1-head2's js_divergence", "head2's context
/// on axis 'd'", ...), or "" when every value is finite. `axes` names the context axes (may be
/// empty: axes by number). Order: contexts, differences, pairwise distances, separation, head
/// statistics, pair statistics.
std::string nonfinite_metric(const MetricBlock& m, std::size_t r, const std::vector<std::string>& axes = {});

/// Whether any value of m is Inf or NaN (one pass, no branch per value).
bool any_nonfinite_metric(const MetricBlock& m) noexcept;

}  // namespace headsep
