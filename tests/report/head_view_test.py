#!/usr/bin/env python3
"""The report's interactive head view, driven in headless Chromium over the DevTools protocol
(--remote-debugging-pipe, Python's standard library only).

For a qkv run on tensor input and a MiniLM run on three texts (their scenario's name holds
"</script>" and quotes): select a report, a layer and heads, hover
(and focus, and click) a query token with real input events, and check the drawn lines against
the run's own --attention JSONL (not the page's blob): one line per checked head and key with a
weight, ending at that key's token, stroke-opacity = the weight (±2e-4: the page keeps 4 decimals),
stroked in the colour the seed plot's marker of that head has. With scripts disabled, everything
outside the head view's section is the same as with them, and the figures are those of the file.

Usage: head_view_test.py HEADSEP_BINARY SOURCE_DIR (exit 77, loudly, without Chromium).
"""
import csv
import json
import os
import random
import select
import shutil
import struct
import subprocess
import sys
import tempfile

import browser_test as bt  # its check(), failures, run(), Chromium flags and DOM parser

check = bt.check


class Cdp:
    """One headless Chromium spoken to over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-framed JSON)."""

    def __init__(self, tmp):
        to_r, self.w = os.pipe()
        self.r, from_w = os.pipe()

        def fds():  # in the child: the pipe ends as fds 3 and 4 (dup2 leaves them inheritable)
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3), os.dup2(b, 4)

        flags = [f for f in bt.FLAGS if not f.startswith(("--enable-logging", "--v="))]
        self.proc = subprocess.Popen([bt.CHROMIUM] + flags + ["--user-data-dir=" + tempfile.mkdtemp(dir=tmp),
                                                             "--remote-debugging-pipe", "--window-size=1000,800"],
                                     preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r), os.close(from_w)
        self.buf, self.id, self.events = b"", 0, []

    def _recv(self):
        while b"\0" not in self.buf:
            ready, _, _ = select.select([self.r], [], [], 30)
            chunk = os.read(self.r, 1 << 20) if ready else b""
            if not chunk:
                raise RuntimeError("Chromium stopped answering")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, session=None, **params):
        self.id += 1
        msg = {"id": self.id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._recv()
            if m.get("id") == self.id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, session):
        for i, m in enumerate(self.events):
            if m.get("method") == name and m.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._recv()
            if m.get("method") == name and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def open(self, url, scripts=True, session=None):
        """url loaded in a new tab, or again in `session`'s; returns the tab's session id."""
        s = session
        if s is None:
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            s = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.send("Page.enable", s), self.send("Runtime.enable", s)
        self.send("Emulation.setScriptExecutionDisabled", s, value=not scripts)
        self.send("Page.navigate", s, url=url)
        self.wait_event("Page.loadEventFired", s)
        return s

    def js(self, session, expr):
        r = self.send("Runtime.evaluate", session, expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def mouse(self, session, kind, x, y):
        extra = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
        self.send("Input.dispatchMouseEvent", session, type=kind, x=x, y=y, **extra)

    def key(self, session, key, code):
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", session, type=kind, key=key, code=code,
                      windowsVirtualKeyCode=13 if key == "Enter" else 0)

    def errors(self):
        return [m for m in self.events if m.get("method") == "Runtime.exceptionThrown" or
                (m.get("method") == "Runtime.consoleAPICalled" and m["params"].get("type") == "error")]

    def close(self):
        try:
            self.send("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tensor_input(path, reports, n, d):
    """x [reports, n, d] and features [reports, n, 3] as F32 safetensors, report ids r0, r1, ..."""
    rng = random.Random(24)
    x = [rng.gauss(0, 1) for _ in range(reports * n * d)]
    f = [rng.random() for _ in range(reports * n * 3)]
    header, data = {}, b""
    for name, shape, vals in (("features", [reports, n, 3], f), ("x", [reports, n, d], x)):
        raw = struct.pack(f"<{len(vals)}f", *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"features": "decision_axis,evidence_axis,condition_axis",
                              "report_ids": ",".join(f"r{i}" for i in range(reports))}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)) + h + data)


# Page-side probes (results as JSON-ready values).
SELECT = """(() => {
  const rep = document.getElementById("hv-report");
  const i = [...rep.options].findIndex(o => o.text.includes(" · report %(report)s ("));
  if (i < 0) return "no such report";
  rep.value = String(i); rep.dispatchEvent(new Event("change"));
  const lay = document.getElementById("hv-layer");
  const j = [...lay.options].findIndex(o => o.text === "layer %(layer)d");
  if (j < 0) return "no such layer";
  lay.value = String(j); lay.dispatchEvent(new Event("change"));
  for (const c of document.querySelectorAll("#hv-heads input")) {
    c.checked = %(heads)s.includes(+c.dataset.head); c.dispatchEvent(new Event("change"));
  }
  return "ok";
})()"""
CENTRE = """(() => { const e = document.querySelector('#hv-svg text.hv-query[data-query="%d"]');
  e.scrollIntoView({block: "center"}); const r = e.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2]; })()"""
LINES = """[...document.querySelectorAll("#hv-lines line.hv-line")].map(l => {
  const q = document.querySelector(`#hv-svg text.hv-query[data-query="${l.dataset.query}"]`);
  const k = document.querySelector(`#hv-svg text.hv-key[data-key="${l.dataset.key}"]`);
  return {head: +l.dataset.head, query: +l.dataset.query, key: +l.dataset.key, opacity: +l.getAttribute("stroke-opacity"),
          stroke: l.getAttribute("stroke"), at_query: Math.abs(+l.getAttribute("y1") - (+q.getAttribute("y") - 4)) < 0.01,
          at_key: Math.abs(+l.getAttribute("y2") - (+k.getAttribute("y") - 4)) < 0.01};
})"""
COLOURS = """Object.fromEntries([...document.querySelectorAll("svg.seed-plot path.marker")].map(
  m => [m.dataset.head, m.getAttribute("fill")]))"""
STATIC = """(() => { const b = document.body.cloneNode(true); b.querySelector("#head-view").remove();
  return b.innerHTML; })()"""


def expect_lines(lines, maps, report, layer, heads, query, keys, colours, what):
    """The drawn lines against the JSONL's rows: maps[(report, layer)] = [head 0..H][q][k]."""
    got = {(l["head"], l["key"]): l for l in lines}
    bad = [l for l in lines if l["query"] != query or not (l["at_query"] and l["at_key"])]
    want = 0
    for h in heads:
        row = maps[(report, layer)][h][query][:keys]
        for k, w in enumerate(row):
            line = got.get((h, k))
            if w >= 2e-4:
                want += 1
                if line is None or abs(line["opacity"] - w) > 1.3e-4 or line["stroke"] != colours[str(h)]:
                    bad.append(("head", h, "key", k, "weight", w, line))
            elif w < 1e-4 and line is not None:
                bad.append(("drawn at weight", w, line))
    check(lines and not bad and len(lines) >= want and all(l["head"] in heads for l in lines),
          f"{what}: {len(lines)} lines from query {query}, heads {heads}: targets, opacities (= weights) and colours "
          f"(the seed plot's) match the --attention row" + (f"; {bad[:2]}" if bad else ""))


def read_maps(path):
    """{(report_id, layer): [head 0..H][q][k]} from --attention's JSONL (qkv: layer 0)."""
    out = {}
    for line in open(path, encoding="utf-8"):
        x = json.loads(line)
        n = len(x["tokens"])
        heads = [x["single"]] + x["heads"]
        heads = [[h[q * n:(q + 1) * n] for q in range(n)] if h and not isinstance(h[0], list) else h for h in heads]
        out[(x["report_id"], x.get("layer", 0))] = heads
        out[(x["report_id"], "tokens")] = x["tokens"]
    return out


EVIL = '</script><i>x</i> & "q"'  # a scenario name: JSON-escaped in the blob, text in the view


def drive(cdp, page, maps, report, layer, heads, query, keys, what, scenario=None):
    s = cdp.open("file://" + page)
    if scenario:
        names = cdp.js(s, "[...document.querySelectorAll('#hv-report option')].map(o => o.text)")
        check(names and all(n.startswith(scenario + " · report ") for n in names),
              f"{what}: the scenario's name reaches the view as text ({names[:1]})")
    colours = cdp.js(s, COLOURS)
    r = cdp.js(s, SELECT % {"report": report, "layer": layer, "heads": json.dumps(heads)})
    check(r == "ok", f"{what}: report {report}, layer {layer} and heads {heads} selected ({r})")
    if r != "ok":
        return
    keys_shown = cdp.js(s, "[...document.querySelectorAll('#hv-svg text.hv-key')].map(e => e.firstChild.nodeValue)")
    tokens = maps[(report, "tokens")][:keys]
    check(len(keys_shown) == keys and all(t.startswith(k.rstrip("…")) for k, t in zip(keys_shown, tokens)),
          f"{what}: the view's key tokens are the report's first {keys} ({keys_shown[:4]})")
    note = cdp.js(s, "document.getElementById('hv-note').textContent")
    check(f"all {keys} tokens" in note or f"first {keys} of" in note, f"{what}: the note says how many tokens ({note})")
    x, y = cdp.js(s, CENTRE % query)
    check(cdp.js(s, LINES) == [], f"{what}: no lines before a token is hovered")
    cdp.mouse(s, "mouseMoved", x, y)
    expect_lines(cdp.js(s, LINES), maps, report, layer, heads, query, keys, colours, what + ", hover")
    cdp.mouse(s, "mouseMoved", 2, 2)
    check(cdp.js(s, LINES) == [], f"{what}: the lines go when the pointer leaves")
    # Keyboard: focus the next token (Tab from the hovered one) and keep it with Enter.
    cdp.js(s, f"document.querySelector('#hv-svg text.hv-query[data-query=\"{query}\"]').focus()")
    cdp.send("Input.dispatchKeyEvent", s, type="keyDown", key="Tab", code="Tab", windowsVirtualKeyCode=9)
    cdp.send("Input.dispatchKeyEvent", s, type="keyUp", key="Tab", code="Tab", windowsVirtualKeyCode=9)
    focused = cdp.js(s, "document.activeElement.dataset.query")
    check(focused == str(query + 1), f"{what}: Tab moves the focus to the next token ({focused})")
    expect_lines(cdp.js(s, LINES), maps, report, layer, heads, query + 1, keys, colours, what + ", focus")
    cdp.key(s, "Enter", "Enter")
    cdp.js(s, "document.activeElement.blur()")
    expect_lines(cdp.js(s, LINES), maps, report, layer, heads, query + 1, keys, colours, what + ", kept with Enter")
    # A click keeps a token too; hovering another shows that one, leaving it shows the kept one.
    cdp.mouse(s, "mousePressed", x, y), cdp.mouse(s, "mouseReleased", x, y)
    cdp.mouse(s, "mouseMoved", 2, 2)
    expect_lines(cdp.js(s, LINES), maps, report, layer, heads, query, keys, colours, what + ", kept by a click")
    static_on = cdp.js(s, STATIC)
    off = cdp.open("file://" + page, scripts=False, session=s)
    check(cdp.js(off, STATIC) == static_on, f"{what}: without scripts, everything outside the head view is the same")
    hidden = cdp.js(off, "document.getElementById('hv').offsetParent === null && [...document.querySelectorAll("
                         "'#head-view p')].some(p => p.textContent.includes('needs JavaScript') && p.offsetParent)")
    check(hidden, f"{what}: without scripts the view's controls are hidden and a note says why")
    figs = cdp.js(off, "[...document.querySelectorAll('svg.fig')].map(e => e.id)")
    in_file = [e["attrs"]["id"] for e in bt.parse_dom(open(page, encoding="utf-8").read())
               if e["tag"] == "svg" and "fig" in bt.classes(e)]
    check(figs == in_file and len(figs) > 10, f"{what}: without scripts the page shows the file's {len(in_file)} figures")


def main():
    tmp = tempfile.mkdtemp(prefix="headsep-headview-")
    cdp = None
    try:
        x = os.path.join(tmp, "x.safetensors")
        tensor_input(x, 3, 7, 16)
        att, att_maps = os.path.join(tmp, "qkv.html"), os.path.join(tmp, "qkv.jsonl")
        bt.run(["run", "-s", "tensor", "-p", "path=" + x, "-w", "qkv", "-p", "heads=3", "-q", "--report-html", att,
                "--attention", att_maps, "--attention-reports", "all"])
        model_dir = os.environ.get("HEADSEP_MODEL_DIR") or os.path.join(os.path.expanduser("~"), ".cache/headsep/all-minilm-l6-v2")
        mod, mod_maps = os.path.join(tmp, "model.html"), os.path.join(tmp, "model.jsonl")
        have_model = os.path.exists(os.path.join(model_dir, "model.safetensors"))
        if have_model:
            # Three texts under a scenario name that would end the page's <script> were it not escaped.
            texts, mod_summary = os.path.join(tmp, "texts.csv"), os.path.join(tmp, "model.json")
            with open(texts, "w", encoding="utf-8", newline="") as f:
                csv.writer(f).writerows([["report_id", "text", "scenario"]] + [[f"t{i}", t, EVIL] for i, t in enumerate(
                    ["Stop the pump: the pressure is high and the return condition is not met.",
                     "Evidence from the tank sensor confirms the decision to hold.",
                     "정지결정 after the cooling tower alarm; resume once the flow is checked."])])
            bt.run(["run", "--model", model_dir, "-s", "text", "-p", "path=" + texts, "--top", "1", "-q", "--report-html",
                    mod, "--attention", mod_maps, "--attention-reports", "all", "--summary", mod_summary])
        else:
            print("NOTE: no model in " + model_dir + ": the model page's head view is not checked")
        cdp = Cdp(tmp)
        maps = read_maps(att_maps)
        drive(cdp, att, maps, "r1", 0, [1, 3], 2, 7, "qkv on tensor input")
        if have_model:
            maps = read_maps(mod_maps)
            # --top 1: the page draws the maps of the summary's top report, that report alone.
            report = json.load(open(mod_summary))["scenarios"][0]["top"][0]["report_id"]
            n = len(maps[(report, "tokens")])
            # --attention-reports all with the report: the view holds every report whole (ChosenMaps).
            drive(cdp, mod, maps, report, 3, [2, 5, 11], 1, n, "model run, layer 3", scenario=EVIL)
        check(not cdp.errors(), f"no script errors in the pages ({cdp.errors()[:1]})")
    finally:
        if cdp:
            cdp.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if bt.failures:
        print(f"\n{len(bt.failures)} check(s) failed")
        return 1
    print("\nall head view checks passed")
    return 0


if __name__ == "__main__":
    bt.CHROMIUM = bt.chromium()
    if not bt.CHROMIUM:
        print("=" * 72 + "\nSKIPPED: Chromium is not installed: the head view was NOT checked in a browser.\n"
              "Install it (scripts/setup.sh does: apt-get install chromium) and run again.\n" + "=" * 72)
        sys.exit(77)
    sys.exit(main())
