// The rows of `--per-report x.csv` kept in memory as columns (the Python module's Result.rows and
// Result.arrays): the CSV writer's numeric columns in its order with the very values it formats
// (for_each_row_value, formatted_rows.hpp), one row per (report, scenario), reports in run order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/formatted_rows.hpp"
#include "headsep/run.hpp"

namespace headsep {

class RowColumns final : public ResultSink {
 public:
  explicit RowColumns(RunInfo info);
  void consume(const BatchResult& result, SinkPartial* partial) override;

  /// Numeric columns, the CSV's header order (row_column_names), and their values [column][row].
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::vector<std::vector<double>>& values() const noexcept { return values_; }
  /// Per column what it holds: a metric, or a decoder's kv_head (a whole number) or shared_kv
  /// (1 = true, 0 = false), which the CSV writes as integers and true/false.
  const std::vector<RowColumnKind>& kinds() const noexcept { return kinds_; }
  std::size_t rows() const noexcept { return scenario_of_.size(); }
  /// Per row: its report (index into report_ids(), reports in run order) and its scenario
  /// (index into scenarios(), in order of first appearance).
  const std::vector<std::uint64_t>& report_of() const noexcept { return report_of_; }
  const std::vector<std::uint32_t>& scenario_of() const noexcept { return scenario_of_; }
  const std::vector<std::string>& scenarios() const noexcept { return scenarios_; }
  /// Per report: its id, and its tokens tokens()[token_offset()[i] .. token_offset()[i + 1]).
  const std::vector<std::string>& report_ids() const noexcept { return report_ids_; }
  const std::vector<std::uint64_t>& token_offset() const noexcept { return token_offset_; }
  const std::vector<std::string>& tokens() const noexcept { return tokens_; }
  /// A model run (RunInfo::layers > 0): per row its layer; per token its vocabulary id
  /// (token_ids()[token_offset()[i] ..], as tokens()). Empty otherwise.
  const std::vector<std::uint32_t>& layer_of() const noexcept { return layer_of_; }
  const std::vector<std::uint32_t>& token_ids() const noexcept { return token_ids_; }
  /// Batches after which the columns' buffers had moved (grown): O(log rows) while growth is
  /// geometric, one per batch if it were not (tests count it instead of timing the rows).
  std::size_t regrowths() const noexcept { return regrowths_; }

 private:
  RunInfo info_;
  std::vector<std::string> names_;
  std::vector<RowColumnKind> kinds_;
  std::vector<std::vector<double>> values_;
  std::vector<std::uint64_t> report_of_;
  std::vector<std::uint32_t> scenario_of_;
  std::vector<std::string> scenarios_;
  std::vector<std::string> report_ids_;
  std::vector<std::uint64_t> token_offset_{0};
  std::vector<std::string> tokens_;
  std::vector<std::uint32_t> layer_of_;
  std::vector<std::uint32_t> token_ids_;
  std::vector<double> row_;  // consume()'s scratch: one row's values
  std::size_t regrowths_ = 0;
};

}  // namespace headsep
