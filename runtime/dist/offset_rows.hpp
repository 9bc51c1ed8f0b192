// headsep — per-report rows written at offsets (--mpi-rows offsets, docs/DISTRIBUTED.md): the
// worker's side. Rank 0's side is offset_rows_sink() (dist.hpp). Private to runtime/dist/.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "headsep/output.hpp"

namespace headsep::dist::detail {

/// set_offset_rows() was called on this rank (offset writes on).
bool offset_rows_on();

/// A worker's rows under --mpi-rows offsets: formatted by the real writer into memory, sent as a
/// length, written at the offset rank 0 replies with (in chunk order), straight into rank 0's file.
class OffsetRows {
 public:
  OffsetRows();
  ~OffsetRows();
  ResultWriter& writer() { return *writer_; }
  /// Serial, chunk order: the rows just formatted (into captured_) wait for their offset.
  std::uint64_t take_rows();
  /// Writes the chunks whose offsets arrived; `all`: waits until none is left.
  void pump(bool all);

 private:
  std::string captured_;
  OutputFile file_;
  std::unique_ptr<ResultWriter> writer_;
  std::deque<std::string> waiting_;
  int fd_ = -1;
};

}  // namespace headsep::dist::detail
