// headsep — reports people look at: the seed's plot, distributions, attention views and sweeps,
// as hand-written SVG inside one offline HTML file (docs/REPORTS.md).
//
// The module is fed by aggregates only: the Summary's moments, quantile sketches and histograms,
// plus what Collector keeps while a run streams (context means, the top-k reports' contexts, the
// attention maps of a few kept reports). It never recomputes a metric; memory and output size are
// bounded whatever the number of reports.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/run.hpp"
#include "headsep/stats.hpp"

namespace headsep {
class Summary;
struct ModelSummary;
}

namespace headsep::report {

/// Limits that keep a report's size independent of the run's size (docs/REPORTS.md).
struct Limits {
  std::size_t plot_reports = 5;      ///< top reports drawn per scenario in the seed plot
  std::size_t scenarios = 24;        ///< scenarios drawn in detail (the header table lists them all)
  /// Reports whose attention maps are kept and drawn, per scenario: the top map_reports by
  /// head_separation, the order of the Summary's top-k (the CLI sets it to --top).
  std::size_t map_reports = 10;
  std::size_t map_tokens = 32;       ///< queries / keys drawn per map (longer reports are cut, and say so)
  std::size_t map_cells = 60000;     ///< attention-map cells in the whole report
  /// A model run draws (layers x (heads + 1)) maps per report: its maps keep fewer tokens and
  /// fewer cells, so that a page with a value on every cell stays near 1.5 MB (docs/REPORTS.md).
  static constexpr std::size_t model_map_tokens = 12, model_map_cells = 12000;
  /// false: the page leaves the static SVG maps out and keeps them only in the head view's data
  /// (2 bytes a weight instead of ~90 with a cell's shape and title): a notebook's display, which
  /// a srcdoc iframe carries escaped, stays under 1 MB (docs/REPORTS.md, docs/PYTHON.md).
  bool static_maps = true;
};

/// count, mean, std, min, max and quantiles of one metric of one scenario.
struct Stats {
  std::uint64_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0, p01 = 0, p10 = 0, p50 = 0, p90 = 0, p99 = 0;
  bool exact = true;
};

/// One metric of one scenario: its statistics and a histogram on the axis all scenarios share.
struct Distribution {
  Stats stats;
  std::vector<HistogramBin> bins;
};

/// A report drawn in the seed plot: its contexts ([(h * axes + c)], h = 0 the baseline).
struct PlotReport {
  std::string id;
  std::uint64_t index = 0;
  double separation = 0;
  std::vector<double> context;
  std::vector<std::string> tokens;  ///< the report's first tokens (named data only; at most 16)
};

/// A kept report's attention maps, cut to Limits::map_tokens queries and keys.
struct AttentionMap {
  std::string id;
  std::uint64_t index = 0;
  double separation = 0;
  std::vector<std::string> tokens;  ///< key tokens drawn (the report's first `keys`)
  std::uint32_t n = 0;              ///< the report's length
  std::uint32_t first_query = 0, queries = 0, all_queries = 0;  ///< query rows drawn / in the dump
  std::uint32_t keys = 0;           ///< key columns drawn
  std::vector<float> maps;          ///< [(h * queries + q) * keys + k], h = 0..heads
};

struct Scenario {
  std::string name;
  std::uint64_t count = 0;
  std::vector<double> context_mean;            ///< [(h * axes + c)]
  std::vector<PlotReport> top;                 ///< by head_separation, descending
  Distribution separation;                     ///< head_separation
  std::vector<Distribution> differences;       ///< [(h - 1) * axes + c]
  // Attention schemes only.
  std::vector<Stats> entropy, confidence;      ///< per head 0..N
  std::vector<double> js_mean;                 ///< per pair (1,2), (1,3), ...
  std::vector<double> pair_separation_mean;    ///< per pair: mean ‖context_i − context_j‖
  std::vector<AttentionMap> maps;
  // Model runs only (one Scenario per model scenario and layer): per head 1..H the distribution
  // over reports of its separation (mean distance to the layer's other heads).
  std::vector<Stats> head_separation;
  /// Model runs: the model scenario this layer belongs to and the layer (the head view groups a
  /// report's layers by them); "" and 0 for every other run.
  std::string model_scenario;
  std::uint32_t layer = 0;
};

/// A report's maps picked by the user (--attention-reports with a report): every query and key of
/// every layer kept, for the head view (docs/REPORTS.md, "The head view").
struct ChosenMap {
  std::string scenario;    ///< the run's scenario (a model run's: the model scenario)
  std::uint32_t layer = 0; ///< a model run's layer; 0 otherwise
  AttentionMap map;        ///< queries = all_queries, keys = n
};

/// A parameter sweep: per value, per scenario, statistics of head_separation.
struct Sweep {
  std::string parameter;                        ///< as given, e.g. "axis-focus.single_sharpness"
  std::vector<std::string> values;              ///< as passed to the plugin
  std::vector<std::optional<double>> numeric;   ///< the value as a number when every value is one
  std::vector<std::string> scenarios;           ///< union, in order of first appearance
  std::vector<std::vector<std::optional<Stats>>> stats;  ///< [value][scenario]
  std::vector<double> seconds;                  ///< engine time per value
};

/// headsep scaling: one job at several thread counts (docs/REPORTS.md).
struct ScalingRun {
  unsigned threads = 0;
  double wall_s = 0;                 ///< the median run's (the only run's without --repeat)
  double min_s = 0, max_s = 0;       ///< fastest and slowest run of this count
  /// --ceiling: wall time of `threads` independent 1-thread copies run at once (they do `threads`
  /// times the work: their speedup over runs[0] is threads x runs[0].wall_s / copies_wall_s).
  std::optional<double> copies_wall_s;
  std::vector<double> busy;          ///< busy thread-seconds per stage kind, as Scaling::kinds
};
struct Scaling {
  std::vector<std::string> kinds;    ///< stage kinds, pipeline order (input, generate, ...)
  std::vector<ScalingRun> runs;      ///< in --counts order; speedups are against runs[0]
  bool identical = true;             ///< every count gave the same output
  std::string unit = "threads";      ///< what a count counts: "threads", or "ranks" (MPI processes)
};

/// What was run, so a report can be reproduced.
struct Header {
  std::string command_line, version, scenario_plugin, weighting_plugin;
  std::vector<std::string> params;
  std::uint64_t reports = 0, groups = 0;
  std::string reports_text;  ///< replaces the reports row's text when set (a sweep: per value)
  unsigned threads = 0;
  std::string simd, precision;
  double seconds = 0;
};

/// A layer x head matrix of per-head means (model runs): values[l * heads + (h - 1)].
struct Grid {
  std::string id, title, subtitle;
  std::uint32_t layers = 0, heads = 0;
  std::vector<double> values;
  /// The ReportData::scenarios index of layer 0 of this grid's model scenario (layer l is
  /// maps_of + l): a cell links to its head's map in that layer's top report, when drawn.
  std::size_t maps_of = 0;
};

struct ReportData {
  Header header;
  std::vector<std::string> axes;
  std::uint32_t heads = 0;
  /// Heads are (layer, head) pairs, layer-major: head h (1-based) is layer (h-1)/heads_per_layer.
  /// A run without layers (every current scheme) is one layer of `heads`.
  std::uint32_t layers = 1;
  bool attention = false;
  std::size_t histogram_bins = 20;
  std::vector<Scenario> scenarios;
  std::optional<Sweep> sweep;
  std::optional<Scaling> scaling;
  Limits limits;
  /// Model runs (--model): no per-scenario distributions of head_separation; per layer the
  /// entropy and separation of each head (Scenario::entropy, head_separation), the layer x head
  /// grids and the top reports' maps.
  bool distributions = true;
  std::vector<Grid> grids;
  /// The reports --attention-reports picks, whole, in run order (ChosenMaps): the head view shows
  /// them first, then the drawn maps of the top reports.
  std::vector<ChosenMap> chosen;
};

/// The sink that keeps, while a run streams, what the report needs beyond the Summary: context
/// means, pairwise-separation means, the top-k reports' contexts and the attention maps of the
/// top Limits::map_reports reports (the engine keeps each batch's top: RunOptions::keep_top_maps;
/// a map is dropped when its report leaves the top, so at most map_reports maps stay per scenario).
/// Deterministic like the Summary: per-batch selections on worker threads, merged in batch order
/// with a total order on (value, report index).
class Collector final : public ResultSink {
 public:
  explicit Collector(RunInfo info, Limits limits = {});
  void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const override;
  void consume(const BatchResult& result, SinkPartial* partial) override;

  struct Kept {
    std::string name;
    std::uint64_t count = 0;
    std::vector<Moments> context, pairwise;
    TopK top;
    std::map<std::uint64_t, PlotReport> reports;  ///< payloads of (a superset of) the top
    TopK map_top;                                  ///< the top map_reports (the Summary's order)
    std::map<std::uint64_t, AttentionMap> maps;    ///< maps of the reports in map_top
  };
  const std::vector<Kept>& scenarios() const noexcept { return scenarios_; }
  const RunInfo& info() const noexcept { return info_; }
  const Limits& limits() const noexcept { return limits_; }

 private:
  Kept& scenario(const std::string& name);
  RunInfo info_;
  Limits limits_;
  std::vector<Kept> scenarios_;
  std::map<std::string, std::size_t> index_;
};

/// The sink that keeps the whole maps (every query, every key, every layer the run dumps) of the
/// reports `pick` chooses, from BatchResult::dumps (RunOptions::keep_maps, or a model run's
/// ModelRunOptions::dump_reports): the head view's reports of the user's choice. Memory and page
/// weight grow with what is picked: 2 bytes a weight in the page, (heads + 1) x n^2 per layer.
class ChosenMaps final : public ResultSink {
 public:
  explicit ChosenMaps(std::function<bool(const ReportBatch&, std::size_t)> pick) : pick_(std::move(pick)) {}
  void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const override;
  void consume(const BatchResult& result, SinkPartial* partial) override;
  /// What was kept, in batch order, then report, then layer.
  std::vector<ChosenMap> take() { return std::move(kept_); }

 private:
  std::function<bool(const ReportBatch&, std::size_t)> pick_;
  std::vector<ChosenMap> kept_;
};

/// Builds the report's data from a run's Summary and Collector (same run, same scenarios).
ReportData build(const Summary& summary, const Collector& collector, Header header);
/// The report of a model run (--model): per scenario and layer the seed's plot of the mean
/// contexts (the layer's baseline and heads), each head's entropy and separation over reports
/// (quantiles), the top reports' maps, and layer x head grids of mean separation, entropy
/// and Jensen–Shannon divergence, from the ModelSummary's sums, sketches and kept maps.
ReportData build(const ModelSummary& summary, Header header);

/// One figure: an <svg> element (no XML prolog), the section it belongs to and its id.
struct Figure {
  std::string id, section, title, svg;
  std::string group;  ///< maps: one row per (scenario, report), this row's heading ("" = none)
};

/// Every figure of the report, in reading order.
std::vector<Figure> figures(const ReportData& data);
/// The whole HTML document (figures inline, no external resource; pages with maps hold the head
/// view's one inline script and read the same without it).
std::string html(const ReportData& data, const std::vector<Figure>& figs);
/// A figure as a standalone SVG file (XML prolog, namespace).
std::string standalone_svg(const Figure& fig);
/// Writes --report-html PATH (if not empty) and --plot-svg DIR/<id>.svg (if not empty), each file
/// through OutputFile (temporary + rename). DIR is created when missing.
void write(const ReportData& data, const std::string& html_path, const std::string& svg_dir);

// ---- sweeps (headsep sweep) ----

/// `KEY=LO:HI:N` (N evenly spaced values from LO to HI inclusive; integers stay integers) or
/// `KEY=V1,V2,...` (';' separates instead when a value holds a comma). KEY is a -p key.
/// @throws UsageError on anything else.
struct SweepSpec {
  std::string key;
  std::vector<std::string> values;
};
SweepSpec parse_sweep(const std::string& spec);
/// Starts a sweep's data (numeric values recognised).
Sweep make_sweep(const SweepSpec& spec);
/// Adds the run of value `i` (its Summary's head_separation per scenario).
void add_sweep_run(Sweep& sweep, std::size_t i, const Summary& summary, double seconds);
/// The sweep as JSON (stable key order) and as a table for the terminal.
std::string sweep_json(const Sweep& sweep);
std::string sweep_table(const Sweep& sweep);

// ---- building blocks, public for the unit tests ----

/// Text for HTML/XML content and attribute values: & < > " ' escaped; invalid UTF-8 and control
/// characters (other than tab and newline) become U+FFFD, so any input stays well-formed.
std::string escape(std::string_view s);
/// Numbers for people: 3 significant digits, no trailing zeros, exponent outside [1e-3, 1e6).
std::string number(double v, int significant = 3);
/// Counts with thousands separators: 100000 -> "100,000".
std::string count(std::uint64_t n);

/// A linear map from a data interval to a pixel interval.
struct Scale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double v) const { return d1 == d0 ? (r0 + r1) / 2 : r0 + (v - d0) * (r1 - r0) / (d1 - d0); }
};
/// "Nice" ticks (1, 2 or 5 x 10^k apart, about `target` of them) covering [lo, hi]; the returned
/// domain is [first tick, last tick]. A zero-width interval is widened around its value.
struct Ticks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
  std::string label(double v) const;  ///< v with as many decimals as the step needs
};
Ticks nice_ticks(double lo, double hi, int target = 5);

/// Marker of head h (0 = the single-head baseline): colour (Okabe–Ito, colour-blind safe) and
/// shape; head 1 is the seed's blue triangle, head 2 its orange square.
struct Marker {
  const char* colour;
  const char* shape;  ///< circle, triangle, square, diamond, triangle-down, plus, star, cross, hexagon
};
Marker marker(std::uint32_t h);

}  // namespace headsep::report
