// RowColumns (row_columns.hpp): every (report, scenario) row in memory, column by column, in the
// order and with the values the CSV writer writes (formatted_rows.hpp's for_each_row_value).
#include "engine/row_columns.hpp"

#include <algorithm>
#include <type_traits>

#include "engine/formatted_rows.hpp"
#include "headsep/error.hpp"

namespace headsep {

RowColumns::RowColumns(RunInfo info) : info_(std::move(info)) {
  names_ = row_column_names(info_, &kinds_);
  values_.resize(names_.size());
}

void RowColumns::consume(const BatchResult& res, SinkPartial*) {
  const auto& b = *res.batch;
  std::vector<std::uint32_t> slot(res.metrics.size());
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const std::string& name = *res.scenario_names[j];
    auto it = std::find(scenarios_.begin(), scenarios_.end(), name);
    slot[j] = static_cast<std::uint32_t>(it - scenarios_.begin());
    if (it == scenarios_.end()) scenarios_.push_back(name);
  }
  // No reserve(size + rows) here: an exact reserve per batch defeats push_back's geometric
  // growth and made keeping rows quadratic in the run (issue 47). Capacity grows by doubling.
  const std::size_t capacity = values_.empty() ? report_of_.capacity() : values_.front().capacity();
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    const std::uint64_t report = report_ids_.size();
    report_ids_.push_back(b.report_id(r));
    for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
      tokens_.push_back(b.token_name(r, t));
      if (!res.layers.empty()) token_ids_.push_back(res.token_ids.at(t));
    }
    token_offset_.push_back(tokens_.size());
    for (std::size_t j = 0; j < res.metrics.size(); ++j) {
      report_of_.push_back(report);
      scenario_of_.push_back(slot[j]);
      if (!res.layers.empty()) layer_of_.push_back(res.layers[j]);
      row_.clear();
      // A decoder's kv_head and shared_kv kept as numbers too (kinds() says which).
      for_each_row_value(res.metrics[j], r, info_, [this](auto v) {
        if constexpr (std::is_same_v<decltype(v), KvHead>) row_.push_back(v.index);
        else if constexpr (std::is_same_v<decltype(v), SharedKv>) row_.push_back(v.shared ? 1.0 : 0.0);
        else row_.push_back(v);
      });
      if (row_.size() != values_.size())  // RunInfo and the metric blocks disagree: a bug, not bad data
        throw Error("rows: " + std::to_string(row_.size()) + " values for " + std::to_string(values_.size()) + " columns");
      for (std::size_t k = 0; k < values_.size(); ++k) values_[k].push_back(row_[k]);
    }
  }
  if ((values_.empty() ? report_of_.capacity() : values_.front().capacity()) != capacity) ++regrowths_;
}

}  // namespace headsep
