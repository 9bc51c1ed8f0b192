// The HTML page around the figures: the run's header table, one section per part of the report
// (summary tables, seed's plots, distributions, attention, a model's layers, sweep, scaling) and
// a footer. One offline file: figures inline, no external resource; the only script is the head
// view's (head_view.cpp, pages with maps), and the page reads the same without it.
#include <algorithm>
#include <utility>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

// The body's font is font_stack() (page_head), which the inline figures inherit.
constexpr const char* kCss = R"(body{margin:24px;color:#222;max-width:1600px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px;word-break:break-all}
.figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}svg.fig{border:1px solid #eee;flex:none;max-width:none}p.note{color:#555;font-size:13px;max-width:900px}
p.warn{color:#a00;font-size:13px}nav#toc{font-size:13px;margin:10px 0}nav#toc ul{display:inline;padding:0;margin:0 0 0 8px}
nav#toc li{display:inline;margin-right:14px}details>summary{cursor:pointer;font-size:13px;color:#0057a0;margin:6px 0}
h4.maprow{font-size:13px;margin:12px 0 4px}svg.attention-map g.row:hover>use{stroke:#d55e00;stroke-width:0.8}.figs.maprow{flex-wrap:nowrap;overflow-x:auto}
.hv-controls{font-size:13px;margin:4px 0}label.hv-head{display:inline-flex;align-items:center;gap:3px;white-space:nowrap;margin:0 14px 4px 0}
label.hv-head svg{flex:none}button.hv-only{font-size:10px;padding:0 3px;margin-left:2px}#hv-svg text.hv-query{cursor:pointer}#hv-svg{border:1px solid #eee;flex:none}
.hv-scroll{max-height:75vh;overflow:auto;display:inline-block;max-width:100%}.hv-grid{display:grid;gap:3px;align-items:center;font-size:11px;margin:10px 0}
canvas.hv-thumb{width:40px;height:40px;image-rendering:pixelated;border:1px solid #ddd;cursor:pointer}canvas.hv-thumb.on{outline:2px solid #d55e00})";

// A figure inside the page: its font-family attribute dropped (the page names the same stack once;
// ~110 bytes a figure, 11 KB on a model's page). --plot-svg files keep theirs.
std::string inline_svg(const std::string& svg) {
  const std::string attr = std::string(" font-family=\"") + font_stack() + "\"";
  const auto at = svg.find(attr);
  return at == std::string::npos ? svg : svg.substr(0, at) + svg.substr(at + attr.size());
}

std::string stats_row(const std::vector<std::string>& names, const Stats& st) {
  std::string r = "<tr>";
  for (const auto& n : names) r += "<td>" + escape(n) + "</td>";
  r += "<td class=\"num\">" + count(st.count) + "</td>";
  for (double v : {st.mean, st.std, st.p01, st.p10, st.p50, st.p90, st.p99}) r += "<td class=\"num\">" + number(v, 4) + "</td>";
  return r + "</tr>\n";
}

// The figures of one section, in reading order.
std::string section_figs(const std::vector<Figure>& figs, const std::string& section) {
  std::string s = "<div class=\"figs\">\n";
  for (const auto& f : figs)
    if (f.section == section) s += inline_svg(f.svg);
  return s + "</div>\n";
}

// The maps, one row per (scenario, report) with its heading: rows never mix reports.
std::string map_rows(const std::vector<Figure>& figs) {
  std::string s, group;
  bool open = false;
  for (const auto& f : figs) {
    if (f.section != "maps") continue;
    if (!open || f.group != group) {
      if (open) s += "</div>\n";
      group = f.group, open = true;
      s += "<h4 class=\"maprow\">" + escape(group) + "</h4>\n<div class=\"figs maprow\">\n";
    }
    s += inline_svg(f.svg);
  }
  return open ? s + "</div>\n" : s;
}

// The tokens of the reports the seed plots label (each scenario's top report; named data only),
// each report once: what the plotted contexts were summed over.
std::string token_table(const ReportData& d) {
  std::string rows;
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < shown(d); ++i) {
    if (d.scenarios[i].top.empty() || d.scenarios[i].top[0].tokens.empty()) continue;
    const auto& r = d.scenarios[i].top[0];
    if (std::find(seen.begin(), seen.end(), r.id) != seen.end()) continue;
    seen.push_back(r.id);
    std::string toks;
    for (const auto& t : r.tokens) toks += (toks.empty() ? "" : " · ") + escape(t);
    rows += "<tr><td>" + escape(r.id) + "</td><td class=\"tokens\" lang=\"und\">" + toks + "</td></tr>\n";
  }
  return rows.empty() ? "" : "<table class=\"tokens\" id=\"seed-tokens\">\n<tr><th>report</th><th>tokens (in order)</th></tr>\n" + rows + "</table>\n";
}

// A long part of the page, collapsed: its summary line says what it holds.
std::string collapsed(const std::string& summary, const std::string& body) {
  return "<details><summary>" + escape(summary) + "</summary>\n" + body + "</details>\n";
}

// The table of contents: a link to each section the page has, in page order.
std::string toc(const std::string& page) {
  static const std::pair<const char*, const char*> parts[] = {
      {"summary", "Summary"},       {"seed-plots", "The seed's plot"}, {"model", "Layer × head"},
      {"model-distributions", "Per head, over the reports"},           {"distributions", "Distributions"},
      {"attention", "Attention"},   {"head-view", "Head view"},        {"maps", "Attention maps"},        {"sweep-section", "Sweep"},
      {"scaling", "Scaling"}};
  std::vector<std::pair<std::size_t, std::string>> found;
  for (const auto& [id, name] : parts)
    if (auto at = page.find(std::string("id=\"") + id + "\""); at != std::string::npos)
      found.emplace_back(at, "<li><a href=\"#" + std::string(id) + "\">" + name + "</a></li>");
  std::sort(found.begin(), found.end());
  std::string o = "<nav id=\"toc\" class=\"toc\"><b>Contents</b><ul>";
  for (const auto& [at, li] : found) o += li;
  return o + "</ul></nav>\n";
}

// From the doctype to <body>: the page's title and style sheet.
std::string page_head(const ReportData& d) {
  const auto& h = d.header;
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>headsep report";
  if (!h.scenario_plugin.empty()) o += " — " + escape(h.scenario_plugin);
  o += "</title>\n<style>\nbody{font-family:" + std::string(font_stack()) + "}\n" + kCss + "\n</style>\n</head>\n<body>\n";
  return o;
}

// The run's header (#run-header): what was run, so that it can be run again.
std::string header_table(const ReportData& d) {
  const auto& h = d.header;
  std::string o;
  o += "<header id=\"run-header\">\n<h1>headsep report</h1>\n<table class=\"header\">\n";
  auto row = [&](const std::string& k, const std::string& v_escaped, const std::string& id) {
    o += "<tr id=\"hdr-" + id + "\"><th>" + escape(k) + "</th><td>" + v_escaped + "</td></tr>\n";
  };
  row("command", "<code>" + escape(h.command_line) + "</code>", "command");
  row("version", escape(h.version), "version");
  row("scenario generator", escape(h.scenario_plugin), "scenario");
  row("weighting scheme", escape(h.weighting_plugin), "weighting");
  std::string params;
  for (const auto& p : h.params) {
    // Texts handed over in memory (Python) reach the text plugin as a pipe, /proc/self/fd/N: a
    // path nobody can open again, so the page says what it was instead.
    const auto eq = p.find('='), fd = p.find("/proc/self/fd/");
    const std::string shown = eq != std::string::npos && fd == eq + 1 ? p.substr(0, eq + 1) + "(texts passed in memory)" : p;
    params += (params.empty() ? "" : "<br>") + ("<code>" + escape(shown) + "</code>");
  }
  row("parameters", params.empty() ? "(defaults)" : params, "params");
  if (!d.axes.empty() || !d.scaling)  // a scaling page of a model's run knows neither
    row("context axes", escape([&] {
          std::string a;
          for (const auto& x : d.axes) a += (a.empty() ? "" : ", ") + x;
          return a;
        }()),
        "axes");
  if (d.heads || !d.scaling)
    row("heads", std::to_string(d.heads) + (d.layers > 1 ? " (" + std::to_string(d.layers) + " layers)" : ""), "heads");
  row("reports", h.reports_text.empty() ? count(h.reports) + " (" + count(h.groups) + " report × scenario groups)" : escape(h.reports_text),
      "reports");
  std::string threads = std::to_string(h.threads);
  if (d.scaling) {  // one run per count
    threads.clear();
    for (const auto& r : d.scaling->runs) threads += (threads.empty() ? "" : ", ") + std::to_string(r.threads);
    threads += sc_unit_note(*d.scaling);
  }
  row("threads", escape(threads), "threads");
  row("SIMD level", escape(h.simd), "simd");
  row("precision", escape(h.precision), "precision");
  row("wall time", escape(number(h.seconds, 3) + " s"), "time");
  o += "</table>\n</header>\n";
  return o;
}

// Model runs: head_separation per scenario and layer, the seed's plot per layer, the layer x
// head grids, each head's strips over the reports, then the top reports' maps (collapsed).
std::string model_sections(const ReportData& d, const std::vector<Figure>& figs) {
  std::string o;
  o += "<section id=\"summary\">\n<h2>head_separation per scenario and layer (means)</h2>\n<table class=\"summary\">\n"
       "<tr><th>scenario · layer</th><th>reports</th><th>mean head_separation</th></tr>\n";
  for (const auto& s : d.scenarios)
    o += "<tr><td>" + escape(s.name) + "</td><td class=\"num\">" + count(s.count) + "</td><td class=\"num\">" +
         number(s.separation.stats.mean, 4) + "</td></tr>\n";
  o += "</table>\n</section>\n";
  o += "<section id=\"seed-plots\">\n<h2>The seed's plot, per layer</h2>\n<p class=\"note\">The mean contexts of each "
       "layer's baseline (grey) and heads on the first two context axes.</p>\n";
  if (d.scenarios.size() > shown(d))
    o += "<p class=\"warn\">" + count(d.scenarios.size() - shown(d)) + " more layers are in the table above, not drawn.</p>\n";
  o += section_figs(figs, "seed") + "</section>\n";
  o += "<section id=\"model\">\n<h2>Layer × head</h2>\n<p class=\"note\">Per scenario, every head of every layer: "
       "its mean context distance to the other heads of its layer (the seed's separation), its mean Jensen–Shannon "
       "divergence to them, and its attention entropy (means over the reports). A cell links to the head's map in the "
       "scenario's top report (below).</p>\n" +
       section_figs(figs, "model") + "</section>\n";
  o += "<section id=\"model-distributions\">\n<h2>Per head, over the reports</h2>\n<p class=\"note\">Per scenario and "
       "layer, each head's attention entropy (baseline included) and separation (mean context distance to the other "
       "heads of its layer) over the reports: line p01–p99, box p10–p90, tick p50, dot mean.</p>\n" +
       collapsed("Entropy and separation strips, per layer", section_figs(figs, "model-dist")) + "</section>\n";
  std::size_t kept = 0, drawn = 0;
  for (std::size_t i = 0; i < shown(d); ++i) kept += d.scenarios[i].maps.size();
  for (const auto& f : figs) drawn += f.section == "maps";
  o += head_view_section(d);
  o += "<section id=\"model-maps\">\n<h2 id=\"maps\">Attention maps of the top reports</h2>\n<p class=\"note\">Per "
       "scenario, the reports with the largest separation (the mean over layers and head pairs of the pair's context "
       "distance; the summary's <code>top</code> list, in its order), every layer and head, the first " +
       std::to_string(d.limits.map_tokens) + " tokens; rows are queries, columns keys; every cell shows its query, "
       "key and weight on hover.</p>\n";
  if (kept == 0) o += "<p class=\"note\">No maps were kept in this run.</p>\n";
  if (kept > 0 && !d.limits.static_maps) o += "<p class=\"note\">This display leaves the static maps out (a notebook's page stays under 1 MB); the head "
         "view above holds the same weights, and <code>report_html(path)</code> writes them.</p>\n";
  else if (drawn < kept * (d.heads + 1))
    o += "<p class=\"warn\">Maps beyond each scenario's top report are drawn only while the report holds fewer than " +
         count(d.limits.map_cells) + " map cells; some are not drawn.</p>\n";
  o += collapsed(std::to_string(drawn) + " maps, one row per layer and report", map_rows(figs)) + "</section>\n";
  return o;
}

// Runs with distributions: head_separation per scenario, the seed's plots, the histograms.
std::string run_sections(const ReportData& d, const std::vector<Figure>& figs) {
  std::string o;
  o += "<section id=\"summary\">\n<h2>head_separation per scenario</h2>\n<table class=\"summary\">\n<tr><th>scenario</th>"
       "<th>reports</th><th>mean</th><th>std</th><th>p01</th><th>p10</th><th>p50</th><th>p90</th><th>p99</th></tr>\n";
  for (const auto& s : d.scenarios) o += stats_row({s.name}, s.separation.stats);
  o += "</table>\n";
  bool sketch = false;
  for (const auto& s : d.scenarios) sketch = sketch || !s.separation.stats.exact;
  if (sketch) o += "<p class=\"note\">Quantiles from a relative-error sketch (0.5 %) where a scenario has more than 4,096 reports.</p>\n";
  o += "</section>\n";
  o += "<section id=\"seed-plots\">\n<h2>The seed's plot</h2>\n<p class=\"note\">Per scenario, the contexts on the two "
       "context axes: the grey ring is the single-head baseline, the blue triangle head 1, the orange square head 2 "
       "(further heads: further colour and shape pairs). The farther apart the heads, the more clearly they read "
       "different relations; the dashed line is that distance, head_separation. All plots share their axes.</p>\n";
  if (d.scenarios.size() > shown(d))
    o += "<p class=\"warn\">" + count(d.scenarios.size() - shown(d)) + " more scenarios are in the table above, not drawn.</p>\n";
  o += section_figs(figs, "seed") + token_table(d) + "</section>\n";
  o += "<section id=\"distributions\">\n<h2>Distributions</h2>\n" + section_figs(figs, "dist") + "</section>\n";
  return o;
}

// Attention schemes: strips, heatmaps and grids, then the top reports' maps.
std::string attention_section(const ReportData& d, const std::vector<Figure>& figs) {
  std::string o;
  o += "<section id=\"attention\">\n<h2>Attention</h2>\n<p class=\"note\">Per head entropy and confidence over "
       "all reports, the Jensen–Shannon divergence between heads, and the layer × head grid of mean separation "
       "(each head's mean distance to the other heads in the context plane).</p>\n" +
       section_figs(figs, "attention");
  std::size_t drawn = 0, kept = 0;
  for (const auto& f : figs) drawn += f.section == "maps";
  for (std::size_t i = 0; i < shown(d); ++i) kept += d.scenarios[i].maps.size();
  o += head_view_section(d);
  o += "<h3 id=\"maps\">Attention maps of the top reports</h3>\n<p class=\"note\">Per scenario, the " +
       std::to_string(d.limits.map_reports) +
       " reports with the largest head_separation over the whole run (the summary's top list, <code>--top</code>), in "
       "that order; rows are queries, columns keys.</p>\n";
  if (kept == 0) o += "<p class=\"note\">No maps were kept in this run (<code>--top 0</code>).</p>\n";
  if (kept > 0 && !d.limits.static_maps) o += "<p class=\"note\">This display leaves the static maps out (a notebook's page stays under 1 MB); the head "
         "view above holds the same weights, and <code>report_html(path)</code> writes them.</p>\n";
  else if (drawn < kept * (d.heads + 1))
    o += "<p class=\"warn\">Some kept maps are not drawn: the report holds at most " + count(d.limits.map_cells) +
         " map cells.</p>\n";
  o += collapsed(std::to_string(drawn) + " maps, one row per scenario and report", map_rows(figs)) + "</section>\n";
  return o;
}

// headsep sweep: the figure and the table of head_separation per value and scenario.
std::string sweep_section(const Sweep& sw, const std::vector<Figure>& figs) {
  std::string o;
  o += "<section id=\"sweep-section\">\n<h2>Sweep of " + escape(sw.parameter) + "</h2>\n" + section_figs(figs, "sweep");
  o += "<table class=\"sweep\">\n<tr><th>" + escape(sw.parameter) + "</th><th>scenario</th><th>reports</th><th>mean</th>"
       "<th>std</th><th>p01</th><th>p10</th><th>p50</th><th>p90</th><th>p99</th></tr>\n";
  for (std::size_t i = 0; i < sw.values.size(); ++i)
    for (std::size_t j = 0; j < sw.scenarios.size(); ++j)
      if (sw.stats[i][j]) o += stats_row({sw.values[i], sw.scenarios[j]}, *sw.stats[i][j]);
  o += "</table>\n</section>\n";
  return o;
}

// headsep scaling: the figures and the table of wall times, speedups and ceilings.
std::string scaling_section(const Scaling& sc, const std::vector<Figure>& figs) {
  std::string o;
  o += "<section id=\"scaling\">\n<h2>Scaling</h2>\n<p class=\"note\">The same job at each " +
       std::string(sc.unit == "ranks" ? "MPI rank count (busy seconds: rank 0's stages)" : "thread count") + ". Speedup and "
       "efficiency are against the first count; with <code>--ceiling</code>, the speedup that as many independent "
       "1-thread copies of the job got at once on this machine, and the engine's share of it (near 100 %: what is "
       "left to linear is the machine's).</p>\n";
  if (!sc.identical) o += "<p class=\"warn\">The outputs differed between counts.</p>\n";
  o += section_figs(figs, "scaling");
  o += "<table class=\"scaling\">\n<tr><th>" + sc.unit + "</th><th>wall s</th><th>min s</th><th>max s</th><th>speedup</th>"
       "<th>efficiency</th><th>ceiling</th><th>share of ceiling</th></tr>\n";
  const double w0 = sc.runs.empty() ? 0 : sc.runs[0].wall_s, t0 = sc.runs.empty() ? 1 : sc.runs[0].threads;
  for (const auto& r : sc.runs) {
    const double s = r.wall_s > 0 ? w0 / r.wall_s : 0;
    auto cell = [](const std::string& v) { return "<td class=\"num\">" + v + "</td>"; };
    o += "<tr>" + cell(std::to_string(r.threads)) + cell(number(r.wall_s, 4)) + cell(number(r.min_s, 4)) +
         cell(number(r.max_s, 4)) + cell(number(s, 3) + "×") + cell(number(100 * s * t0 / r.threads, 3) + " %") +
         cell(r.copies_wall_s ? number(scaling_ceiling(sc, r), 3) + "×" : "—") +
         cell(r.copies_wall_s && r.wall_s > 0 ? number(100 * *r.copies_wall_s / (r.threads * r.wall_s), 3) + " %" : "—") +
         "</tr>\n";
  }
  o += "</table>\n</section>\n";
  return o;
}

}  // namespace

std::string html(const ReportData& d, const std::vector<Figure>& figs) {
  std::string o;  // the sections, then the page around them with the table of contents on top
  if (!d.scenarios.empty() && !d.distributions) o += model_sections(d, figs);
  if (!d.scenarios.empty() && d.distributions) o += run_sections(d, figs);
  if (d.attention) o += attention_section(d, figs);
  if (d.sweep) o += sweep_section(*d.sweep, figs);
  if (d.scaling) o += scaling_section(*d.scaling, figs);
  o = page_head(d) + header_table(d) + toc(o) + o;
  o += "<footer><p class=\"note\">Written by headsep " + escape(d.header.version) +
       "; offline: no external resources" +
       (o.find("<script") != std::string::npos ? "; one inline script, the head view's (the page reads the same without it)"
                                                 : ", no scripts") +
       ". Every figure is also available as SVG with --plot-svg.</p></footer>\n";
  return o + "</body>\n</html>\n";
}

}  // namespace headsep::report
