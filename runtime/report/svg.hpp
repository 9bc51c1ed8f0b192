// SVG drawing helpers every figure shares (defined in svg.cpp): numbers as pixels and data
// attributes, the <svg> frame, text / line / rect elements, head markers, axes, colour scales.
// Private to runtime/report/; the building blocks the unit tests use are in report.hpp.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "report/report.hpp"

namespace headsep::report {

/// Pixel coordinates with at most two decimals (smaller files, exact enough for a screen).
std::string px(double v);
/// Full precision for data-* attributes (tests read them back).
std::string exact(double v);

/// The font stack of every figure (CJK fonts on Linux, Windows and macOS named; docs/REPORTS.md):
/// each <svg> names it, the HTML page names it once for the page (and drops it from its figures).
const char* font_stack();
/// Opens a figure's <svg> element (font, size, white background); `extra` adds attributes.
std::string svg_open(const std::string& id, const std::string& cls, double w, double h, const std::string& extra = "");
std::string text(double x, double y, const std::string& escaped, const std::string& attrs = "");
std::string line(double x1, double y1, double x2, double y2, const std::string& attrs);
std::string rect(double x, double y, double w, double h, const std::string& attrs);

/// "head 3" or "single-head baseline" (h = 0); head_short: "head3" or "single".
std::string head_label(std::uint32_t h);
std::string head_short(std::uint32_t h);
/// The outline of head h's marker shape around (0, 0), about 2r across (an SVG path's d).
std::string marker_path(std::uint32_t h, double r);
/// Head h's dash pattern for lines (stroke-dasharray; "" solid): heads 1-8 solid, 9-16 dashed,
/// 17-24 dotted, 25-32 dash-dot, then again. With marker()'s colours, which shift by one every 8
/// heads, (colour, dash) differs for every pair of heads up to 32; the baseline is solid grey.
const char* head_dash(std::uint32_t h);
/// A marker glyph; `attrs` adds classes and data. Yellow and light colours get a dark outline.
/// The <path> is left open: the caller adds a <title> or closes it.
std::string glyph(std::uint32_t h, double x, double y, double r, const std::string& attrs, double opacity = 1,
                  bool outlined = false);

/// The single-head baseline as the seed plot draws it, after the heads: a ring of its grey (r the
/// ring's centre line, stroke 2.5 px) with a light fill, so that it stays visible on a head at the
/// same place and the head shows through it. Left open like glyph().
std::string baseline_ring(double x, double y, double r, const std::string& attrs, double opacity = 1);

/// Axis ticks, grid and labels for a horizontal axis at y = y0 spanning rows [top, y0].
std::string x_axis(const Ticks& t, const Scale& sx, double top, double y0, const std::string& title, double title_x);
/// The same for a vertical axis at x = left spanning columns [left, right].
std::string y_axis(const Ticks& t, const Scale& sy, double left, double right, const std::string& title, double title_y);

/// Viridis (sequential, colour-blind safe), t in [0, 1].
std::string viridis(double t);
/// White to dark blue for attention weights in [0, 1].
std::string blues(double t);
/// A horizontal bar of `colour` from 0 to 1, `w` wide, labelled `lo` and `hi` below its ends.
/// `stretched`: the scale spans the data's own range (not the metric's), said under the bar so
/// that a narrow range painted dark to bright reads as narrow.
std::string colour_bar(double x, double y, double w, const std::string& lo, const std::string& hi,
                       const std::function<std::string(double)>& colour, bool stretched = false);

/// `s` cut to `max_chars` code points (not bytes), "…" added when cut.
std::string cut(const std::string& s, std::size_t max_chars);

}  // namespace headsep::report
