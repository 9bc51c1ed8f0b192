// Private: the engine's checks on a batch's weights and results (validate.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "headsep/batch.hpp"
#include "headsep/kernels.hpp"
#include "headsep/source.hpp"

namespace headsep::engine {

// Slot `slot`'s rows of `w` (slot 0 unless w holds every slot); `skip_baseline`: its row 0 is
// another slot's, checked there. Throws Error naming `label` (the scheme), the report, scenario,
// head and token of the first weight that is not finite and >= 0.
void check_weights(const ReportBatch& batch, const WeightBlock& w, std::size_t slot, bool skip_baseline,
                   const std::string& scenario, const std::string& label, SimdLevel level);

// Throws Error naming the first report of `m` with a non-finite context, separation or statistic.
void check_results(const ReportBatch& batch, const MetricBlock& m, const std::string& scenario);

}  // namespace headsep::engine
