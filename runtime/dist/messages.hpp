// headsep — what travels between ranks (docs/DISTRIBUTED.md): a chunk's finished results
// (worker -> rank 0) and a chunk rank 0 read (rank 0 -> worker), encoded with comm.hpp's Out/In.
// Private to runtime/dist/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dist/comm.hpp"
#include "headsep/run.hpp"

namespace headsep::dist::detail {

/// A message's first word: what follows.
constexpr std::uint64_t kData = 1;        ///< a chunk (results, or a batch read by rank 0)
constexpr std::uint64_t kEnd = 2;         ///< the sender's end mark
constexpr std::uint64_t kBlockData = 3;   ///< --mpi-csv ranges: a chunk's results with its block
constexpr std::uint64_t kOffsetData = 4;  ///< --mpi-rows offsets: a chunk's results with its rows' length

/// A chunk's results. `full`: everything per-report outputs read; else the summary's rows only.
std::string encode_result(const BatchResult& res, bool full);
std::string end_mark();
/// Decodes encode_result()'s message from rank `from` into (index, b, res, names); returns
/// false for an end mark. Anything inconsistent is an error naming the sender.
bool decode_result(const std::string& msg, int from, std::uint64_t& index, ReportBatch& b, BatchResult& res,
                   std::vector<std::string>& names);
/// A chunk rank 0 read (sequential sources), its scenarios by name.
std::string encode_batch(std::uint64_t index, const ReportBatch& b, const std::vector<std::string>& scenario_names);
/// --mpi-csv ranges, worker: a chunk's results with its block in front.
std::string wrap_block(std::uint64_t block, std::string inner);

}  // namespace headsep::dist::detail
