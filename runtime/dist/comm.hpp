// headsep — MPI point-to-point for the scale-out layer: whole messages of any size, waits that
// sleep instead of spinning, and a count of what each rank sends. Private to runtime/dist/.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist.hpp"

namespace headsep::dist::detail {

enum Tag : int {
  kResult = 1,  ///< worker -> rank 0: a finished chunk, or the worker's end mark (in order)
  kError = 2,   ///< worker -> rank 0: "rank R (host): cause"
  kBatch = 3,   ///< rank 0 -> worker: a chunk read by rank 0 (sequential sources), or the end mark
  kOffset = 4,  ///< rank 0 -> worker: where the worker writes a chunk's rows (HEADSEP_ROWS=offsets)
};

/// Bytes and messages this rank sent (payload, whole messages), per tag.
constexpr int kTags = kOffset + 1;
struct Counters {
  std::atomic<std::uint64_t> bytes[kTags]{}, messages[kTags]{};
};
Counters& counters();

/// A message being written: 8 bytes of length first, filled in by take().
class Out {
 public:
  Out() { buf_.resize(8); }
  void u64(std::uint64_t v) { append(&v, sizeof v); }
  template <class T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(v.size());
    append(v.data(), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    u64(s.size());
    append(s.data(), s.size());
  }
  void strs(const std::vector<std::string>& v) {
    u64(v.size());
    for (const auto& s : v) str(s);
  }
  std::string take();

 private:
  void append(const void* p, std::size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

/// Reads a message written by Out; anything out of bounds is an error naming the sender.
class In {
 public:
  In(const std::string& buf, int from);
  std::uint64_t u64();
  template <class T>
  void vec(std::vector<T>& v) {
    const std::uint64_t n = count(sizeof(T));
    v.resize(n);
    read(v.data(), n * sizeof(T));
  }
  std::string str();
  void strs(std::vector<std::string>& v);
  void done() const;

 private:
  std::uint64_t count(std::size_t elem);
  void read(void* p, std::size_t n);
  [[noreturn]] void corrupt(const char* what) const;
  const std::string& buf_;
  std::size_t pos_ = 8;
  int from_;
};

/// A send in progress (non-blocking); owns its bytes until it completes.
struct Pending {
  std::string bytes;
  std::vector<MPI_Request> requests;
};
std::unique_ptr<Pending> isend(int dest, int tag, std::string bytes);
bool test(Pending& p);
void wait(Pending& p);
/// Blocking send that sleeps while it waits (rank 0 receives in chunk order: backpressure).
void send(int dest, int tag, std::string bytes);
/// The next whole message from `source` with `tag`. watch_errors (rank 0): a kError message from
/// any rank that arrives meanwhile is thrown as RemoteError.
std::string recv(int source, int tag, bool watch_errors);
/// Sends still in flight when an error unwinds are parked here (MPI may still read them).
void park(std::unique_ptr<Pending> p);

}  // namespace headsep::dist::detail
