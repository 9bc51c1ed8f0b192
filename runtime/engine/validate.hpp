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

// Every row a scheme is about to fill set to detail::unwritten() (row 0 kept when `keep_first`:
// slot 0's shared baseline), so check_weights can tell a weight never written from one written.
void poison_weights(WeightBlock& w, bool keep_first);

// Throws Error naming the first report of `m` with a non-finite context, separation or statistic,
// and the plugins whose values met there (`source` and `weighting`: their labels).
void check_results(const ReportBatch& batch, const MetricBlock& m, const std::string& scenario, const std::string& source,
                   const std::string& weighting);

}  // namespace headsep::engine
