// The engine's side of the profiler: stage ids and the per-thread stage clock (StageTimer).
// A filter invocation of the pipeline builds a StageTimer; to(stage) ends the current stage and
// starts the next with one clock read, so a batch's stages tile its invocation without gaps or
// overlaps (their times add up to the thread's busy time). With a null Profiler every call is a
// branch and nothing else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/profile.hpp"

namespace headsep {

class ResultSink;
struct RunStats;

namespace prof {

// Stage ids: fixed stages, then one per sink (prepare, consume), then weighting per scenario
// key (the schema's scenario index, or the scheme's own slot); keys past kMaxScenarios share
// one "other scenarios" stage, sinks past kMaxSinks the last sink's. Model runs (run_model) use
// input/generate, kAxes (token ids + axes), kForward, kHeads and consume(0) (the merge).
enum : int { kInput = 0, kGenerate, kAxes, kValidate, kKernels, kForward, kHeads, kFixed };
constexpr int kMaxSinks = 8;
constexpr int kMaxScenarios = 64;
constexpr int kPrepare0 = kFixed;
constexpr int kConsume0 = kPrepare0 + kMaxSinks;
constexpr int kWeighting0 = kConsume0 + kMaxSinks;
constexpr int kWeightingAll = kWeighting0 + kMaxScenarios + 1;  ///< one weights() call for every slot (ABI 1.3)
constexpr int kStages = kWeightingAll + 1;

inline int prepare(std::size_t sink) { return kPrepare0 + int(sink < kMaxSinks ? sink : kMaxSinks - 1); }
inline int consume(std::size_t sink) { return kConsume0 + int(sink < kMaxSinks ? sink : kMaxSinks - 1); }
inline int weighting(std::uint64_t key) { return kWeighting0 + int(key < kMaxScenarios ? key : kMaxScenarios); }

struct ThreadRec;

/// A sink's name in the table: its class without namespaces ("Summary", "CsvWriter").
std::string sink_name(const ResultSink& sink);

/// What run() tells the profiler before the pipeline starts.
struct RunSetup {
  unsigned threads = 0;
  bool random_access = false, attention = false;
  std::string source_label, weighting_label;
  std::vector<std::string> sink_names;
};

}  // namespace prof

class Profiler::Impl {
 public:
  explicit Impl(ProfileOptions o);
  ~Impl();
  /// model: run_model's model name (the model's stages are named for it); empty: the engine.
  void begin_run(const prof::RunSetup& setup, const std::string& model = {});
  /// scenario_names: index = weighting stage key.
  void end_run(const RunStats& stats, const std::vector<std::string>& scenario_names);

  prof::ThreadRec* enter(std::uint64_t batch);  ///< this thread's record, invocation started
  void lap(prof::ThreadRec& t, int next);        ///< end the current stage (if any), start `next` (-1: none)
  void leave(prof::ThreadRec& t);                ///< end the current stage and the invocation
  void drop(prof::ThreadRec& t);                 ///< forget the invocation (it had no batch)
  void add_parts(prof::ThreadRec& t, const ForwardClock& clock);  ///< a model forward's parts

  ProfileOptions opt;
  ProfileResult result;
  struct State;
  State* s;
};

namespace prof {

struct ThreadRec {
  std::uint64_t batch = 0, reports = 0;
};

class StageTimer {
 public:
  StageTimer(Profiler* p, std::uint64_t batch) : impl_(p ? &p->impl() : nullptr), t_(impl_ ? impl_->enter(batch) : nullptr) {}
  ~StageTimer() {
    if (t_) impl_->leave(*t_);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  void to(int stage) {
    if (t_) impl_->lap(*t_, stage);
  }
  void batch(std::uint64_t index) {
    if (t_) t_->batch = index;
  }
  void reports(std::uint64_t n) {
    if (t_) t_->reports = n;
  }
  void stop() {
    if (t_) impl_->leave(*t_), t_ = nullptr;
  }
  bool on() const noexcept { return t_ != nullptr; }
  /// A model forward's parts (ModelScratch::clock's seconds), added to this thread's.
  void forward_parts(const ForwardClock& clock) {
    if (t_) impl_->add_parts(*t_, clock);
  }
  /// The invocation found no batch (end of input): it is not counted.
  void drop() {
    if (t_) impl_->drop(*t_), t_ = nullptr;
  }

 private:
  Profiler::Impl* impl_;
  ThreadRec* t_;
};

}  // namespace prof
}  // namespace headsep
