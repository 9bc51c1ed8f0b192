// headsep — rank 0's exchange (docs/DISTRIBUTED.md): takes every chunk in chunk order, computed
// here or received from the rank that computed it; reads ahead and hands chunks out when the
// source is sequential. Private to runtime/dist/ (offset_rows.cpp replies through it).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dist/comm.hpp"
#include "headsep/batch.hpp"
#include "headsep/run.hpp"

namespace headsep::dist::detail {

/// Chunk i belongs to rank i mod K (rank 0 included).
class Merger final : public ChunkExchange {
 public:
  explicit Merger(bool full) : ranks_(dist::size()), full_(full) { (void)full_; }
  ~Merger() override;
  bool merges() const override { return true; }
  Take take(std::uint64_t index, ReportSource& source, std::size_t chunk, ReportBatch& batch, BatchResult& result,
            std::vector<std::string>& names) override;
  void finish() override;

  // Offset writes: the owner and row bytes of a chunk another rank formatted (none: rank 0's).
  bool remote_rows(std::uint64_t index, int& owner, std::uint64_t& bytes);
  void forget_rows(std::uint64_t index);
  /// Sends `owner` where to write its rows (kOffset), without waiting.
  void reply(int owner, std::string bytes);

 private:
  bool receive(int owner, ReportBatch& batch, BatchResult& result, std::vector<std::string>& names);
  void reap();

  int ranks_;
  bool full_;
  std::uint64_t taking_ = 0;
  std::mutex mu_;
  std::map<std::uint64_t, std::pair<int, std::uint64_t>> remote_rows_;
  std::deque<std::unique_ptr<Pending>> pending_replies_;
  std::uint64_t read_ = 0;
  bool eof_ = false;
  std::deque<ReportBatch> local_;
  std::deque<std::unique_ptr<Pending>> pending_;
  std::set<int> ended_;
};

}  // namespace headsep::dist::detail
