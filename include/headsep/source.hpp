// headsep — where reports come from (scenario generators) and how tokens are weighted.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/batch.hpp"

namespace headsep {

/// A stream of report batches. Implemented in the core (CSV) and by scenario-generator plugins.
class ReportSource {
 public:
  virtual ~ReportSource() = default;
  virtual const Schema& schema() const = 0;
  /// Names the source in profiles and messages (a plugin: its name and file); may be empty.
  virtual std::string label() const { return {}; }
  /// Fills `batch` (cleared first) with up to max_reports reports; fewer when the scenario list
  /// changes or the stream ends. Returns false when no report is left.
  virtual bool next(ReportBatch& batch, std::size_t max_reports) = 0;
  /// Input rows read so far, all reports included (the seed header's csv_rows); 0 if not row-based.
  virtual std::uint64_t rows_read() const { return 0; }
  /// Number of reports when known in advance (progress ETA), else 0.
  virtual std::uint64_t total_reports() const { return 0; }
  /// True when fill() may be called from several threads at once for distinct chunks
  /// (synthetic generators that derive every value from (seed, report index)).
  virtual bool random_access() const { return false; }
  /// Random-access sources only: fills chunk `index`, i.e. reports [index*chunk_reports, ...),
  /// with batch.first_report set accordingly. Returns false when the chunk is past the end.
  /// Thread-safe for distinct batches. The engine never mixes next() and fill() on one source.
  /// A random-access source's schema (scenario names included) is fixed once it is opened.
  virtual bool fill(std::uint64_t index, std::size_t chunk_reports, ReportBatch& batch) const {
    (void)index, (void)chunk_reports, (void)batch;
    return false;
  }
};

/// Fills the weights of the single-head baseline and every head. Implemented in the core (table)
/// and by weighting-scheme plugins. weights() may be called from several threads at once.
class Weighting {
 public:
  virtual ~Weighting() = default;
  virtual std::uint32_t heads() const = 0;
  /// Names the scheme in error messages (a plugin: its name and file); may be empty.
  virtual std::string label() const { return {}; }
  /// Scenarios this scheme defines itself (head designs), applied to every report.
  /// Empty: the scheme evaluates the scenarios the data names (ReportBatch::scenarios).
  virtual std::vector<std::string> own_scenarios() const { return {}; }
  /// Fills `out` (already sized heads+1 x n_tokens) for the batch under one scenario:
  /// `slot` indexes batch.scenarios (or own_scenarios() when the scheme has its own).
  /// Per-token schemes fill every token of every row. Per-query schemes (per_query()) fill, per
  /// report r of n tokens, an n x n block at out.query_offset[r] (set by the caller) of every row.
  virtual void weights(const ReportBatch& batch, std::uint32_t slot, WeightBlock& out) const = 0;

  /// Attention schemes: the QKV scheme the engine runs for scenario `slot` (projections,
  /// softmax, A·V and every metric in the runtime's kernels; weights() is then not called),
  /// else nullptr.
  virtual const AttentionPlan* attention(std::uint32_t slot) const {
    (void)slot;
    return nullptr;
  }
  /// Where an attention scheme's X comes from: the batch's embeddings, or the feature columns.
  virtual bool attention_reads_features() const { return false; }
  /// True when weights() gives explicit attention maps (WeightBlock::Layout::per_query).
  virtual bool per_query() const { return false; }
  /// True when the baseline row is the same for every slot (per-token schemes only): the engine
  /// then asks for it in slot 0 only (WeightBlock::keep_baseline) and reuses its contexts.
  virtual bool shared_baseline() const { return false; }
  /// True when weights() also fills every slot in one call (slot == kAllSlots, `out` sized by
  /// WeightBlock::resize with slots > 1; per-token schemes only): the engine then asks once per
  /// batch instead of once per slot (f64; it may still ask slot by slot).
  virtual bool all_slots() const { return false; }
  static constexpr std::uint32_t kAllSlots = 0xFFFFFFFFu;
};

struct CsvSourceOptions {
  std::string path;                    ///< "-" = standard input
  std::string_view bytes;              ///< when set, read these bytes instead; `path` names them in messages
  std::vector<std::string> features;   ///< numeric columns to read (those the axes use)
  std::vector<std::string> reports;    ///< report ids to keep; empty = all
  bool weights = true;                 ///< read single_weight / headK_weight columns
  /// `bytes` = a file's header + a slice of its rows (runtime/dist/ byte ranges): the line number
  /// of the slice's first byte in that file, so messages name the file's lines. 0 = not a slice.
  std::uint64_t first_line = 0;
};

/// The seed-schema CSV reader: report_id, scenario, token, feature columns, single_weight,
/// head1_weight..headN_weight, in any column order. Streams: rows of one report must be
/// contiguous; memory holds one batch.
std::unique_ptr<ReportSource> open_csv_source(const CsvSourceOptions& options);

/// Weights read from the data (single_weight, headK_weight columns).
std::unique_ptr<Weighting> make_table_weighting(std::uint32_t heads);

}  // namespace headsep
