// headsep — rank 0's exchange (merger.hpp): who computes which chunk, and how rank 0 puts every
// chunk back in order. make_merger() picks it, or range_merger.cpp's for a CSV split into ranges.
#include "dist/merger.hpp"

#include <cstring>

#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"
#include "dist/messages.hpp"

namespace headsep::dist {
namespace detail {

Merger::~Merger() {
  // Unwinding from an error: sends still in flight keep their bytes (MPI may read them until
  // the job is stopped).
  for (auto& p : pending_)
    if (!test(*p)) park(std::move(p));
  for (auto& p : pending_replies_)
    if (!test(*p)) park(std::move(p));
}

ChunkExchange::Take Merger::take(std::uint64_t index, ReportSource& source, std::size_t chunk, ReportBatch& batch,
                                 BatchResult& result, std::vector<std::string>& names) {
  const int owner = static_cast<int>(index % std::uint64_t(ranks_));
  taking_ = index;
  if (source.random_access()) {
    if (owner == 0) return Take::local;
    if (!receive(owner, batch, result, names)) return Take::end;
    if (batch.first_report != index * chunk)
      throw Error("rank " + std::to_string(owner) + " computed chunk " + std::to_string(index) +
                  " with another chunk size (first report " + std::to_string(batch.first_report) + ", expected " +
                  std::to_string(index * chunk) + "): all ranks must run the same command");
    return Take::remote;
  }
  // Sequential: read ahead so every worker has chunks queued while rank 0 waits for one.
  const std::uint64_t window = 2 * std::uint64_t(ranks_);
  while (!eof_ && read_ < index + window) {
    ReportBatch b;
    if (!source.next(b, chunk)) {
      eof_ = true;
      for (int r = 1; r < ranks_; ++r) pending_.push_back(isend(r, kBatch, end_mark()));
      break;
    }
    const int o = static_cast<int>(read_ % std::uint64_t(ranks_));
    if (o == 0) {
      local_.push_back(std::move(b));
    } else {
      std::vector<std::string> n;
      const auto& all = source.schema().scenario_names;
      for (std::uint32_t s : b.scenarios) {
        if (s >= all.size()) throw Error("scenario generator returned scenario index " + std::to_string(s) + " beyond its schema");
        n.push_back(all[s]);
      }
      pending_.push_back(isend(o, kBatch, encode_batch(read_, b, n)));
    }
    ++read_;
    reap();
  }
  if (index >= read_) return Take::end;
  if (owner == 0) {
    batch = std::move(local_.front());
    local_.pop_front();
    return Take::local;
  }
  if (!receive(owner, batch, result, names))
    throw Error("rank " + std::to_string(owner) + " ended before chunk " + std::to_string(index));
  return Take::remote;
}

void Merger::finish() {
  // Every worker's end mark (a result here would be a chunk nobody asked for).
  for (int r = 1; r < ranks_; ++r) {
    if (ended_.count(r)) continue;
    ReportBatch b;
    BatchResult res;
    std::vector<std::string> n;
    std::uint64_t index = 0;
    const std::string msg = recv(r, kResult, true);
    if (decode_result(msg, r, index, b, res, n))
      throw Error("rank " + std::to_string(r) + " sent chunk " + std::to_string(index) + " after the end of the input");
  }
  for (auto& p : pending_) wait(*p);
  pending_.clear();
  for (auto& p : pending_replies_) wait(*p);
  pending_replies_.clear();
}

bool Merger::receive(int owner, ReportBatch& batch, BatchResult& result, std::vector<std::string>& names) {
  std::uint64_t got = 0;
  std::string msg = recv(owner, kResult, true);
  std::uint64_t rows_bytes = 0;
  bool offset = false;
  if (msg.size() >= 16 && std::memcmp(msg.data() + 8, &kOffsetData, 8) == 0) {  // rows written by the worker
    In in(msg, owner);
    (void)in.u64();
    rows_bytes = in.u64();
    std::string inner = in.str();
    in.done();
    msg.swap(inner);
    offset = true;
  }
  if (offset) {
    std::lock_guard<std::mutex> lock(mu_);
    remote_rows_[taking_] = {owner, rows_bytes};
  }
  if (!decode_result(msg, owner, got, batch, result, names)) {
    ended_.insert(owner);
    return false;
  }
  (void)got;  // a sequential worker numbers its chunks itself; random access is checked by first_report
  return true;
}

void Merger::reap() {
  while (!pending_.empty() && test(*pending_.front())) pending_.pop_front();
}

bool Merger::remote_rows(std::uint64_t index, int& owner, std::uint64_t& bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = remote_rows_.find(index);
  if (it == remote_rows_.end()) return false;
  owner = it->second.first, bytes = it->second.second;
  return true;
}

void Merger::forget_rows(std::uint64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  remote_rows_.erase(index);
}

void Merger::reply(int owner, std::string bytes) {
  pending_replies_.push_back(isend(owner, kOffset, std::move(bytes)));
  while (!pending_replies_.empty() && test(*pending_replies_.front())) pending_replies_.pop_front();
}

}  // namespace detail

std::unique_ptr<ChunkExchange> make_merger(const ReportSource& source, bool full) {
  if (auto* csv = dynamic_cast<const detail::RangedCsv*>(&source))
    return detail::make_range_merger(const_cast<detail::RangedCsv&>(*csv));
  return std::make_unique<detail::Merger>(full);
}

}  // namespace headsep::dist
