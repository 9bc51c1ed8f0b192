// headsep — where a run's time goes: per pipeline stage, per plugin, per worker thread.
//
//   Profiler prof({.trace = true});
//   RunOptions opt;  opt.profiler = &prof;
//   auto stats = run(source, weighting, axes, opt, sinks);
//   std::fputs(prof.table().c_str(), stderr);   // or prof.result(), prof.json(), prof.trace_json()
//
// run_model (model_run.hpp) takes one the same way: ModelRunOptions::profiler.
//
// The engine marks each stage of each batch on the thread that runs it (runtime/profile/): one
// monotonic and one thread-CPU clock read per stage transition, plus one read() of a hardware
// counter group when the kernel allows perf_event_open. Without a Profiler the engine reads no
// clock for profiling: every hook is one branch on a null pointer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace headsep {

struct ProfileOptions {
  bool counters = true;  ///< hardware counters (cycles, instructions, LLC misses) when allowed
  bool trace = false;    ///< keep per-(batch, stage, thread) events for trace_json()
  /// Trace size bound: every batch with index < trace_full_batches, then batches whose index is
  /// a multiple of a power-of-two stride, doubled whenever more than trace_sampled_batches
  /// would be kept past the full part (so at most full + sampled batches, evenly spread).
  std::size_t trace_full_batches = 1024;
  std::size_t trace_sampled_batches = 1024;
};

/// The parts of a model's forward pass that a profiled run times (ProfileResult::forward_parts).
enum class ForwardPart : std::uint8_t { embed, norm, products, rope, attention, activation, residual, count };
/// Their names in the profile ("products (weights)", "attention + head metrics", ...).
const char* to_string(ForwardPart p) noexcept;

/// Where a forward's thread time goes, part by part (ModelScratch::clock): to(p) charges the time
/// since the last lap to the part then running and starts p, so the parts tile the forward. Off
/// (the default) a lap is one branch; on, one clock read, a few per layer and group of ~512 tokens.
struct ForwardClock {
  ForwardClock() = default;
  explicit ForwardClock(bool timing) noexcept : on(timing) {}
  bool on = false;
  double seconds[std::size_t(ForwardPart::count)] = {};
  void to(ForwardPart p) noexcept {
    if (on) lap(int(p));
  }
  void stop() noexcept {
    if (on) lap(-1);
  }

 private:
  void lap(int next) noexcept;
  std::int64_t last_ = 0;
  int current_ = -1;
};

/// One pipeline stage (per scenario for weighting, per sink for prepare/consume).
struct StageProfile {
  std::string name;      ///< e.g. "weighting [balanced_heads]", "sink consume: CsvWriter"
  std::string kind;      ///< input, generate, axes, weighting, validate, kernels, attention, prepare, consume;
                         ///< model runs (run_model): input/generate, axes, forward, heads, consume (the merge)
  std::string plugin;    ///< the plugin (name and file) whose code runs here, else empty
  bool serial = false;   ///< one batch at a time (input, consume)
  double active_s = 0;   ///< wall time during which at least one thread was in this stage
  double busy_s = 0;     ///< wall time summed over threads
  double cpu_s = 0;      ///< thread CPU time summed over threads
  double share = 0;      ///< busy_s / busy time of all stages
  std::uint64_t batches = 0;
  std::uint64_t cycles = 0, instructions = 0, llc_misses = 0;  ///< when ProfileResult::counters
};

struct ThreadProfile {
  unsigned index = 0;    ///< 0 = the thread that called run()'s pipeline first, in order of first use
  double busy_s = 0;     ///< wall time inside a stage
  double cpu_s = 0;      ///< CPU time inside a stage
  double idle_s = 0;     ///< wall time of the run minus busy_s
  std::uint64_t invocations = 0;  ///< pipeline filter invocations (input, compute, output) it ran
};

struct ProfileResult {
  double wall_s = 0;
  unsigned threads = 0;  ///< threads the run allowed
  std::uint64_t batches = 0, reports = 0, groups = 0;
  double busy_s = 0, cpu_s = 0;  ///< summed over stages (= over threads)
  std::vector<StageProfile> stages;
  std::vector<ThreadProfile> thread_list;
  bool counters = false;
  std::string counters_note;  ///< what was counted, or why not (one line)
  std::vector<std::string> diagnosis;  ///< [0] the headline: what limits the run
  /// Model runs: the forward's thread seconds per part (ForwardPart order, summed over threads).
  std::vector<std::pair<std::string, double>> forward_parts;
  std::uint64_t trace_events = 0, trace_batches = 0, trace_stride = 1;
};

class Profiler {
 public:
  explicit Profiler(ProfileOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Valid after run() returned normally; a Profiler measures one run.
  const ProfileResult& result() const;
  /// The table printed after a run (stages, threads, counters, diagnosis).
  std::string table() const;
  /// The result as a JSON object (the summary's "profile" section).
  std::string json() const;
  /// Chrome trace-event JSON (chrome://tracing, Perfetto): one complete event per
  /// (batch, stage, thread), args {batch, reports}; needs ProfileOptions::trace.
  std::string trace_json() const;

  class Impl;  ///< engine side, runtime/profile/
  Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace headsep
