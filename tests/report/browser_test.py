#!/usr/bin/env python3
"""headsep's reports as a user sees them: headless Chromium (Debian's `chromium`) loads each
report offline, and this test checks what it rendered.

  - the reports of `headsep example`, of a 100,000-report synthetic run, of an attention run and
    of a sweep load without console errors or failed requests;
  - the expected figures are present (ids and counts in the DOM from --dump-dom);
  - a screenshot of each is not blank;
  - in the seed plot, the markers sit where the seed's contexts put them: read back from the
    rendered DOM (marker positions mapped through the drawn axis ticks) and from the pixels of a
    screenshot of the standalone SVG (centroid of the blue triangle / orange square / grey ring).

Usage: browser_test.py HEADSEP_BINARY SOURCE_DIR. Exit 77 (CTest: skipped) with a loud message
when Chromium is not installed; never a silent pass.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from html.parser import HTMLParser

HEADSEP, SOURCE = sys.argv[1], sys.argv[2]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--force-device-scale-factor=1", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(url, tmp, extra):
    """Runs Chromium on url with a fresh profile; returns (stdout, stderr)."""
    profile = tempfile.mkdtemp(dir=tmp, prefix="profile-")
    r = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=" + profile] + extra + [url],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print(r.stderr[-3000:])
    check(r.returncode == 0, "chromium exits 0 on " + os.path.basename(url) + " " + " ".join(extra))
    return r.stdout, r.stderr


def console_errors(stderr):
    """Lines Chromium logs for page problems: console messages, failed loads, blocked requests."""
    bad = []
    for line in stderr.splitlines():
        if "CONSOLE" in line or "Failed to load" in line or "net::ERR" in line or "Uncaught" in line:
            bad.append(line)
    return bad


class Dom(HTMLParser):
    """Elements of the dumped DOM as (tag, attrs, text) with their enclosing <svg>'s id."""

    def __init__(self):
        super().__init__()
        self.elements, self.stack, self.svg = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg.append(a.get("id", ""))
        el = {"tag": tag, "attrs": a, "text": "", "svg": self.svg[-1] if self.svg else None,
              "parents": [p["attrs"].get("class", "") for p in self.stack]}
        self.elements.append(el)
        if tag not in ("br", "meta", "img", "input", "hr", "link", "wbr"):
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if self.stack and self.stack[-1]["tag"] == tag:
            self.stack.pop()
        if tag == "svg":
            self.svg.pop()

    def handle_endtag(self, tag):
        if not any(e["tag"] == tag for e in self.stack):
            return
        while self.stack:
            el = self.stack.pop()
            if el["tag"] == tag:
                break
        if tag == "svg" and self.svg:
            self.svg.pop()

    def handle_data(self, data):
        for e in self.stack:  # textContent: the text of every descendant
            e["text"] += data


def parse_dom(html):
    d = Dom()
    d.feed(html)
    return d.elements


def by_id(els):
    return {e["attrs"]["id"]: e for e in els if "id" in e["attrs"]}


def classes(e):
    return e["attrs"].get("class", "").split()


def read_png(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into (w, h, rows of RGB)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if f == 2:
            line = bytearray((x + y) & 255 for x, y in zip(line, prev))
        elif f in (1, 3, 4):
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                if f == 1:
                    line[x] = (line[x] + a) & 255
                elif f == 3:
                    line[x] = (line[x] + (a + b) // 2) & 255
                else:
                    c = prev[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, Pixels(rows, bpp)


class Pixels:
    """rows[y][x] -> (r, g, b) over unfiltered PNG lines."""

    def __init__(self, lines, bpp):
        self.lines, self.bpp = lines, bpp

    def __getitem__(self, y):
        line, bpp = self.lines[y], self.bpp
        return _Row(line, bpp)

    def __len__(self):
        return len(self.lines)


class _Row:
    def __init__(self, line, bpp):
        self.line, self.bpp = line, bpp

    def __getitem__(self, x):
        o = x * self.bpp
        return tuple(self.line[o:o + 3])


def not_blank(png, what):
    w, h, rows = read_png(png)
    colours, ink, n = set(), 0, 0
    for y in range(0, h, 3):
        row = rows[y]
        for x in range(0, w, 3):
            p = row[x]
            colours.add(p)
            ink += p != (255, 255, 255)
            n += 1
    frac = ink / n
    check(len(colours) > 20 and frac > 0.01, f"screenshot of {what} is not blank ({w}x{h}, {len(colours)} colours, "
                                             f"{100 * frac:.1f} % ink)")


def run(args, **kw):
    r = subprocess.run([HEADSEP] + args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(r.stderr)
    check(r.returncode == 0, "headsep " + " ".join(args[:6]) + " ...")
    return r


def seed_contexts():
    """{scenario: [(x, y) of single, head1, head2]} from the seed's own printed output."""
    out, name = {}, None
    for line in open(os.path.join(SOURCE, "tests/seed/expected-output.txt"), encoding="utf-8"):
        m = re.match(r"\[(\w+)\]", line)
        if m:
            name = m.group(1)
            out[name] = []
        m = re.match(r"(single_head|head1|head2)_context\s*= \[([-0-9.]+), ([-0-9.]+)\]", line)
        if m:
            out[name].append((float(m.group(2)), float(m.group(3))))
    return out


def translate(s):
    m = re.search(r"translate\(([-0-9.e]+)[ ,]([-0-9.e]+)\)", s or "")
    return (float(m.group(1)), float(m.group(2))) if m else None


def axis_fit(els, svg_id, axis):
    """(pixel, value) of the first and last tick the figure drew on one axis."""
    pts = []
    for e in els:
        if e["svg"] == svg_id and e["tag"] == "g" and "tick" in classes(e) and f"axis {axis}" in e["parents"]:
            t = translate(e["attrs"].get("transform"))
            pts.append((t[0] if axis == "x" else t[1], float(e["attrs"]["data-value"])))
    assert len(pts) >= 2, (svg_id, axis, pts)
    return pts[0], pts[-1]


def axis_map(els, svg_id, axis):
    """Linear pixel -> data map of one axis, fitted through the ticks the figure drew."""
    (p0, v0), (p1, v1) = axis_fit(els, svg_id, axis)
    return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0)


def axis_px(els, svg_id, axis):
    """The inverse: data -> pixel."""
    (p0, v0), (p1, v1) = axis_fit(els, svg_id, axis)
    return lambda v: p0 + (v - v0) * (p1 - p0) / (v1 - v0)


def glyph_check(tmp, example_html):
    """Korean tokens render as glyphs, not tofu: each distinct character of the seed's tokens,
    drawn on a canvas in the report's own font stack, gives a different bitmap, and none is the
    box a code point no font has gives (headless Chromium, fontconfig's fallback as a user gets)."""
    css = open(example_html, encoding="utf-8").read()
    family = re.search(r"body\{font-family:([^;}]+)", css).group(1)
    tokens = ["정지결정", "압력이상", "복귀조건"]
    page = os.path.join(tmp, "glyphs.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write("""<!DOCTYPE html><meta charset="utf-8"><body><pre id="out"></pre><script>
const font = "32px " + %s;
function pix(ch) {
  const c = document.createElement("canvas"); c.width = c.height = 48;
  const g = c.getContext("2d"); g.font = font; g.fillStyle = "#000"; g.fillText(ch, 4, 38);
  return Array.from(g.getImageData(0, 0, 48, 48).data.filter((v, i) => i %% 4 == 3)).join(",");
}
const chars = [...new Set([...%s.join("")])];
const maps = chars.map(pix), box = pix("\\u{10FFFD}"), box2 = pix("\\u{10FFFC}");
document.getElementById("out").textContent = JSON.stringify({chars: chars.length, distinct: new Set(maps).size,
  tofu: maps.filter(m => m === box).length, boxes_equal: box === box2, blank: maps.filter(m => !/[1-9]/.test(m)).length});
</script>""" % (json.dumps(family), json.dumps(tokens)))
    dom, _ = browse("file://" + page, tmp, ["--dump-dom"])
    m = re.search(r'<pre id="out">([^<]*)</pre>', dom)
    check(m is not None, "glyphs: the canvas page ran")
    if not m:
        return
    r = json.loads(m.group(1).replace("&quot;", '"'))
    check(r["boxes_equal"], "glyphs: the detector sees two unassigned code points as the same box (it can see tofu)")
    check(r["tofu"] == 0 and r["blank"] == 0 and r["distinct"] == r["chars"],
          f"glyphs: the seed's {r['chars']} Hangul syllables render as {r['distinct']} distinct glyphs in the report's "
          f"font stack, {r['tofu']} as tofu (install fonts-noto-cjk or fonts-nanum: scripts/setup.sh)")


def collision_check(tmp, pages):
    """In the rendered seed plots (the example, the 100k run, the model's layers, a run whose
    baseline and heads coincide), no label's box
    meets a marker's or another label's (getBoundingClientRect in Chromium, 1 px tolerance), and
    every baseline of an opaque point set keeps some of its box uncovered by the opaque head
    markers painted after it."""
    svgs = []
    for path in pages:
        svgs += re.findall(r'<svg[^>]*class="fig seed-plot".*?</svg>', open(path, encoding="utf-8").read(), re.S)
    page = os.path.join(tmp, "labels.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write('<!DOCTYPE html><meta charset="utf-8"><body>' + "".join(
            s.replace(' id="', ' data-id="', 1) for s in svgs) + """<pre id="out"></pre><script>
const hits = [];
const meets = (a, b) => a.left + 1 < b.right && b.left + 1 < a.right && a.top + 1 < b.bottom && b.top + 1 < a.bottom;
let labels = 0;
for (const svg of document.querySelectorAll("svg.seed-plot")) {
  const ls = [...svg.querySelectorAll("text.separation-label")].map(e => [e.textContent, e.getBoundingClientRect()]);
  const ms = [...svg.querySelectorAll("path.marker")].map(e => [e.getAttribute("class"), e.getBoundingClientRect()]);
  labels += ls.length;
  ls.forEach(([t, r], i) => {
    ms.forEach(([c, m]) => { if (meets(r, m)) hits.push(svg.dataset.id + ": '" + t + "' on " + c); });
    ls.slice(i + 1).forEach(([u, q]) => { if (meets(r, q)) hits.push(svg.dataset.id + ": '" + t + "' on '" + u + "'"); });
  });
}
// The grey baseline must keep some area that no opaque head marker painted after it covers (it
// hid under the heads in a model's layer-0 plot): of 9 x 9 points of its box, a quarter free.
let baselines = 0, freest = 81;
const opaque = e => !e.hasAttribute("fill-opacity");
for (const svg of document.querySelectorAll("svg.seed-plot")) {
  const ms = [...svg.querySelectorAll("path.marker")];
  ms.forEach((m, i) => {
    if (m.dataset.head !== "0" || ![...m.parentNode.querySelectorAll("path.marker")].some(o => o.dataset.head !== "0" && opaque(o)))
      return;  // a faded set's baseline (its heads are faded too)
    baselines++;
    const b = m.getBoundingClientRect();
    const over = ms.slice(i + 1).filter(o => o.dataset.head !== "0" && opaque(o)).map(o => o.getBoundingClientRect());
    let free = 0;
    for (let a = 0; a < 9; a++)
      for (let c = 0; c < 9; c++) {
        const x = b.left + (a + 0.5) * b.width / 9, y = b.top + (c + 0.5) * b.height / 9;
        free += !over.some(r => x > r.left && x < r.right && y > r.top && y < r.bottom);
      }
    freest = Math.min(freest, free);
    if (free < 20) hits.push(svg.dataset.id + ": the baseline of " + m.parentNode.dataset.report + " is under the heads (" + free + "/81 free)");
  });
}
document.getElementById("out").textContent = JSON.stringify({plots: document.querySelectorAll("svg.seed-plot").length, labels,
                                                             baselines, freest, hits});
</script>""")
    dom, _ = browse("file://" + page, tmp, ["--dump-dom"])
    m = re.search(r'<pre id="out">([^<]*)</pre>', dom)
    check(m is not None, "labels: the measuring page ran")
    if m:
        r = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&#39;", "'"))
        check(r["labels"] > 0 and r["baselines"] > 0 and not r["hits"],
              f"labels: {r['labels']} labels in {r['plots']} seed plots meet no marker and no other label; "
              f"{r['baselines']} baselines keep an area no head covers (at least {r['freest']}/81 of the box)" + (f" ({r['hits'][:3]})" if r["hits"] else ""))


def coincident_run(tmp):
    """A CSV whose heads weigh the tokens as the baseline does: baseline and heads at one point."""
    csv = os.path.join(tmp, "same.csv")
    with open(csv, "w", encoding="utf-8") as f:
        f.write("report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,"
                "head2_weight\nr1,same,a,1,0,0.5,0.7,0.7,0.7\nr1,same,b,0,1,0.2,0.3,0.3,0.3\n")
    page = os.path.join(tmp, "same.html")
    run(["run", "--input", csv, "-q", "--report-html", page])
    return page


def finish_checks(tmp, doms, ex, att, mod):
    """Tokens and tofu, label collisions, hover values, the table of contents, page weight."""
    glyph_check(tmp, ex)
    collision_check(tmp, [p for p in doms if p != att] + [coincident_run(tmp)])
    toks = by_id(doms[ex]).get("seed-tokens")
    check(toks is not None and "정지결정" in toks["text"] and "복귀조건" in toks["text"],
          "example: the page lists the seed's tokens (정지결정, 압력이상, 복귀조건)")
    for path, els in doms.items():
        name = os.path.basename(path)
        nav = by_id(els).get("toc")
        links = [e["attrs"]["href"][1:] for e in els if e["tag"] == "a" and "toc" in " ".join(e["parents"]) + " "
                 and e["attrs"].get("href", "").startswith("#")]
        ids = by_id(els)
        check(nav is not None and links and all(l in ids for l in links),
              f"{name}: a table of contents whose {len(links)} links all land on the page")
        dangling = [e["attrs"]["href"] for e in els if e["tag"] == "a" and e["attrs"].get("href", "").startswith("#")
                    and e["attrs"]["href"][1:] not in ids]
        check(not dangling, f"{name}: no link to an anchor the page lacks" + (f" ({dangling[:3]})" if dangling else ""))
    # Numbers on hover: histogram bars, map cells (key, weight; the row is the query), heatmap cells.
    bars = [e for e in doms[ex] if e["svg"] == "dist-head_separation" and "bar" in classes(e)]
    check(bars and all("report" in b["text"] and "…" in b["text"] for b in bars),
          f"example: every histogram bar has its range and count on hover ({len(bars)} bars)")
    axes = [e for e in doms[ex] if e["svg"] == "dist-head_separation" and "count-axis" in classes(e)]
    check(len(axes) == 3, "example: each histogram row has a count axis")
    maps = [(att, "map-0-0-h1")] + ([(mod, "map-0-0-h1")] if mod else [])
    for path, mid in maps:
        cells = [e for e in doms[path] if e["svg"] == mid and e["tag"] == "use"]
        fig = by_id(doms[path])[mid]
        n = len([e for e in doms[path] if e["svg"] == mid and "key" in classes(e)])
        # A cell names its key and weight; its row (g.row, data-query) is the query, outlined on hover.
        ok = cells and all(re.match(r".+: [0-9.e-]+$", c["text"]) for c in cells)
        rows = [e for e in doms[path] if e["svg"] == mid and e["tag"] == "g" and "row" in classes(e)]
        check(ok and len(cells) % n == 0 and len(rows) * n == len(cells),
              f"{os.path.basename(path)}: every cell of {mid} has key: weight on hover, one row group per query "
              f"({len(cells)} cells, {n} keys, report {fig['attrs'].get('data-report')})")
    for path in [att] + ([mod] if mod else []):
        size = os.path.getsize(path)
        check(size <= 1_500_000, f"{os.path.basename(path)}: {size / 1e6:.2f} MB, within 1.5 MB")


def main():
    tmp = tempfile.mkdtemp(prefix="headsep-browser-")
    try:
        # ---- the reports
        ex = os.path.join(tmp, "example.html")
        run(["example", "--report-html", ex, "--plot-svg", os.path.join(tmp, "svg")])
        big = os.path.join(tmp, "big.html")
        run(["run", "-s", "ops-reports", "-p", "reports=100000", "-w", "axis-focus", "-q", "--report-html", big])
        att = os.path.join(tmp, "attention.html")
        run(["run", "-s", "ops-reports", "-p", "reports=500", "-p", "names=true", "-p", "d_model=32", "-w", "qkv",
             "-p", "heads=4", "-q", "--report-html", att])
        sw = os.path.join(tmp, "sweep.html")
        run(["sweep", "-s", "ops-reports", "-p", "reports=5000", "-w", "axis-focus", "-q",
             "--vary", "axis-focus.single_sharpness=0.25:4:9", "--report-html", sw])

        # A real model (all-MiniLM-L6-v2, fetched by scripts/test.sh) when it is there.
        model_dir = os.environ.get("HEADSEP_MODEL_DIR") or os.path.join(
            os.environ.get("HEADSEP_MODEL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache/headsep"), "all-minilm-l6-v2")
        mod = os.path.join(tmp, "model.html")
        have_model = os.path.exists(os.path.join(model_dir, "model.safetensors"))
        if have_model:
            run(["run", "--model", model_dir, "-s", "ops-text", "-p", "reports=40", "-q", "--report-html", mod])
        else:
            print("NOTE: no model in " + model_dir + ": the model report is not checked here (scripts/test.sh fetches it)")

        expected = {
            ex: ["run-header", "seed-plot-0", "seed-plot-1", "seed-plot-2", "dist-head_separation", "dist-diff-0",
                 "dist-diff-3"],
            big: ["run-header", "seed-plot-0", "seed-plot-2", "dist-head_separation", "dist-diff-3"],
            att: ["run-header", "seed-plot-0", "attn-entropy-0", "attn-confidence-0", "js-0", "grid-0", "map-0-0-h0",
                  "map-0-0-h4", "map-0-1-h4"],
            sw: ["run-header", "sweep"],
        }
        if have_model:
            expected[mod] = ["run-header", "model-sep-0", "model-js-0", "model-entropy-0", "seed-plot-0", "seed-plot-5",
                             "attn-entropy-0", "attn-separation-5", "map-0-0-h0", "map-5-0-h12"]
        doms = {}
        for path, ids in expected.items():
            name = os.path.basename(path)
            dom, err = browse("file://" + path, tmp, ["--dump-dom"])
            bad = console_errors(err)
            check(not bad, f"{name}: no console errors or failed requests" + ("" if not bad else ": " + bad[0][:300]))
            els = parse_dom(dom)
            doms[path] = els
            found = by_id(els)
            missing = [i for i in ids if i not in found]
            check(not missing, f"{name}: figures present in the rendered DOM ({len(ids)} ids)" +
                  (f", missing {missing}" if missing else ""))
            # Offline: nothing in the page refers to another file or host.
            ext = [e for e in els if any(k in e["attrs"] and re.match(r"(https?:|//|file:)", e["attrs"][k] or "")
                                         for k in ("src", "href"))]
            scripts = [e for e in els if e["tag"] == "script"]
            inline = [e for e in scripts if "src" not in e["attrs"]] if path in (att, mod) else []
            check(not ext and not any(e["tag"] in ("link", "img", "iframe") for e in els) and len(inline) == len(scripts)
                  and len(scripts) == (2 if path in (att, mod) else 0),
                  f"{name}: no links or external resources; scripts: only the head view's, inline ({len(scripts)})")
            png = os.path.join(tmp, name + ".png")
            browse("file://" + path, tmp, ["--screenshot=" + png, "--window-size=1024,1024"])
            not_blank(png, name)

        # ---- counts of what was drawn
        els = doms[ex]
        for i in range(3):
            markers = [e for e in els if e["svg"] == f"seed-plot-{i}" and "marker" in classes(e)]
            check(len(markers) == 3, f"example: seed-plot-{i} has 3 markers (baseline, head 1, head 2)")
        header = by_id(els)["hdr-command"]["text"]
        check("headsep" in header and "example" in header, "example: the header shows the command line")
        els = doms[big]
        check("100,000" in by_id(els)["hdr-reports"]["text"], "100k run: the header counts 100,000 reports")
        sets = [e for e in els if e["svg"] == "seed-plot-0" and e["tag"] == "g" and "point-set" in classes(e)]
        check(len(sets) == 6, f"100k run: seed plot draws the top 5 reports and the mean ({len(sets)} sets)")
        rows = [e for e in els if e["svg"] == "dist-head_separation" and "row" in classes(e)]
        check(len(rows) == 3, "100k run: head_separation histogram has one row per scenario on one axis")
        qs = [e for e in els if e["svg"] == "dist-head_separation" and e["tag"] == "line" and "q" in classes(e)]
        check(len(qs) == 9, "100k run: p10/p50/p90 marked in every row")
        els = doms[att]
        maps = [e for e in els if e["tag"] == "svg" and "attention-map" in classes(e)]
        check(len(maps) == 10 * 5, f"attention run: maps for the top 10 reports x (baseline + 4 heads) ({len(maps)})")
        toks = [e["text"] for e in els if e["svg"] == "map-0-0-h1" and "token" in classes(e)]
        check(len(toks) >= 6 and all(toks), f"attention run: token labels on the map axes ({toks[:4]})")
        cells = [e for e in els if e["svg"] == "js-0" and "cell" in classes(e)]
        check(len(cells) == 16, "attention run: 4 x 4 Jensen-Shannon heatmap")
        els = doms[sw]
        pts = [e for e in els if e["svg"] == "sweep" and "marker" in classes(e)]
        check(len(pts) == 9 * 3, f"sweep: 9 values x 3 scenarios plotted ({len(pts)})")

        if have_model:
            cells = [e for e in doms[mod] if e["svg"] == "model-sep-0" and "cell" in classes(e)]
            check(len(cells) == 72, f"model run: 6 layers x 12 heads grid of separation ({len(cells)} cells)")
            links = [e for e in doms[mod] if e["svg"] == "model-sep-0" and e["tag"] == "a"
                     and (e["attrs"].get("href") or "").startswith("#map-")]
            check(len(links) == 72, f"model run: every grid cell links to its head's map ({len(links)} links)")

        # ---- the seed plot: markers where the seed's contexts put them, read back from the DOM
        els = doms[ex]
        seed = seed_contexts()
        for i, name in enumerate(["balanced_heads", "decision_vs_condition_split", "condition_heavy_both_heads"]):
            svg_id = f"seed-plot-{i}"
            fig = by_id(els)[svg_id]
            check(fig["attrs"].get("data-scenario") == name, f"{svg_id} is scenario {name}")
            fx, fy = axis_map(els, svg_id, "x"), axis_map(els, svg_id, "y")
            for h, (x, y) in enumerate(seed[name]):
                m = [e for e in els if e["svg"] == svg_id and f"head-{h}" in classes(e) and "marker" in classes(e)]
                p = translate(m[0]["attrs"]["transform"])
                gx, gy = fx(p[0]), fy(p[1])
                check(abs(gx - x) < 0.005 and abs(gy - y) < 0.005,
                      f"{svg_id} head {h}: drawn at ({gx:.4f}, {gy:.4f}), the seed's context is ({x}, {y})")

        # ---- and from the pixels Chromium painted (the standalone SVG of the first scenario)
        png = os.path.join(tmp, "seed0.png")
        browse("file://" + os.path.join(tmp, "svg", "seed-plot-0.svg"), tmp, ["--screenshot=" + png, "--window-size=414,374"])
        w, h, rows = read_png(png)
        els_svg = parse_dom(open(os.path.join(tmp, "svg", "seed-plot-0.svg"), encoding="utf-8").read())
        tx, ty = axis_px(els_svg, "seed-plot-0", "x"), axis_px(els_svg, "seed-plot-0", "y")
        colours = {0: (0x80, 0x80, 0x80), 1: (0x00, 0x72, 0xB2), 2: (0xE6, 0x9F, 0x00)}
        for hd, (x, y) in enumerate(seed["balanced_heads"]):
            px_, py_ = tx(x), ty(y)
            hits = [(cx, cy) for cy in range(max(0, int(py_) - 12), min(h, int(py_) + 13))
                    for cx in range(max(0, int(px_) - 12), min(w, int(px_) + 13)) if rows[cy][cx] == colours[hd]]
            if len(hits) < 15:
                check(False, f"screenshot: head {hd} marker painted near ({px_:.1f}, {py_:.1f}) ({len(hits)} pixels)")
                continue
            cx = sum(p[0] for p in hits) / len(hits) + 0.5
            cy = sum(p[1] for p in hits) / len(hits) + 0.5
            # Triangles' centroids sit below their anchor; the glyphs are centred within ~1.5 px.
            check(abs(cx - px_) < 2.0 and abs(cy - py_) < 2.5,
                  f"screenshot: head {hd} painted at ({cx:.1f}, {cy:.1f}), expected ({px_:.1f}, {py_:.1f})")
        finish_checks(tmp, doms, ex, att, mod if have_model else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"\n{len(failures)} check(s) failed")
        return 1
    print("\nall browser checks passed")
    return 0


if __name__ == "__main__":
    CHROMIUM = chromium()
    if not CHROMIUM:
        print("=" * 72)
        print("SKIPPED: Chromium is not installed, so the reports were NOT checked in a browser.")
        print("Install it (scripts/setup.sh does: apt-get install chromium) and run again.")
        print("=" * 72)
        sys.exit(77)
    sys.exit(main())
