// The maps of the reports a user picks for the head view (--attention-reports with a report):
// every query and key, copied from the batch's dumps on a worker thread, kept in batch order.
#include "headsep/batch.hpp"
#include "report/report.hpp"

namespace headsep::report {
namespace {

struct Picked : SinkPartial {
  std::vector<ChosenMap> maps;
};

}  // namespace

void ChosenMaps::prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const {
  auto p = std::make_unique<Picked>();
  const ReportBatch& b = *res.batch;
  for (std::size_t j = 0; j < res.dumps.size(); ++j) {
    const AttentionDump& d = res.dumps[j];
    for (std::size_t i = 0; i < d.reports.size(); ++i) {
      const std::size_t r = d.reports[i];
      if (!pick_(b, r)) continue;  // the dumps also hold the batch's top reports (Collector's)
      const std::size_t n = b.report_length(r), nq = d.n_queries[i];
      ChosenMap c;
      c.scenario = j < res.scenario_names.size() && res.scenario_names[j] ? *res.scenario_names[j] : std::string();
      c.layer = j < res.layers.size() ? res.layers[j] : 0;
      AttentionMap& a = c.map;
      a.id = b.report_id(r);
      a.index = b.first_report + r;
      a.separation = j < res.metrics.size() && r < res.metrics[j].separation.size() ? res.metrics[j].separation[r] : 0.0;
      a.n = a.keys = std::uint32_t(n);
      a.first_query = d.queries[i];
      a.queries = a.all_queries = std::uint32_t(nq);
      for (std::size_t k = 0; k < n; ++k) a.tokens.push_back(b.token_name(r, b.token_offset[r] + k));
      const float* src = d.maps.data() + d.maps_offset[i];
      a.maps.assign(src, src + std::size_t(d.heads + 1) * nq * n);
      p->maps.push_back(std::move(c));
    }
  }
  partial = std::move(p);
}

void ChosenMaps::consume(const BatchResult&, SinkPartial* partial) {
  auto* p = static_cast<Picked*>(partial);
  for (auto& m : p->maps) kept_.push_back(std::move(m));
}

}  // namespace headsep::report
