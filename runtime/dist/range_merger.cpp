// headsep — rank 0's exchange for a CSV split into byte ranges (--mpi-csv ranges, csv_ranges.cpp):
// block j belongs to rank j mod K; rank 0 merges block after block in file order. A rank's
// messages carry their block; a rank with nothing in a block sends nothing for it, so a message
// of a later block (or the rank's end mark) closes the blocks before it.
#include "dist/comm.hpp"
#include "dist/csv_ranges.hpp"
#include "dist/messages.hpp"
#include "headsep/batch.hpp"

namespace headsep::dist::detail {
namespace {

class RangeMerger final : public ChunkExchange {
 public:
  explicit RangeMerger(RangedCsv& csv) : csv_(csv), ranks_(dist::size()), peeked_(std::size_t(ranks_)) {}
  bool merges() const override { return true; }

  Take take(std::uint64_t, ReportSource&, std::size_t chunk, ReportBatch& batch, BatchResult& result,
            std::vector<std::string>& names) override {
    for (; block_ < csv_.blocks(); ++block_) {
      const int owner = static_cast<int>(block_ % std::uint64_t(ranks_));
      if (owner == 0) {
        if (!local_ready_) {
          local_more_ = csv_.next(local_, chunk);
          local_block_ = csv_.last_block();
          local_ready_ = true;
          csv_.forget_before(UINT64_MAX);  // block_of() is for the workers' sinks
        }
        if (!local_more_ || local_block_ != block_) continue;
        batch = std::move(local_);
        local_ready_ = false;
        number(batch);
        return Take::local;
      }
      Peeked& p = peeked_[std::size_t(owner)];
      if (!p.ready && !p.ended) {
        const std::string msg = recv(owner, kResult, true);
        In in(msg, owner);
        if (in.u64() == kEnd) {
          in.done();
          p.ended = true;
        } else {
          p.block = in.u64();
          p.inner = in.str();
          in.done();
          if (p.block < block_ || p.block % std::uint64_t(ranks_) != std::uint64_t(owner))
            throw Error("message from rank " + std::to_string(owner) + " is corrupt (block " + std::to_string(p.block) + ")");
          p.ready = true;
        }
      }
      if (p.ended || p.block != block_) continue;
      std::uint64_t index = 0;
      if (!decode_result(p.inner, owner, index, batch, result, names))
        throw Error("message from rank " + std::to_string(owner) + " is corrupt (an end mark inside a block)");
      p.ready = false;
      p.inner.clear();
      number(batch);
      return Take::remote;
    }
    return Take::end;
  }

  void finish() override {
    for (int r = 1; r < ranks_; ++r) {
      Peeked& p = peeked_[std::size_t(r)];
      if (p.ready) throw Error("rank " + std::to_string(r) + " sent block " + std::to_string(p.block) + " after the end of the input");
      if (p.ended) continue;
      const std::string msg = recv(r, kResult, true);
      In in(msg, r);
      if (in.u64() != kEnd) throw Error("rank " + std::to_string(r) + " sent a chunk after the end of the input");
    }
  }

 private:
  struct Peeked {
    bool ready = false, ended = false;
    std::uint64_t block = 0;
    std::string inner;
  };
  // Global report indices, given in file order (each rank numbered its blocks from 0).
  void number(ReportBatch& b) {
    b.first_report = reports_;
    reports_ += b.n_reports();
    csv_.add_rows(b.source_rows);
  }

  RangedCsv& csv_;
  int ranks_;
  std::uint64_t block_ = 0, reports_ = 0;
  ReportBatch local_;
  bool local_ready_ = false, local_more_ = false;
  std::uint64_t local_block_ = 0;
  std::vector<Peeked> peeked_;
};

}  // namespace

std::unique_ptr<ChunkExchange> make_range_merger(RangedCsv& csv) { return std::make_unique<RangeMerger>(csv); }

}  // namespace headsep::dist::detail
