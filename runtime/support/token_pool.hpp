// Private: the objects a oneTBB parallel_pipeline hands between its stages.
//
// Stages pass raw pointers, not shared_ptr: oneTBB stores a token of class type in memory it
// allocates from header (template) code, so in a ThreadSanitizer build that write and the next
// stage's read on another thread look unordered (libtbb, which orders them, is not instrumented).
// A pointer token travels inside libtbb only. The pool owns every object, so batches still in
// flight are freed when a stage throws and parallel_pipeline unwinds; finished ones are reused.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

namespace headsep::detail {

template <class T>
class TokenPool {
 public:
  /// A finished object (as give() left it) or a new one. Called by the input stage.
  T* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>());
      return all_.back().get();
    }
    T* p = free_.back();
    free_.pop_back();
    return p;
  }
  /// Back for reuse; called by the output stage (or a stage that drops the object).
  void give(T* p) {
    std::lock_guard lock(mutex_);
    free_.push_back(p);
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace headsep::detail
