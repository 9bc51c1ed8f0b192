// `headsep scaling`: one job at several thread counts — wall time, speedup, parallel efficiency
// and the per-stage breakdown at each, and whether every count gave the same output bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headsep/profile.hpp"
#include "headsep/run.hpp"

namespace headsep::prof {

struct ScalingPoint {
  unsigned threads = 0;            ///< threads of the run (with `ranks`: of each rank)
  unsigned ranks = 0;              ///< 0: one process; K: K MPI ranks (`headsep scaling --ranks`)
  double wall_s = 0;               ///< this run's (with --repeat, the median run's)
  std::vector<double> walls_s;     ///< every run of this count, in run order (--repeat)
  std::uint64_t reports = 0, groups = 0;
  ProfileResult profile;
  std::string profile_json;
  std::string summary_json;       ///< the summary's JSON (compared byte for byte)
  std::uint64_t metrics_hash = 0;  ///< every metric bit, in batch order (--check all), else 0
  bool identical = true;          ///< same summary (and metrics hash) as the first count
  // --ceiling: `copies` (= threads) independent 1-thread runs of the job at once.
  unsigned copies = 0;                  ///< 0: not measured (count 1, or no --ceiling)
  double ceiling_wall_s = 0;            ///< the copies' wall time (with --repeat, the median)
  std::vector<double> ceiling_walls_s;  ///< every round's
  bool copies_identical = true;         ///< every copy gave the first run's output
};

/// "1,2,4" -> {1,2,4}; empty -> 1, 2, 4, ... up to `cores`, and `cores` itself. Throws UsageError
/// naming `option` (--counts, or --ranks for rank counts).
std::vector<unsigned> parse_thread_counts(const std::string& list, unsigned cores, const char* option = "--counts");

/// A sink that hashes every metric of every batch bit for bit (hashing in prepare(), on the
/// worker threads; combined in batch order in consume()), so two runs can be compared exactly
/// without writing their rows.
std::unique_ptr<ResultSink> make_metric_hash(std::uint64_t& out);

/// A run's profile back from its JSON (Profiler::json(), e.g. the `profile` section of a summary
/// written by another process). Throws Error when a field is missing or of the wrong type.
ProfileResult profile_from_json(const std::string& json);

/// The stage kinds any of the points used, in pipeline order ("input", "generate", ...).
std::vector<std::string> stage_kinds(const std::vector<ScalingPoint>& points);
/// A point's busy thread-seconds in the stages of one kind (0 when it has none).
double stage_busy(const ScalingPoint& point, const std::string& kind);

/// What a point's count counts: its ranks (rank sweeps) or its threads.
inline unsigned count_of(const ScalingPoint& p) noexcept { return p.ranks ? p.ranks : p.threads; }

/// The table; with --ceiling, also each count's ceiling (threads x the first count's wall / the
/// copies' wall — with the first count at 1 thread, the speedup fully independent work gets on
/// this machine; every speedup here is against the first count) and the engine's share of it.
std::string scaling_table(const std::vector<ScalingPoint>& points);
std::string scaling_json(const std::vector<ScalingPoint>& points, const std::string& job);

}  // namespace headsep::prof
