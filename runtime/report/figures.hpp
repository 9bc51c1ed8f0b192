// The report's figure builders, one family per file (named below), and what they share:
// figures.cpp puts them in reading order, page.cpp frames them in the HTML page.
// Private to runtime/report/. Everything drawn comes from ReportData: no metric is computed here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report/report.hpp"

namespace headsep::report {

/// Scenarios drawn in detail: the first Limits::scenarios (the header table lists them all).
std::size_t shown(const ReportData& d);

// ---- tokens.cpp

/// Tokens as text, one per raw token: byte-level BPE pieces (GPT-2's 'Ġ') and byte-fallback
/// "<0xNN>" runs decoded to their UTF-8 characters, SentencePiece's '▁' as a space, spaces and
/// controls shown as '␣', '↵', '⇥', bytes that form no character as ⟨NN⟩. Text pieces (WordPiece,
/// Korean, ...) are returned as they are.
std::vector<std::string> display_tokens(const std::vector<std::string>& raw);

// ---- seed_plot.cpp

/// The seed's plot of every scenario drawn, all on the same axes.
void add_seed_plots(const ReportData& d, std::vector<Figure>& out);

// ---- distributions.cpp

/// Histograms of head_separation and of every difference_from_single component, all scenarios
/// on one axis per figure.
void add_distributions(const ReportData& d, std::vector<Figure>& out);

// ---- quantile_strips.cpp

/// Per head quantile strips (p01–p99 line, p10–p90 box, p50 tick, mean dot) of one statistic
/// of scenario `si`; v[i] is head first_head + i.
Figure strips(const ReportData& d, std::size_t si, const std::string& stat, const std::vector<Stats>& v, double lo,
              double hi, std::uint32_t first_head = 0, const std::string& section = "attention");

// ---- js_heatmap.cpp

/// The head x head mean Jensen–Shannon divergence of scenario `si`.
Figure js_heatmap(const ReportData& d, std::size_t si);

// ---- layer_head_grids.cpp

/// Layer x head grid of an attention scheme's mean separation; `linked`: cells link to the maps
/// of the scenario's top report.
Figure layer_head_grid(const ReportData& d, std::size_t si, bool linked);
/// A model run's grid; a cell links to its head's map in the top report when that map is drawn.
Figure model_grid(const Grid& g, const std::set<std::string>& drawn);

// ---- attention_maps.cpp

/// The id of map `mi` (in top order) of scenario `si`, head h: what grid cells link to.
std::string map_anchor(std::size_t si, std::size_t mi, std::uint32_t h);
/// Query x key weights of head h (0 = the baseline) in map `mi` of scenario `si`.
Figure attention_map(const ReportData& d, std::size_t si, std::size_t mi, std::uint32_t h);
/// Attention schemes: per scenario drawn, how many of its maps (in top order) fit the cell budget.
std::vector<std::size_t> maps_that_fit(const ReportData& d);
/// Every map the page draws as (scenario, map in top order), in page order: for an attention
/// scheme each scenario's maps_that_fit, for a model run every (scenario, layer)'s top report
/// first, then further reports while Limits::map_cells lasts.
std::vector<std::pair<std::size_t, std::size_t>> drawn_maps(const ReportData& d);
/// Model runs: the maps drawn (drawn_maps), every head's.
std::vector<Figure> model_maps(const ReportData& d);

// ---- head_view.cpp

/// The interactive head view (bertviz's): the drawn maps once as a JSON blob, one inline script
/// and its <section>; "" when the page draws no map (then the page holds no script at all).
std::string head_view_section(const ReportData& d);

// ---- sweep_figure.cpp

/// head_separation against the swept parameter, per scenario.
Figure sweep_figure(const Sweep& sw);

// ---- scaling_figures.cpp

/// Speedup against the count, and busy thread-seconds per stage at each count.
Figure scaling_speedup(const Scaling& sc);
Figure scaling_stages(const Scaling& sc);
/// The header's note after the counts: "(headsep scaling)", or "ranks (headsep scaling --ranks)".
std::string sc_unit_note(const Scaling& sc);
/// What `r.threads` independent 1-thread copies got, as a speedup over runs[0] (0 if not measured).
double scaling_ceiling(const Scaling& sc, const ScalingRun& r);

}  // namespace headsep::report
