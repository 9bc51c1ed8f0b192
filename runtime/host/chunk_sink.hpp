// Private: the host side of headsep_chunk_out, through which a scenario plugin writes one chunk
// (chunk_sink.cpp: each callback checks its arguments), and the slots that catch a plugin calling
// through an `out` it kept after next_chunk returned.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "headsep/batch.hpp"
#include "headsep/plugin.h"

namespace headsep::host {

struct ChunkSink;

// What token_offsets() fills its array with before the plugin writes it (no real offset is this).
inline constexpr std::uint64_t kUnwrittenOffset = ~std::uint64_t(0);

// A non-NULL buffer for a request of 0 values (NULL means "refused"); nothing may be written to it.
template <class T>
T* no_values() {
  alignas(64) static T none[1];
  return none;
}

// Calls through a headsep_chunk_out after the next_chunk call that received it returned (a plugin
// that kept the pointer): refused, and the first one recorded so the run fails naming the plugin.
struct LateCalls {
  std::atomic<bool> any{false};
  std::mutex mutex;
  std::string what;

  void record(std::uint64_t chunk, const char* callback);
  std::string message();
};

// What the plugin's `out` points to. Slots are owned by the source for its whole life and reused
// in FIFO order (never while in use), so a kept pointer reaches a slot that refuses the call
// instead of dead stack memory. `sink` is the state of the call in progress, null between calls.
struct ChunkSlot {
  headsep_chunk_out c{};  // first member: callbacks cast the pointer back
  std::atomic<ChunkSink*> sink{nullptr};
  std::atomic<std::uint64_t> chunk{0};
  LateCalls* late = nullptr;
};
static_assert(std::is_standard_layout_v<ChunkSlot>, "headsep_chunk_out* must convert back to ChunkSlot*");

class SlotPool {
 public:
  explicit SlotPool(LateCalls& late) : late_(&late) {}
  ChunkSlot* take(std::uint64_t chunk);
  void give(ChunkSlot* s);

 private:
  // A released slot waits for this many others before it is reused, so a pointer kept from one
  // call and used in the next ones lands on an idle slot (and is caught), not on a live one.
  static constexpr std::size_t kRotation = 8;
  LateCalls* late_;
  std::mutex mutex_;
  std::deque<std::unique_ptr<ChunkSlot>> all_;
  std::deque<ChunkSlot*> free_;
};

// The host side of headsep_chunk_out: callbacks write straight into a ReportBatch. The first
// problem a callback finds goes to `error`; check_chunk (chunk_check.hpp) checks the whole chunk.
struct ChunkSink {
  headsep_chunk_out c;  // the callbacks; copied into the ChunkSlot the plugin sees
  ReportBatch* b = nullptr;
  std::uint64_t max_reports = 0, n_reports = 0;
  std::uint32_t n_features = 0, given_heads = 0;
  bool offsets_set = false, embeddings_set = false;
  std::uint32_t d_model = 0;
  std::vector<char> feature_set;
  std::vector<std::string> scenarios;
  std::string error;
  bool dead = false;  // the sink late calls get: refuses everything

  ChunkSink(ReportBatch& batch, std::uint64_t max, std::uint32_t features, std::uint32_t heads);

 private:
  // The state of the call `o` belongs to; for a late call, a sink that refuses everything (and
  // the call is recorded). Every callback goes through here.
  static ChunkSink* self(headsep_chunk_out* o, const char* callback = "a headsep_chunk_out callback");
  static std::uint64_t* token_offsets(headsep_chunk_out* o, std::uint64_t n);
  static double* feature(headsep_chunk_out* o, std::uint32_t f, std::uint64_t n);
  static std::int32_t scenario(headsep_chunk_out* o, const char* name, std::uint64_t len);
  static double* given_weights(headsep_chunk_out* o, std::uint32_t slot, std::uint32_t row, std::uint64_t n);
  static std::int32_t report_id(headsep_chunk_out* o, const char* id, std::uint64_t len);
  static float* embeddings(headsep_chunk_out* o, std::uint64_t n);
  static std::int32_t token_name(headsep_chunk_out* o, const char* name, std::uint64_t len);

  static std::string too_many_tokens(const char* fn, std::uint64_t n);
  template <class T>
  T* fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return nullptr;
  }
  std::int32_t fail_code(std::string why);
};

}  // namespace headsep::host
