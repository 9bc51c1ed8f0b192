#!/usr/bin/env python3
"""Every kind of summary headsep writes validates against docs/summary.schema.json, carries a
`run` block that says what produced it, and stays byte-identical across threads and SIMD levels
once `run.execution` (what the docs name as varying) is removed.

Kinds: run (synthetic, CSV, qkv), model (all-MiniLM-L6-v2: $HEADSEP_MODEL_DIR, a missing model is
a failure), sweep and scaling. The run block is checked against the job: every plugin parameter
with its default, seeds, axes, threads and SIMD level as run, and a second run built only from
the run block's plugins and parameters reproduces the first summary.

Usage: summary_schema_test.py HEADSEP_BINARY SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import jsonschema

HEADSEP, SOURCE = sys.argv[1], sys.argv[2]
SCHEMA = json.load(open(os.path.join(SOURCE, "docs", "summary.schema.json")))
jsonschema.Draft202012Validator.check_schema(SCHEMA)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def model_dir():
    d = os.environ.get("HEADSEP_MODEL_DIR") or os.path.join(
        os.environ.get("HEADSEP_MODEL_CACHE") or os.path.join(os.environ.get("HOME", "/root"), ".cache/headsep"),
        "all-minilm-l6-v2")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        sys.exit("the test model is not in " + d + ": run scripts/fetch_model.sh or set HEADSEP_MODEL_DIR")
    return d


def headsep(*args):
    r = subprocess.run([HEADSEP, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stderr[-2000:])
    check(r.returncode == 0, "headsep " + " ".join(args[:6]) + " ... exits 0")
    return r


def load(path):
    with open(path) as f:
        return json.load(f)


def valid(doc, what):
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:3]:
        print("  ", list(e.path), e.message[:300])
    check(not errors, what + " validates against docs/summary.schema.json")


def masked(path):
    """The summary's text with run.execution removed, as the identity checks compare it."""
    doc = load(path)
    doc["run"].pop("execution")
    return json.dumps(doc, indent=1)


def main():
    tmp = tempfile.mkdtemp(prefix="headsep-schema-")
    out = lambda name: os.path.join(tmp, name)
    synth = ["run", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=3000", "-p", "seed=7", "--chunk", "500", "-q"]

    # kind run: synthetic, at two thread counts and two SIMD levels.
    headsep(*synth, "--threads", "1", "--summary", out("t1.json"))
    headsep(*synth, "--threads", "2", "--simd", "scalar", "--summary", out("t2.json"))
    t1, t2 = load(out("t1.json")), load(out("t2.json"))
    valid(t1, "synthetic summary")
    check(t1["schema_version"] == 1 and t1["kind"] == "run", "schema_version 1, kind run")
    run = t1["run"]
    check(run["command"] == "run" and run["headsep_version"], "run.command and headsep_version")
    scen = next(p for p in run["plugins"] if p["role"] == "scenario")
    weig = next(p for p in run["plugins"] if p["role"] == "weighting")
    check(scen["name"] == "ops-reports" and scen["params"].get("reports") == "3000", "the given parameter as given")
    check(scen["params"].get("min_tokens") == "3" and weig["params"].get("sharpness") == "3",
          "parameters left at their defaults are listed with the default")
    check(run["seeds"] == {"ops-reports": 7}, "run.seeds names the plugin's seed")
    check(run["axes"]["names"] == t1["axes"], "run.axes.names are the summary's axes")
    check(run["execution"]["threads"] == 1 and t2["run"]["execution"]["threads"] == 2, "run.execution.threads as run")
    check(t2["run"]["execution"]["simd"] == "scalar", "run.execution.simd as run")
    check("--threads 1" in run["execution"]["command_line"] and run["execution"]["chunk"] == 500,
          "run.execution: the command line and the batch size")
    check(run["execution"]["batch"] == 500, "run.execution.batch: --chunk 500 ran as asked")
    check(open(out("t1.json")).read() != open(out("t2.json")).read(), "the raw files differ (in run.execution)")
    check(masked(out("t1.json")) == masked(out("t2.json")),
          "threads 1 vs 2 and best SIMD vs scalar: identical once run.execution is removed")

    # Reproduce from the run block alone: its plugins with every parameter, its axes and options.
    again = ["run", "-s", scen["name"], "-w", weig["name"], "--axes", run["axes"]["spec"], "-q",
             "--top", run["options"]["top"], "--bins", run["options"]["bins"]]
    for p in (scen, weig):
        for k, v in p["params"].items():
            again += ["-p", p["name"] + "." + k + "=" + v]
    headsep(*again, "--summary", out("again.json"))
    a = load(out("again.json"))
    ex = a["run"]["execution"]
    check(ex["chunk"] == 8192 and 1024 <= ex["batch"] < 8192,
          "run.execution without --chunk: 8192 asked, the cache-sized batch that ran (%s)" % ex.get("batch"))
    check({k: v for k, v in a.items() if k != "run"} == {k: v for k, v in t1.items() if k != "run"},
          "a run built from the run block alone gives the same summary")

    # A mutated summary fails: the schema is not a rubber stamp.
    for what, mutate in [("no run block", lambda d: d.pop("run")),
                         ("schema_version 2", lambda d: d.__setitem__("schema_version", 2)),
                         ("execution without threads", lambda d: d["run"]["execution"].pop("threads")),
                         ("a histogram bin without count", lambda d: d["scenarios"][0]["head_separation_histogram"][0].pop("count")),
                         ("an unknown top-level member", lambda d: d.__setitem__("extra", 1))]:
        d = load(out("t1.json"))
        mutate(d)
        check(not VALIDATOR.is_valid(d), "the schema refuses a summary with " + what)

    # kind run: the seed CSV; qkv (an attention scheme: head and pair statistics).
    headsep("run", "-i", os.path.join(SOURCE, "data", "qkv-multihead-report-scenarios.csv"), "-q", "--summary", out("csv.json"))
    csv = load(out("csv.json"))
    valid(csv, "CSV summary")
    check(next(p for p in csv["run"]["plugins"] if p["role"] == "scenario")["name"] == "csv", "CSV: run.plugins names csv")
    headsep("run", "-s", "ops-reports", "-p", "reports=200", "-p", "d_model=8", "-w", "qkv", "-p", "heads=2", "-q",
            "--summary", out("qkv.json"))
    qkv = load(out("qkv.json"))
    valid(qkv, "qkv summary")
    check(qkv["run"]["precision"] == "attention f32, metrics summed in f64", "qkv: run.precision says attention f32")

    # kind model.
    m = model_dir()
    headsep("run", "-s", "ops-text", "-p", "reports=6", "--model", m, "-q", "--threads", "1", "--chunk", "2",
            "--summary", out("m1.json"))
    headsep("run", "-s", "ops-text", "-p", "reports=6", "--model", m, "-q", "--threads", "2", "--chunk", "2",
            "--summary", out("m2.json"))
    m1 = load(out("m1.json"))
    valid(m1, "model summary")
    check(m1["kind"] == "model" and m1["run"]["model"]["path"] == m and m1["run"]["model"]["name"] == m1["model"],
          "model: kind model, run.model names the encoder")
    check(m1["run"]["execution"]["chunk"] == m1["run"]["execution"]["batch"] == 2, "model: the batch is the chunk")
    strip = lambda d: {k: v for k, v in d.items() if k not in ("run", "threads", "seconds", "gflop")}
    check(strip(m1) == strip(load(out("m2.json"))), "model: threads 1 vs 2: identical but for run.execution and the timings")
    # A decoder (the Llama test fixture, GQA): model_type, causal, kv_heads, kv_head_of.
    headsep("run", "-s", "ops-text", "-p", "reports=4", "--model", os.path.join(SOURCE, "tests", "model", "fixtures",
            "decoder", "llama"), "-q", "--summary", out("llama.json"))
    llama = load(out("llama.json"))
    valid(llama, "decoder model summary")
    check(llama["kv_heads"] == 2 and llama["kv_head_of"] == [0, 0, 1, 1], "decoder: kv_heads and kv_head_of")
    check("sliding_window" not in llama, "decoder without a window: no sliding_window")
    # The same folder as a Mistral with a window of 3 tokens: sliding_window per layer, the baseline says so.
    windowed = out("mistral-like")
    shutil.copytree(os.path.join(SOURCE, "tests", "model", "fixtures", "decoder", "llama"), windowed)
    cfg = load(os.path.join(windowed, "config.json"))
    cfg.update(model_type="mistral", sliding_window=3)
    with open(os.path.join(windowed, "config.json"), "w") as f:
        json.dump(cfg, f)
    headsep("run", "-s", "ops-text", "-p", "reports=4", "--model", windowed, "-q", "--summary", out("mistral.json"))
    mistral = load(out("mistral.json"))
    valid(mistral, "windowed decoder model summary")
    check(mistral["sliding_window"] == [3, 3] and "sliding window" in mistral["baseline"],
          "windowed decoder: sliding_window per layer, named in the baseline")

    # kind sweep and scaling.
    headsep("sweep", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=200", "--vary",
            "single_sharpness=0.5:2:3", "-q", "--json", out("sweep.json"))
    sw = load(out("sweep.json"))
    valid(sw, "sweep JSON")
    check(sw["kind"] == "sweep" and next(p for p in sw["run"]["plugins"] if p["role"] == "weighting")["params"]
          ["single_sharpness"] == "0.5:2:3", "sweep: the swept parameter shows the swept range")
    headsep("scaling", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=2000", "--counts", "1,2", "-q",
            "--json", out("scaling.json"))
    sc = load(out("scaling.json"))
    valid(sc, "scaling JSON")
    check(sc["kind"] == "scaling" and sc["run"]["options"].get("counts") == "1,2", "scaling: run.options has --counts")

    shutil.rmtree(tmp, ignore_errors=True)
    print("\n%d failure(s)" % len(failures) if failures else "\nall passed")
    sys.exit(1 if failures else 0)


main()
