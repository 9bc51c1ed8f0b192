// The engine's checks on a batch (the pipeline's "validate" steps): weights a scheme returned
// must be finite and >= 0, and results must be finite; each failure names the report, the
// scenario and (for weights) the head and token.
#include "engine/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "headsep/error.hpp"
#include "kernels/metrics_simd.hpp"
#include "support/float_bits.hpp"
#include "support/metric_check.hpp"

namespace headsep::engine {

// Slot `slot`'s rows of `w` (slot 0 unless w holds every slot); `skip_baseline`: its row 0 is
// another slot's, checked there.
void check_weights(const ReportBatch& batch, const WeightBlock& w, std::size_t slot, bool skip_baseline,
                   const std::string& scenario, const std::string& label, SimdLevel level) {
  const std::size_t n = batch.n_tokens();
  for (std::uint32_t h = skip_baseline ? 1 : 0; h <= w.heads; ++h) {
    const double* row = w.rows[slot * (std::size_t(w.heads) + 1) + h].data();
    if (kernels::valid_weights(row, n, level)) continue;  // the common case; else find the first bad one
    for (std::size_t r = 0; r < batch.n_reports(); ++r)
      for (auto t = batch.token_offset[r]; t < batch.token_offset[r + 1]; ++t)
        if (!(row[t] >= 0.0 && row[t] <= 1.7976931348623157e308)) {
          char v[32];
          std::snprintf(v, sizeof v, "%g", row[t]);
          const std::string where = (label.empty() ? std::string() : label + ": ") + "report '" +
                                    batch.report_id(r) + "', scenario '" + scenario + "': " +
                                    (h ? "head" + std::to_string(h) : std::string("single")) + " weight of token " +
                                    std::to_string(t - batch.token_offset[r] + 1);
          if (detail::is_unwritten(row[t]))  // poisoned before the call (poison_weights) and left so
            throw Error(where + " was not written by weights() (" +
                        (h ? "row " + std::to_string(h) + ", head " + std::to_string(h)
                           : std::string("row 0, the single-head baseline")) +
                        (w.slots > 1 ? " of slot " + std::to_string(slot) : std::string()) +
                        "; a scheme must fill every row it is given, for every token)");
          throw Error(where + " is " + v + " (weights must be finite and >= 0)");
        }
  }
}

void poison_weights(WeightBlock& w, bool keep_first) {
  for (std::size_t i = keep_first ? 1 : 0; i < w.rows.size(); ++i)
    std::fill(w.rows[i].begin(), w.rows[i].end(), detail::unwritten());
}

void check_results(const ReportBatch& batch, const MetricBlock& m, const std::string& scenario, const std::string& source,
                   const std::string& weighting) {
  if (!any_nonfinite_metric(m)) return;
  for (std::size_t r = 0; r < m.n; ++r)
    if (const std::string what = nonfinite_metric(m, r); !what.empty())
      throw Error("report '" + batch.report_id(r) + "', scenario '" + scenario + "': " + what +
                  " overflowed to a non-finite value: the inputs from " + source + " are too large for " +
                  (weighting.empty() ? std::string("the weighting") : weighting));
}

}  // namespace headsep::engine
