// headsep — the CSV as byte ranges aligned to report boundaries (--mpi-csv ranges; see
// csv_ranges.cpp and docs/DISTRIBUTED.md). Private to runtime/dist/ and the CLI.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/dist.hpp"
#include "headsep/source.hpp"

namespace headsep::dist {

/// Collective (every rank calls it): this rank's blocks of the CSV `options.path`, as a
/// sequential source with `schema` (the features and heads the run was set up with); blocks of
/// `mpi.csv_block` bytes when set.
std::unique_ptr<ReportSource> split_csv(const CsvSourceOptions& options, const Schema& schema, const Options& mpi);

namespace detail {

class RangedCsv final : public ReportSource {
 public:
  RangedCsv(const CsvSourceOptions& base, const Schema& schema);
  ~RangedCsv() override;
  /// Cuts the rows into blocks of `block_bytes` (0: automatic) and finds this rank's.
  void split(int rank, int ranks, std::uint64_t block_bytes);
  const Schema& schema() const override { return schema_; }
  std::string label() const override { return "CSV reader (core, byte ranges) for " + path_; }
  bool next(ReportBatch& batch, std::size_t max_reports) override;
  /// Rank 0: every row of the file once the merge is over (the merger counts them).
  std::uint64_t rows_read() const override { return rows_total_; }
  void add_rows(std::uint64_t n) { rows_total_ += n; }

  std::uint64_t blocks() const noexcept { return blocks_; }
  /// Block of the batch the last next() returned (blocks() after the end).
  std::uint64_t last_block() const noexcept { return last_block_; }
  /// Block of this source's n-th batch (any thread); forget_before(n) drops older entries.
  std::uint64_t block_of(std::uint64_t n) const;
  void forget_before(std::uint64_t n);

 private:
  struct Block {
    std::uint64_t index = 0, begin = 0, end = 0, line = 0;
  };
  std::uint64_t header_end() const;
  std::uint64_t record(std::uint64_t p, std::string& id) const;
  std::uint64_t align(std::uint64_t raw, bool quoted) const;
  bool open_next_block();

  CsvSourceOptions base_;
  Schema schema_;
  std::map<std::string, std::uint32_t> ids_;
  std::string path_;
  const char* data_ = nullptr;
  std::uint64_t size_ = 0, header_ = 0, block_ = 0, blocks_ = 0;
  std::size_t c_report_ = 0;
  std::string header_bytes_, block_bytes_;
  std::vector<Block> mine_;
  std::size_t next_block_ = 0;
  std::unique_ptr<ReportSource> current_;
  std::uint64_t current_block_ = 0, last_block_ = 0, rows_total_ = 0;
  mutable std::mutex mu_;
  std::deque<std::uint64_t> block_of_;
  std::uint64_t popped_ = 0;
};

/// Rank 0's exchange for a RangedCsv: merges the blocks in file order (range_merger.cpp).
std::unique_ptr<ChunkExchange> make_range_merger(RangedCsv& csv);

}  // namespace detail
}  // namespace headsep::dist
