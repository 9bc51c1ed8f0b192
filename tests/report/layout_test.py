#!/usr/bin/env python3
"""The reports as people read them, measured in headless Chromium (DevTools protocol, as
head_view_test.py):

  - legible maps: at window widths 1280, 1920 and 2560 px, with every <details> open, no figure
    (svg.fig) renders narrower or shorter than its own width/height attributes (a flex row used to
    squeeze 340 px maps to ~100 px);
  - head identities: a qkv run with 32 heads gives 32 distinct (colour, dash) pairs in the head
    view, each head's checkbox inside its own label with its name; "none", "only" and "all" check
    what they say;
  - tokens as text: a GPT-2 (byte-level) and a Llama (byte fallback) fixture's maps and head view
    show "␣" for spaces and the decoded Korean characters, the raw piece in the label's <title>;
  - --attention-reports with a report: the head view shows that report whole (33 tokens), with a
    thumbnail per layer and head.

Usage: layout_test.py HEADSEP_BINARY SOURCE_DIR (exit 77, loudly, without Chromium).
"""
import csv
import json
import os
import shutil
import sys
import tempfile

import browser_test as bt
import head_view_test as hv

check = bt.check
WIDTHS = (1280, 1920, 2560)

# Every figure's rendered box against its attributes, every <details> opened first.
SIZES = """(() => { document.querySelectorAll("details").forEach(d => d.open = true);
  return [...document.querySelectorAll("svg.fig, #hv-svg")].map(e => { const r = e.getBoundingClientRect();
    return {id: e.id, w: r.width, h: r.height, aw: +e.getAttribute("width"), ah: +e.getAttribute("height")}; }); })()"""
HEADS = """[...document.querySelectorAll("#hv-heads label.hv-head")].map(l => {
  const c = l.querySelector("input"), line = l.querySelector("line");
  return {head: c ? +c.dataset.head : -1, text: l.textContent, colour: line.getAttribute("stroke"),
          dash: line.getAttribute("stroke-dasharray"), inside: !!c}; })"""
CHECKED = "[...document.querySelectorAll('#hv-heads input')].filter(c => c.checked).map(c => +c.dataset.head)"
KEYS = """[...document.querySelectorAll('#hv-svg text.hv-key')].map(e => [e.firstChild.nodeValue,
  e.querySelector('title').textContent])"""
MAP_KEYS = """[...document.querySelectorAll('svg.attention-map')].slice(0, 1).flatMap(s =>
  [...s.querySelectorAll('text.token.key')].map(e => [e.firstChild.nodeValue, (e.querySelector('title') || {}).textContent || ""]))"""


def widths(cdp, page, what):
    s = cdp.open("file://" + page)
    for w in WIDTHS:
        cdp.send("Emulation.setDeviceMetricsOverride", s, width=w, height=1200, deviceScaleFactor=1, mobile=False)
        figs = cdp.js(s, SIZES)
        bad = [f for f in figs if f["w"] + 0.5 < f["aw"] or f["h"] + 0.5 < f["ah"]]
        check(figs and not bad, f"{what} at {w} px: {len(figs)} figures render at least their own size"
              + (f"; {len(bad)} squeezed, e.g. {bad[:2]}" if bad else ""))
    return s


def write_texts(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([["report_id", "text", "scenario"]] + rows)


def main():
    tmp = tempfile.mkdtemp(prefix="headsep-layout-")
    cdp = None
    try:
        ex = os.path.join(tmp, "example.html")
        bt.run(["example", "--report-html", ex])
        x = os.path.join(tmp, "x.safetensors")
        hv.tensor_input(x, 3, 7, 64)
        att = os.path.join(tmp, "qkv32.html")
        bt.run(["run", "-s", "tensor", "-p", "path=" + x, "-w", "qkv", "-p", "heads=32", "-q", "--report-html", att])
        texts = os.path.join(tmp, "texts.csv")
        write_texts(texts, [["k0", "안녕하세요 the pump stops", "mixed"], ["k1", "정지결정 after the alarm", "mixed"],
                            ["e0", " ".join(["the flow is checked and the valve is closed"] * 4), "long"]])
        pages = {"example": ex, "qkv, 32 heads": att}
        fixtures = os.path.join(bt.SOURCE, "tests/model/fixtures/decoder")
        for name in ("gpt2", "llama"):
            page = os.path.join(tmp, name + ".html")
            pick = ["--attention-reports", "id:e0"] if name == "gpt2" else []  # the head view's whole report
            bt.run(["run", "--model", os.path.join(fixtures, name), "-s", "text", "-p", "path=" + texts, "-q",
                    "--report-html", page] + pick)
            pages[name] = page
        cdp = hv.Cdp(tmp)
        sessions = {what: widths(cdp, page, what) for what, page in pages.items()}

        s = sessions["qkv, 32 heads"]
        heads = cdp.js(s, HEADS)
        ids = {(h["colour"], h["dash"] or "") for h in heads if h["head"] > 0}
        check(len(heads) == 33 and len(ids) == 32, f"32 heads: 32 distinct (colour, dash) pairs ({len(ids)})")
        check(all(h["inside"] and (("head %d" % h["head"]) in h["text"] if h["head"] else "baseline" in h["text"])
                  for h in heads), "each head's checkbox sits inside its own label, with its name")
        cdp.js(s, "document.getElementById('hv-none').click()")
        check(cdp.js(s, CHECKED) == [], "'none' unchecks every head")
        cdp.js(s, "document.querySelectorAll('#hv-heads button.hv-only')[9].click()")
        check(cdp.js(s, CHECKED) == [9], "'only' on head 9 checks head 9 alone")
        cdp.js(s, "document.getElementById('hv-all').click()")
        check(cdp.js(s, CHECKED) == list(range(1, 33)), "'all' checks heads 1..32")
        cdp.js(s, "document.querySelector('#hv-grid canvas[data-head=\"5\"]').click()")
        check(cdp.js(s, CHECKED) == [5], "a click on head 5's thumbnail opens head 5 alone")

        for name in ("gpt2", "llama"):
            s = sessions[name]
            sel = cdp.js(s, "(() => { const r = document.getElementById('hv-report'); const i = [...r.options]"
                            ".findIndex(o => o.text.includes('report k0')); r.value = String(i);"
                            " r.dispatchEvent(new Event('change')); return i; })()")
            keys = cdp.js(s, KEYS)
            shown = "".join(k for k, _ in keys)
            check(sel >= 0 and "안" in shown and "␣" in shown and not any(c in shown for c in "Ġ▁"),
                  f"{name}: the head view's keys are text (␣ for spaces, Korean decoded): {shown[:60]!r}")
            check(any(k != t.split(" (token ")[0] or " (token " in t for k, t in keys),
                  f"{name}: a decoded key carries its raw token on hover ({keys[:2]})")
            mk = cdp.js(s, MAP_KEYS)
            check(mk and not any("Ġ" in k or "▁" in k for k, _ in mk) and any(t for _, t in mk),
                  f"{name}: the maps' key labels are text, raw pieces as <title> ({mk[:3]})")
        s = sessions["gpt2"]
        cdp.js(s, "(() => { const r = document.getElementById('hv-report'); r.value = String([...r.options]"
                  ".findIndex(o => o.text.includes('report e0 (chosen)'))); r.dispatchEvent(new Event('change')); })()")
        note = cdp.js(s, "document.getElementById('hv-note').textContent")
        n = len(cdp.js(s, KEYS))
        queries = cdp.js(s, "document.querySelectorAll('#hv-svg text.hv-query').length")
        thumbs = cdp.js(s, "document.querySelectorAll('#hv-grid canvas').length")
        check(n > 12 and queries == n and f"all {n} tokens" in note and thumbs == 2 * 5,
              f"--attention-reports id:e0: the head view shows all {n} tokens as queries and keys ({note}), "
              f"a thumbnail per layer and head ({thumbs})")
        check(not cdp.errors(), f"no script errors in the pages ({cdp.errors()[:1]})")
    finally:
        if cdp:
            cdp.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if bt.failures:
        print(f"\n{len(bt.failures)} check(s) failed")
        return 1
    print("\nall layout checks passed")
    return 0


if __name__ == "__main__":
    bt.CHROMIUM = bt.chromium()
    if not bt.CHROMIUM:
        print("=" * 72 + "\nSKIPPED: Chromium is not installed: the layout was NOT checked in a browser.\n"
              "Install it (scripts/setup.sh does: apt-get install chromium) and run again.\n" + "=" * 72)
        sys.exit(77)
    sys.exit(main())
