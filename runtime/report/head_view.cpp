// The interactive head view (bertviz's): the maps the page draws, once, as a JSON blob, and one
// small inline script that draws a token's attention lines per head. Without scripts the section
// stays hidden and the static SVG maps carry every weight (docs/REPORTS.md, "The head view").
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {
namespace {

// The view's script: fills the controls from #hv-data, draws on hover, focus and click (a click or
// Enter keeps the token). A weight is two base64url characters, 12 bits: code / 4095 (kCode); a
// line per (head, key) with a code above 0: stroke-opacity = weight, stroke-width = 0.5 + 4 x weight,
// in the head's marker colour.
constexpr const char* kScript = R"JS((function () {
"use strict";
var D = JSON.parse(document.getElementById("hv-data").textContent), NS = "http://www.w3.org/2000/svg";
var $ = function (id) { return document.getElementById(id); };
var rep = $("hv-report"), lay = $("hv-layer"), box = $("hv-heads"), svg = $("hv-svg"), status = $("hv-status");
var kept = null, shown = null, X0 = 170, X1 = 400, XN = 540, TOP = 40, ROW = 18, B64 = {};
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".split("").forEach(function (c, i) { B64[c] = i; });
function weight(s, c) { return (B64[s[2 * c]] * 64 + B64[s[2 * c + 1]]) / D.scale; }
function el(tag, attrs, text) {
  var e = document.createElementNS(NS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function cut(s) { return s.length > 18 ? s.slice(0, 17) + "\u2026" : s; }
function R() { return D.reports[+rep.value]; }
function L() { return +lay.value; }
function qtok(r) { return r.qt || r.kt; }
function qraw(r) { return r.qt ? r.qr || r.qt : r.kr || r.kt; }
function hover(shown, raw) { return shown === raw ? shown : shown + " (token " + raw + ")"; }
function inputs() { return Array.prototype.slice.call(box.querySelectorAll("input")); }
function checked() { return inputs().filter(function (c) { return c.checked; }).map(function (c) { return +c.dataset.head; }); }
function only(hs) { inputs().forEach(function (c) { c.checked = hs.indexOf(+c.dataset.head) >= 0; }); show(shown === null ? kept : shown); }
function show(i) {
  var g = $("hv-lines"), nums = $("hv-nums"), r = R();
  while (g.firstChild) g.removeChild(g.firstChild);
  while (nums.firstChild) nums.removeChild(nums.firstChild);
  Array.prototype.forEach.call(svg.querySelectorAll("text.hv-query"), function (t) {
    t.setAttribute("font-weight", +t.dataset.query === i ? "bold" : "normal");
  });
  shown = i;
  if (i === null) { status.textContent = "Hover, focus or click a token on the left (a click keeps it)."; return; }
  var K = r.kt.length, n = 0, hs = checked(), best = [];
  hs.forEach(function (h) {
    var w = r.w[L()][h];
    for (var k = 0; k < K; ++k) {
      var v = weight(w, i * K + k);
      if (!best[k] || v > best[k][0]) best[k] = [v, h];
      if (!(v > 0)) continue;
      var line = el("line", {"class": "hv-line", x1: X0 + 6, y1: TOP + ROW * i - 4, x2: X1 - 6, y2: TOP + ROW * k - 4,
        stroke: D.colours[h], "stroke-opacity": Math.min(1, v), "stroke-width": (0.5 + 4 * Math.min(1, v)).toFixed(3),
        "data-head": h, "data-query": i, "data-key": k, "data-weight": v});
      if (D.dash[h]) line.setAttribute("stroke-dasharray", D.dash[h]);
      line.appendChild(el("title", {}, D.heads[h] + ": " + qtok(r)[i] + " \u2192 " + r.kt[k] + ": " + v.toFixed(4)));
      g.appendChild(line);
      ++n;
    }
  });
  // The numbers of the hovered row: per key its weight under each checked head (up to 4), else the
  // largest and whose it is; a key above 0.1 is bold.
  for (var k = 0; k < K && hs.length; ++k) {
    var t = el("text", {"class": "hv-num", x: XN, y: TOP + ROW * k, "font-weight": best[k][0] >= 0.1 ? "bold" : "normal"});
    if (hs.length <= 4)
      hs.forEach(function (h, j) {
        t.appendChild(el("tspan", {fill: D.colours[h], x: XN + 52 * j}, weight(r.w[L()][h], i * K + k).toFixed(3)));
      });
    else t.textContent = best[k][0].toFixed(3) + " (" + D.heads[best[k][1]] + ")";
    nums.appendChild(t);
  }
  status.textContent = "Query \u201c" + qtok(r)[i] + "\u201d: " + n + " lines, " + hs.length + " heads" +
    (kept === i ? " (kept; click again to release)" : "") + "; right: the weights, " +
    (hs.length <= 4 ? "one column per checked head" : "the largest over the checked heads") + ".";
}
function tokens() {
  var r = R(), Q = qtok(r).length, K = r.kt.length;
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute("height", TOP + ROW * Math.max(Q, K) + 8);
  svg.appendChild(el("g", {id: "hv-lines"}));
  svg.appendChild(el("g", {id: "hv-nums", "font-size": "11"}));
  qtok(r).forEach(function (t, i) {
    var e = el("text", {"class": "hv-query", x: X0, y: TOP + ROW * i, "text-anchor": "end", tabindex: 0, role: "button",
      "data-query": i, "aria-label": "query token " + t}, cut(t));
    e.appendChild(el("title", {}, hover(t, qraw(r)[i])));
    e.addEventListener("mouseenter", function () { show(i); });
    e.addEventListener("mouseleave", function () { show(kept); });
    e.addEventListener("focus", function () { show(i); });
    e.addEventListener("blur", function () { show(kept); });
    var keep = function () { kept = kept === i ? null : i; show(kept === null ? i : kept); };
    e.addEventListener("click", keep);
    e.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); keep(); } });
    svg.appendChild(e);
  });
  r.kt.forEach(function (t, k) {
    var e = el("text", {"class": "hv-key", x: X1, y: TOP + ROW * k, "data-key": k}, cut(t));
    e.appendChild(el("title", {}, hover(t, (r.kr || r.kt)[k])));
    svg.appendChild(e);
  });
  svg.appendChild(el("text", {x: X0, y: 14, "text-anchor": "end", fill: "#555"}, "query"));
  svg.appendChild(el("text", {x: X1, y: 14, fill: "#555"}, "key"));
  svg.appendChild(el("text", {x: XN, y: 14, fill: "#555"}, "weight"));
  $("hv-note").textContent = r.note;
  if (kept !== null && kept >= Q) kept = null;
  show(kept);
}
// The model view: a thumbnail per (layer, head) of the report, one pixel a weight (the maps' blues);
// a click opens that head: its layer picked, it alone checked.
function thumbs() {
  var r = R(), grid = $("hv-grid"), K = r.kt.length, Q = qtok(r).length;
  grid.textContent = "";
  grid.style.gridTemplateColumns = "56px repeat(" + D.heads.length + ", 44px)";
  grid.appendChild(document.createElement("span"));
  D.heads.forEach(function (name, h) {
    var s = document.createElement("span");
    s.textContent = h ? "h" + h : "base", s.title = name, s.style.color = D.colours[h];
    grid.appendChild(s);
  });
  r.layers.forEach(function (l, j) {
    var s = document.createElement("span");
    s.textContent = D.layered ? "layer " + l : "";
    grid.appendChild(s);
    D.heads.forEach(function (name, h) {
      var c = document.createElement("canvas"), x = c.getContext("2d"), img, w = r.w[j][h];
      c.width = Math.max(1, K), c.height = Math.max(1, Q), c.className = "hv-thumb", c.title = (D.layered ? "layer " + l + ", " : "") + name;
      c.dataset.layer = j, c.dataset.head = h, c.tabIndex = 0;
      img = x.createImageData(c.width, c.height);
      for (var p = 0; p < K * Q; ++p) {
        var v = weight(w, p);
        img.data[4 * p] = 247 - 239 * v, img.data[4 * p + 1] = 251 - 203 * v, img.data[4 * p + 2] = 255 - 148 * v;
        img.data[4 * p + 3] = 255;
      }
      x.putImageData(img, 0, 0);
      var open = function () { lay.value = j; only([h]); mark(); };
      c.addEventListener("click", open);
      c.addEventListener("keydown", function (ev) { if (ev.key === "Enter") open(); });
      grid.appendChild(c);
    });
  });
  mark();
}
function mark() {
  var hs = checked();
  Array.prototype.forEach.call($("hv-grid").querySelectorAll("canvas"), function (c) {
    c.classList.toggle("on", +c.dataset.layer === L() && hs.indexOf(+c.dataset.head) >= 0);
  });
}
function layers() {
  var r = R(), was = lay.value;
  lay.textContent = "";
  r.layers.forEach(function (l, j) { lay.appendChild(new Option("layer " + l, j)); });
  if (was !== "" && +was < r.layers.length) lay.value = was;
  $("hv-layer-label").hidden = !D.layered;
}
D.reports.forEach(function (r, j) { rep.appendChild(new Option(r.name, j)); });
D.heads.forEach(function (name, h) {
  var c = document.createElement("input"), lab = document.createElement("label"), b = document.createElement("button");
  var key = el("svg", {width: 34, height: 14, "aria-hidden": "true"});
  c.type = "checkbox", c.checked = h > 0, c.dataset.head = h, c.id = "hv-head-" + h;
  lab.className = "hv-head";
  key.appendChild(el("line", {x1: 1, y1: 7, x2: 21, y2: 7, stroke: D.colours[h], "stroke-width": 2.5,
                              "stroke-dasharray": D.dash[h] || "none"}));
  key.appendChild(el("path", {d: D.shapes[h], transform: "translate(28,7)", fill: D.colours[h]}));
  b.type = "button", b.textContent = "only", b.className = "hv-only", b.title = "show " + name + " alone";
  b.addEventListener("click", function (ev) { ev.preventDefault(); only([h]); mark(); });
  lab.appendChild(c), lab.appendChild(key), lab.appendChild(document.createTextNode(name)), lab.appendChild(b);
  c.addEventListener("change", function () { show(shown === null ? kept : shown); mark(); });
  box.appendChild(lab);
});
$("hv-all").addEventListener("click", function () { only(D.heads.map(function (n, h) { return h; }).slice(1)); mark(); });
$("hv-none").addEventListener("click", function () { only([]); mark(); });
rep.addEventListener("change", function () { kept = null; layers(); tokens(); thumbs(); });
lay.addEventListener("change", function () { show(kept); mark(); });
layers();
tokens();
thumbs();
$("hv").hidden = false;
})();
)JS";

// JSON text of a string, safe inside <script>: '<', '>' and '&' as \u escapes (no "</script>"),
// invalid UTF-8 replaced.
std::string json_string(const std::string& s) {
  const std::string j = nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string o;
  for (char c : j) o += c == '<' ? "\\u003c" : c == '>' ? "\\u003e" : c == '&' ? "\\u0026" : std::string(1, c);
  return o;
}

std::string json_strings(const std::vector<std::string>& v) {
  std::string o = "[";
  for (const auto& s : v) o += (o.size() > 1 ? "," : "") + json_string(s);
  return o + "]";
}

// A weight as 12 bits (code / 4095: steps of 2.4e-4, 3-4 significant digits from 0.03 up, far
// finer than a line's opacity shows) in two base64url characters: 2 bytes a cell, no separator.
// A model page's 11,232 cells take 22 KB so (4 decimals as JSON numbers: 40 KB), within the page's
// 1.5 MB (docs/REPORTS.md).
constexpr int kCode = 4095;
constexpr const char* kBase64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// One map of one layer: per head 0..H a string of its queries x keys weights, query-major.
std::string weights(const ReportData& d, const AttentionMap& m) {
  std::string o = "[";
  for (std::uint32_t h = 0; h <= d.heads; ++h) {
    o += h ? ",\"" : "\"";
    for (std::size_t c = 0; c < std::size_t(m.queries) * m.keys; ++c) {
      const double w = m.maps[std::size_t(h) * m.queries * m.keys + c];
      const long code = std::isfinite(w) ? std::lround(std::clamp(w, 0.0, 1.0) * kCode) : 0;
      o += kBase64[code >> 6], o += kBase64[code & 63];
    }
    o += "\"";
  }
  return o + "]";
}

// The blob: heads' names and colours (the seed plot's marker(h)), and per report its tokens,
// layers and weights. A model run's report gathers its layers; an attention run has one.
std::string blob(const ReportData& d) {
  struct Entry {
    std::string name, note, qt, qr, kt, kr;
    std::vector<std::string> layers, weights;
  };
  std::vector<Entry> entries;
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> at;
  std::set<std::pair<std::string, std::uint64_t>> whole;  // the chosen reports: their drawn cuts are left out
  auto add = [&](const std::string& group, std::uint32_t layer, const AttentionMap& m, const std::string& which) {
    auto [it, fresh] = at.try_emplace({group, m.index}, entries.size());
    if (fresh) {
      Entry e;
      e.name = group + " · report " + m.id + " (" + which + ")";
      e.note = (which == "chosen" ? "chosen (--attention-reports, Python maps=)" : "head_separation " + number(m.separation)) +
               (m.keys < m.n ? " · first " + std::to_string(m.keys) + " of " + std::to_string(m.n) + " tokens"
                             : " · all " + std::to_string(m.n) + " tokens");
      std::vector<std::string> q;
      for (std::uint32_t i = 0; i < m.queries; ++i) {
        const std::uint32_t t = m.first_query + i;
        q.push_back(t < m.tokens.size() ? m.tokens[t] : "#" + std::to_string(t));
      }
      // Tokens as text (display_tokens), the raw pieces beside them when they differ (for hover).
      const std::vector<std::string> kt = display_tokens(m.tokens), qt = display_tokens(q);
      e.kt = json_strings(kt);
      if (kt != m.tokens) e.kr = json_strings(m.tokens);
      if (q != m.tokens) e.qt = json_strings(qt);
      if (q != m.tokens && qt != q) e.qr = json_strings(q);
      entries.push_back(std::move(e));
    }
    entries[it->second].layers.push_back(std::to_string(layer));
    entries[it->second].weights.push_back(weights(d, m));
  };
  for (const auto& c : d.chosen) add(c.scenario, c.layer, c.map, "chosen"), whole.insert({c.scenario, c.map.index});
  for (const auto& [si, mi] : drawn_maps(d)) {
    const Scenario& s = d.scenarios[si];
    const std::string group = s.model_scenario.empty() ? s.name : s.model_scenario;
    if (!whole.count({group, s.maps[mi].index})) add(group, s.layer, s.maps[mi], "#" + std::to_string(mi + 1));
  }
  // Each head's identity: its name, the seed plot's colour and marker shape, and a dash pattern
  // (head_dash) so that heads sharing a colour past 8 still differ on a line.
  std::vector<std::string> names, colours, dash, shapes;
  for (std::uint32_t h = 0; h <= d.heads; ++h)
    names.push_back(head_label(h)), colours.push_back(marker(h).colour), dash.push_back(head_dash(h)),
        shapes.push_back(marker_path(h, 5));
  std::string o = "{\"scale\":" + std::to_string(kCode) + ",\"layered\":" + (d.distributions ? "false" : "true") +
                  ",\"heads\":" + json_strings(names) + ",\"colours\":" + json_strings(colours) +
                  ",\"dash\":" + json_strings(dash) + ",\"shapes\":" + json_strings(shapes) + ",\"reports\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    std::string ls, ws;
    for (std::size_t l = 0; l < e.layers.size(); ++l) ls += (l ? "," : "") + e.layers[l], ws += (l ? "," : "") + e.weights[l];
    o += std::string(i ? "," : "") + "\n{\"name\":" + json_string(e.name) + ",\"note\":" + json_string(e.note) +
         ",\"kt\":" + e.kt + (e.kr.empty() ? "" : ",\"kr\":" + e.kr) + (e.qt.empty() ? "" : ",\"qt\":" + e.qt) +
         (e.qr.empty() ? "" : ",\"qr\":" + e.qr) + ",\"layers\":[" + ls + "],\"w\":[" + ws + "]}";
  }
  return o + "]}";
}

}  // namespace

std::string head_view_section(const ReportData& d) {
  if (drawn_maps(d).empty() && d.chosen.empty()) return "";
  return "<section id=\"head-view\">\n<h3>Head view</h3>\n<p class=\"note\">The drawn maps, interactively (as "
         "bertviz's head and model views): pick a report" +
         std::string(d.distributions ? "" : ", a layer") +
         " and heads, then hover, focus (Tab) or click a query token on the left: a line to each key per head, its "
         "opacity the weight, in the head's colour and dash (its marker as in the seed's plot), the weights on the "
         "right. Below, every " + std::string(d.distributions ? "" : "layer and ") + "head of the report as a thumbnail; "
         "a click opens that head.</p>\n"
         "<noscript><p class=\"note\">The head view needs JavaScript; the maps below show every weight.</p></noscript>\n"
         "<div id=\"hv\" hidden>\n<p class=\"hv-controls\"><label>report <select id=\"hv-report\"></select></label> "
         "<label id=\"hv-layer-label\">layer <select id=\"hv-layer\"></select></label> heads: "
         "<button type=\"button\" id=\"hv-all\">all</button> <button type=\"button\" id=\"hv-none\">none</button></p>\n"
         "<p class=\"hv-controls\" id=\"hv-heads\"></p>\n"
         "<p class=\"note\" id=\"hv-note\"></p><p class=\"note\" id=\"hv-status\" aria-live=\"polite\"></p>\n"
         "<div class=\"hv-scroll\"><svg id=\"hv-svg\" class=\"head-view\" width=\"760\" height=\"40\" font-size=\"12\"></svg></div>\n"
         "<div id=\"hv-grid\" class=\"hv-grid\"></div>\n</div>\n"
         "<script type=\"application/json\" id=\"hv-data\">" +
         blob(d) + "</script>\n<script>\n" + kScript + "</script>\n</section>\n";
}

}  // namespace headsep::report
