#!/usr/bin/env python3
"""Screenshots of each report page kind at 1400 px wide for docs/REPORTS.md (docs/images/pages/):
the seed's example, a synthetic run, a qkv run, MiniLM (when fetched), the GPT-2 and Llama
fixtures on Korean and English text, a sweep and a scaling run. Each page is opened in headless
Chromium (the tests' DevTools driver, tests/report/head_view_test.py); pages with a head view get
a second picture of it with a token hovered.

Usage: scripts/report_screenshots.py [BUILD_DIR]   (default: build; MiniLM from HEADSEP_MODEL_DIR
or scripts/fetch_model.sh's cache)
"""
import base64
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "build")
sys.argv = [sys.argv[0], os.path.join(BUILD, "headsep"), HERE]  # what browser_test reads on import
sys.path.insert(0, os.path.join(HERE, "tests", "report"))
import browser_test as bt  # noqa: E402
import head_view_test as hv  # noqa: E402

OUT = os.path.join(HERE, "docs", "images", "pages")
WIDTH = 1400


def headsep(*args):
    subprocess.run([bt.HEADSEP] + list(args), check=True, stdout=subprocess.DEVNULL)


def shoot(cdp, page, name, height=1100):
    s = cdp.open("file://" + page)
    cdp.send("Emulation.setDeviceMetricsOverride", s, width=WIDTH, height=height, deviceScaleFactor=1, mobile=False)
    shots = [(name + ".png", {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1})]
    box = cdp.js(s, """(() => { const v = document.getElementById("head-view"); if (!v) return null;
      v.scrollIntoView(); const q = document.querySelector("#hv-svg text.hv-query[data-query='1']");
      if (q) q.dispatchEvent(new MouseEvent("mouseenter")); const r = v.getBoundingClientRect();
      return [r.left + scrollX, r.top + scrollY, r.width, Math.min(r.height, 1400)]; })()""")
    if box:
        shots.append((name + "-head-view.png", {"x": 0, "y": box[1], "width": WIDTH, "height": box[3], "scale": 1}))
    for file, clip in shots:
        png = cdp.send("Page.captureScreenshot", s, format="png", clip=clip, captureBeyondViewport=True)["data"]
        with open(os.path.join(OUT, file), "wb") as f:
            f.write(base64.b64decode(png))
        print("wrote docs/images/pages/" + file)


def main():
    bt.CHROMIUM = bt.chromium()
    if not bt.CHROMIUM:
        sys.exit("chromium is not installed")
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="headsep-shots-")
    texts = os.path.join(tmp, "texts.csv")
    with open(texts, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([["report_id", "text", "scenario"],
                                 ["ko", "정지결정 후 냉각탑 경보가 울렸습니다; 유량을 확인한 뒤 재개합니다.", "korean"],
                                 ["en", "Stop the pump: the pressure is high and the return condition is not met.", "english"]])
    pages = {}
    p = lambda n: pages.setdefault(n, os.path.join(tmp, n + ".html"))  # noqa: E731
    headsep("example", "--report-html", p("seed"))
    headsep("run", "-s", "ops-reports", "-p", "reports=100000", "-w", "axis-focus", "-q", "--report-html", p("synthetic"))
    headsep("run", "-s", "ops-reports", "-p", "reports=2000", "-p", "d_model=64", "-w", "qkv", "-p", "heads=12", "-q",
            "--report-html", p("qkv"))
    fixtures = os.path.join(HERE, "tests/model/fixtures/decoder")
    for name in ("gpt2", "llama"):
        headsep("run", "--model", os.path.join(fixtures, name), "-s", "text", "-p", "path=" + texts, "-q",
                "--attention-reports", "all", "--report-html", p(name))
    model = os.environ.get("HEADSEP_MODEL_DIR") or os.path.expanduser("~/.cache/headsep/all-minilm-l6-v2")
    if os.path.exists(os.path.join(model, "model.safetensors")):
        headsep("run", "--model", model, "-s", "text", "-p", "path=" + texts, "-q", "--attention-reports", "all",
                "--report-html", p("minilm"))
    headsep("sweep", "-s", "ops-reports", "-w", "axis-focus", "-q", "--vary", "axis-focus.sharpness=0.25:4:9",
            "--report-html", p("sweep"))
    headsep("scaling", "-s", "ops-reports", "-p", "reports=20000", "-w", "axis-focus", "--counts", "1,2",
            "--report-html", p("scaling"))
    cdp = hv.Cdp(tmp)
    try:
        for name, page in pages.items():
            shoot(cdp, page, name)
    finally:
        cdp.close()


if __name__ == "__main__":
    main()
