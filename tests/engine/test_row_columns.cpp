// RowColumns (Python's Result.rows, the CLI-equal rows kept in memory): values in the CSV's order,
// and buffers that grow geometrically — a run of many small batches must not regrow every column
// once per batch (issue 47: an exact reserve per batch made 2 M rows take 99 s instead of 0.1 s).
#include <catch2/catch.hpp>

#include "engine/row_columns.hpp"

using namespace headsep;

namespace {

// A batch of `reports` reports of two tokens each, one scenario, two heads on one axis, with the
// report's global index written into its separation so the rows can be checked in order.
struct TinyBatch {
  ReportBatch batch;
  MetricBlock block;
  std::string scenario = "s";
  BatchResult result;

  TinyBatch(std::uint64_t first, std::size_t reports) {
    batch.first_report = first;
    for (std::size_t r = 0; r < reports; ++r) batch.token_offset.push_back(batch.token_offset.back() + 2);
    block.resize(2, 1, reports);
    for (std::size_t r = 0; r < reports; ++r) block.separation[r] = double(first + r);
    result.batch = &batch;
    result.scenario_names = {&scenario};
    result.metrics = {block};
  }
};

}  // namespace

TEST_CASE("RowColumns: rows kept in run order, buffers regrown O(log rows) times over many batches", "[engine][rows]") {
  RunInfo info;
  info.axis_names = {"a"};
  info.heads = 2;
  RowColumns rows(info);
  const auto& names = rows.names();
  const auto sep = std::find(names.begin(), names.end(), "head_separation");
  REQUIRE(sep != names.end());
  constexpr std::size_t kBatches = 20000, kReports = 5;
  for (std::size_t i = 0; i < kBatches; ++i) {
    TinyBatch b(i * kReports, kReports);
    rows.consume(b.result, nullptr);
  }
  REQUIRE(rows.rows() == kBatches * kReports);
  const auto& col = rows.values()[std::size_t(sep - names.begin())];
  for (std::size_t r = 0; r < rows.rows(); r += 9973) CHECK(col[r] == double(r));
  CHECK(rows.report_ids().back() == "#" + std::to_string(kBatches * kReports - 1));
  // 100 000 rows: doubling regrows ~17 times; an exact reserve per batch would regrow 20 000 times.
  CHECK(rows.regrowths() <= 40);
}
