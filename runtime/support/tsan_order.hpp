// Private: the orders oneTBB guarantees, stated to ThreadSanitizer.
//
// parallel_pipeline runs one invocation of a serial stage after the other, a batch's stages one
// after the other, and every stage before it returns (or rethrows). It does so with atomics
// inside libtbb, which ThreadSanitizer cannot see (Debian's libtbb is not instrumented), so a
// TSan build reports those orders as races. tsan_release/tsan_acquire state them and nothing
// more (no two invocations of a parallel stage are ordered); outside TSan builds they compile to
// nothing. Used by the engine's pipeline (engine/stages.cpp) and the model's (model/model_run.cpp).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define HEADSEP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HEADSEP_TSAN 1
#endif
#endif
#ifdef HEADSEP_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace headsep::tsan {

#ifdef HEADSEP_TSAN
inline void release(const void* p) { __tsan_release(const_cast<void*>(p)); }
inline void acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
#else
inline void release(const void*) {}
inline void acquire(const void*) {}
#endif

/// Releases `p` when a stage invocation ends, normally or by an exception; the caller of
/// parallel_pipeline acquires it once the pipeline is over.
struct ReleaseOnExit {
  const void* p;
  ~ReleaseOnExit() { release(p); }
};

}  // namespace headsep::tsan
