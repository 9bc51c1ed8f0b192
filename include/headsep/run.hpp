// headsep — the engine: a report source through a weighting scheme and the metric kernels,
// as a oneTBB pipeline with bounded memory and output that does not depend on the thread count.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/batch.hpp"
#include "headsep/kernels.hpp"
#include "headsep/source.hpp"

namespace headsep {

class Profiler;  // headsep/profile.hpp

enum class Precision : std::uint8_t { f64, f32 };

struct BatchResult;
class ChunkExchange;

struct RunOptions {
  std::size_t chunk_reports = 8192;   ///< reports per batch
  /// chunk_reports is a default, not the user's: a random-access source's batches shrink so their
  /// token data — features, axes, every slot's weights — stays within about kBatchCacheBytes
  /// (runtime/engine/run.cpp), at least 1024 reports; an attention scheme's, embeddings included,
  /// within kAttentionBatchBytes. Results do not depend on the chunk; only the speed does.
  bool chunk_fits_cache = false;
  SimdLevel simd = SimdLevel::scalar;
  Precision precision = Precision::f64;
  unsigned threads = 0;               ///< 0 = all cores
  /// Batches in flight at once (0 = 2 x threads). Peak memory ~ in_flight x chunk_reports x tokens.
  std::size_t in_flight = 0;
  bool progress = false;              ///< progress bar on stderr (callers check it is a terminal)
  /// Attention schemes: reports whose attention maps (and multi-head output) are kept for sinks
  /// (BatchResult::dumps), e.g. for --attention. Called on worker threads; null = none.
  std::function<bool(const ReportBatch& batch, std::size_t report)> keep_maps;
  /// Attention schemes: also keep the maps of each batch slot's top N reports by head_separation
  /// (larger first, ties to the smaller index: TopK's order), so a sink can keep the maps of the
  /// run's top N (report::Collector). 0 = none.
  std::size_t keep_top_maps = 0;
  /// Attention schemes: a report whose working memory (AttentionPlan::report_bytes) exceeds
  /// this is refused with a message instead of risking an out-of-memory kill.
  std::size_t max_report_bytes = std::size_t(2) << 30;
  /// Where the run's time goes (headsep/profile.hpp), filled when the run returns; null = off.
  Profiler* profiler = nullptr;
  /// Scale-out (runtime/dist/, MPI): this process shares the run with others. Null: alone.
  ChunkExchange* exchange = nullptr;
  /// Schemes with ABI 1.3's every-slot weighting (Weighting::all_slots): in f64 with more than
  /// one scenario, ask for every slot in one weights() call and run one kernel call over them, so
  /// features and axes are read once per batch. false asks slot by slot (`headsep run
  /// --slot-by-slot`: A/B measurements, tests). The results are the same bytes either way.
  bool all_slots_at_once = true;
  /// Set to true from any thread to stop the run: the input stage takes no further batch and
  /// run() throws Interrupted (error.hpp) once the batches in flight are done; sinks see no more
  /// batches. The Python module sets it on Ctrl-C (KeyboardInterrupt). Null: never stopped.
  const std::atomic<bool>* stop = nullptr;
};

/// Attention maps of the reports a run keeps (RunOptions::keep_maps), one scenario of a batch.
struct AttentionDump {
  std::uint32_t heads = 0, d_model = 0;  ///< d_model = output width (0: no output projection)
  std::vector<std::uint32_t> reports;       ///< batch-local report indices, ascending
  std::vector<std::uint32_t> queries;       ///< per kept report: the first query token (all: 0)
  std::vector<std::uint32_t> n_queries;     ///< per kept report: query rows (n, or 1)
  std::vector<std::uint64_t> maps_offset;   ///< per kept report: (heads+1) x nq x n floats, query-major
  std::vector<float> maps;
  std::vector<std::uint64_t> output_offset; ///< per kept report: nq x d_model floats
  std::vector<float> output;
};

/// One batch's results, in input order whatever the thread count.
struct BatchResult {
  std::uint64_t index = 0;                         ///< batch sequence number
  const ReportBatch* batch = nullptr;
  std::vector<const std::string*> scenario_names;  ///< per slot
  std::vector<MetricBlock> metrics;                ///< per slot
  std::vector<AttentionDump> dumps;                ///< per slot, when RunOptions::keep_maps is set
  /// A model run (run_model, headsep/model_run.hpp): the slots are layers — slot j holds layer
  /// layers[j] of scenario scenario_names[j] — and token_ids[t] the batch's vocabulary ids.
  /// Empty for the engine's runs.
  std::vector<std::uint32_t> layers;
  std::vector<std::uint32_t> token_ids;
  /// A model run over a text generator: per report 0, 1 (truncated) or 2 (empty text); else empty.
  std::vector<std::uint8_t> report_status;
  /// A model run's (run_model): the chunk's tokens 0 on every axis (ModelSummary's
  /// tokens_without_axis_value), counted where the chunk was computed.
  std::uint64_t tokens_without_axis_value = 0;
};

/// Per-batch scratch a sink fills in the parallel stage and reads back in the serial stage.
struct SinkPartial {
  virtual ~SinkPartial() = default;
};

/// Receives results. prepare() runs on worker threads, concurrently for different batches: put
/// order-independent work there (formatting rows, per-chunk sketches). consume() runs serially, in
/// batch order: merge and write there, so output is identical for any thread count.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const {
    (void)result, (void)partial;
  }
  virtual void consume(const BatchResult& result, SinkPartial* partial) = 0;
};

/// Scale-out hook (docs/DISTRIBUTED.md): set by the MPI layer in runtime/dist/. One process, the
/// merger, runs every chunk through its serial stages in chunk order; chunks computed by other
/// processes arrive there as finished results, so sinks see exactly what one process would give.
class ChunkExchange {
 public:
  virtual ~ChunkExchange() = default;
  /// True on the merging process; false on a process that computes a share and forwards it.
  virtual bool merges() const = 0;
  /// Random-access sources: global chunk index of this process's n-th batch (a share: rank + n * ranks).
  virtual std::uint64_t chunk_index(std::uint64_t n) const { return n; }
  enum class Take : std::uint8_t { local, remote, end };
  /// Merger, serial input stage, chunks in order. local: compute chunk `index` here (sequential
  /// sources: `batch` holds it, read by the exchange); remote: `batch` (the parts sinks read),
  /// `result.metrics`/`dumps` and `names` came from the process that computed it; end: no chunk.
  virtual Take take(std::uint64_t index, ReportSource& source, std::size_t chunk, ReportBatch& batch,
                    BatchResult& result, std::vector<std::string>& names) {
    (void)index, (void)source, (void)chunk, (void)batch, (void)result, (void)names;
    return Take::local;
  }
  /// After the last chunk, when run() succeeds (the merger collects every end mark; a share sends its own).
  virtual void finish() {}
};

/// What every output needs to know up front.
struct RunInfo {
  std::vector<std::string> axis_names;
  std::uint32_t heads = 0;
  bool attention = false;  ///< the weighting is an attention scheme: head and pair statistics exist
  /// A model run's layers (BatchResult::layers): rows per (report, scenario, layer) with the
  /// token count and ids. 0 for the engine's runs.
  std::uint32_t layers = 0;
  /// A decoder model run (model_run_info): per query head h = 1..H its key/value head, 0-based, at
  /// [h - 1] (the summary's kv_head_of). Rows then carry `kv_head` per head and `shared_kv` per
  /// pair (docs/MODEL.md). Empty for BERT and the engine's runs: their rows have no such field.
  std::vector<std::uint32_t> kv_head_of{};
};

struct RunStats {
  std::uint64_t batches = 0, reports = 0, groups = 0;  ///< groups = (report, scenario) pairs
  std::uint64_t source_rows = 0;                        ///< rows of the reports processed
  double seconds = 0;
  std::size_t batch = 0;  ///< reports per batch the engine ran: the chunk after its memory and cache bounds
};

/// Streams `source` through `weighting` and the kernels into every sink. Throws Error on bad
/// data: non-finite or negative weights and non-finite results name the report and scenario.
RunStats run(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& options,
             const std::vector<ResultSink*>& sinks);

/// Scenario names a run reports under: the scheme's own designs, else the data's.
std::vector<std::string> scenario_names_for(const Weighting& weighting, const Schema& schema);

}  // namespace headsep
