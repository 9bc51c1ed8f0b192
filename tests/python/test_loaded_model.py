"""headsep.model(DIR) loads the folder once: runs reuse the weights (a run works after the weights
file is gone), several Python threads may run at once, tokenize() equals `headsep tokenize`, info
and repr say what the model is; progress bars; results' reprs; errors located in the texts."""
import concurrent.futures
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import headsep
from conftest import cli

MODEL = os.environ.get("HEADSEP_MODEL_DIR")
LLAMA = os.path.join(os.environ.get("HEADSEP_SOURCE_DIR", "."), "tests", "model", "fixtures", "decoder", "llama")
pytestmark = pytest.mark.skipif(not MODEL, reason="HEADSEP_MODEL_DIR is not set (scripts/fetch_model.sh)")
TEXTS = ["pressure is too high: stop the pump", "the return condition was met", "hold; restart after the check",
         "the weather was fine"]


def measured(summary_json):
    d = json.loads(summary_json)
    for k in ("seconds", "threads", "run"):
        d.pop(k, None)
    return d


def test_the_weights_are_loaded_once(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(MODEL, folder)
    m = headsep.model(folder)
    first = m.run(TEXTS, threads=1)
    (folder / "model.safetensors").unlink()  # a run that read the weights again would fail now
    again = m.run(TEXTS, threads=1)
    assert measured(again.summary_json()) == measured(first.summary_json())
    with pytest.raises(headsep.Error, match="model.safetensors"):
        headsep.model(folder)


def test_runs_from_several_python_threads_at_once():
    m = headsep.model(MODEL)
    want = measured(m.run(TEXTS, threads=1).summary_json())
    texts = [TEXTS[i:] + TEXTS[:i] for i in range(4)]  # four different jobs, each run twice
    wants = [measured(m.run(t, threads=1).summary_json()) for t in texts]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(m.run, texts[i % 4], threads=1 + i % 2) for i in range(8)]
        got = [f.result() for f in futures]
    for i, res in enumerate(got):
        assert measured(res.summary_json()) == wants[i % 4]
        assert res.rows["report_id"].tolist()[:1] == ["0"]
    assert wants[0] == want


def test_tokenize_equals_the_cli(tmp_path):
    m = headsep.model(MODEL)
    texts = ["Stop the pump!", "", "Ünïcödé text, naïve café"]
    got = m.tokenize(texts)
    p = cli("tokenize", "--model", MODEL, *[x for t in texts for x in ("--text", t)])
    want = [json.loads(line) for line in p.stdout.splitlines()]
    assert [g["ids"] for g in got] == [w["ids"] for w in want]
    assert [g["tokens"] for g in got] == [w["tokens"] for w in want]
    assert m.tokenize("Stop the pump!") == got[0]
    short = m.tokenize(["one two three four five"], max_tokens=4)[0]
    assert len(short["ids"]) == 4 and short["truncated"]
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        m.tokenize(["ok", 3])
    with pytest.raises(ValueError, match="max_tokens"):
        m.tokenize(["ok"], max_tokens=2**40)
    # the run's token ids are the tokenizer's
    res = m.run(texts[:1])
    assert res.rows["token_ids"][0] == got[0]["ids"]


def test_info_config_and_repr():
    m = headsep.model(MODEL)
    i = m.info
    assert (i["family"], i["layers"], i["heads"], i["kv_heads"], i["hidden"]) == ("bert", 6, 12, 12, 384)
    assert i["dtype"] == "F32" and i["tokenizer"] == "wordpiece" and i["max_tokens"] == 128
    assert m.config["model_type"] == "bert" and m.config["num_hidden_layers"] == 6
    r = repr(m)
    assert "6 layers x 12 heads" in r and "F32 weights" in r and "wordpiece tokenizer" in r
    d = headsep.model(LLAMA)
    assert (d.info["family"], d.info["heads"], d.info["kv_heads"], d.info["causal"]) == ("llama", 4, 2, True)
    assert "2 key/value heads" in repr(d)
    res = m.run(TEXTS, threads=1)
    r = repr(res)
    assert r.startswith("<headsep.ModelResult ") and "4 reports" in r and f"{res._core.tokens} tokens" in r
    assert "6 layers x 12 heads" in r and "1 thread" in r and res._core.simd in r
    assert res._core.tokens == sum(len(t) for t in res.rows.drop_duplicates("report_id")["tokens"])
    syn = repr(headsep.run("ops-reports", "axis-focus", {"reports": 1000}, threads=2, rows=False))
    assert "1,000 reports, 3,000 (report, scenario) rows; 2 heads" in syn and "2 threads" in syn


def test_dtype_holds_a_decoder_in_bf16_or_f32():
    # an f32 folder: f32 unless asked (docs/MODEL.md, "Weight dtype"; a bf16 folder: test_decoder_bf16.cpp)
    assert headsep.model(LLAMA).info["compute_dtype"] == "f32"
    assert headsep.model(LLAMA, dtype="bf16").info["compute_dtype"] == "bf16"
    assert headsep.model(LLAMA, dtype="f32").info["compute_dtype"] == "f32"
    with pytest.raises(ValueError, match="dtype must be 'auto', 'f32' or 'bf16'"):
        headsep.model(LLAMA, dtype="f16")


def bf16_copy(src, dst):
    """src's folder with model.safetensors' F32 tensors rounded to BF16 (nearest even), the rest as is."""
    import numpy as np
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header, data = json.loads(f.read(n)), f.read()
    out, blobs, off = {}, [], 0
    for name, t in sorted((k, v) for k, v in header.items() if k != "__metadata__"):
        blob = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if t["dtype"] == "F32":
            u = np.frombuffer(blob, dtype="<u4").astype(np.uint64)
            blob, t = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes(), dict(t, dtype="BF16")
        out[name] = dict(t, data_offsets=[off, off + len(blob)])
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(out).encode()
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    return dst


def test_dtype_holds_an_encoder_in_bf16_or_f32(tmp_path):
    # encoders as decoders (test_encoder_bf16.cpp: the bits of the widening path, vdpbf16ps' bounds)
    assert headsep.model(MODEL).info["compute_dtype"] == "f32"
    assert headsep.model(MODEL, dtype="bf16").info["compute_dtype"] == "bf16"
    bf16 = bf16_copy(MODEL, str(tmp_path / "minilm-bf16"))
    kept, widened = headsep.model(bf16), headsep.model(bf16, dtype="f32")
    assert kept.info["compute_dtype"] == "bf16" and widened.info["compute_dtype"] == "f32"
    assert "BF16" in str(kept.info["dtype"]) and "F32" in str(headsep.model(MODEL).info["dtype"])
    a, b = kept.run(TEXTS, threads=1), widened.run(TEXTS, threads=1)
    assert a._core.tokens == b._core.tokens


def test_help_leads_somewhere():
    assert "headsep.model(" in headsep.__doc__ and "heads()" in headsep.__doc__ and "docs/PYTHON.md" in headsep.__doc__
    assert "(report, scenario, layer)" in headsep.ModelResult.rows.__doc__
    assert "progress" in headsep.Model.run.__doc__ and "progress" in headsep.run.__doc__


def test_the_summary_and_report_name_the_call_not_a_file_descriptor():
    res = headsep.model(MODEL).run(TEXTS, threads=1)
    run = res.summary["run"]
    assert run["execution"]["command_line"] == f"headsep.model({MODEL!r}).run(4 texts)"
    assert run["plugins"][0]["params"]["path"] == "4 texts from Python"
    assert "/proc/self/fd" not in res.summary_json() and "/proc/self/fd" not in res.report_html()
    assert "4 texts from Python" in res.report_html()


def test_maps_put_those_reports_whole_in_the_head_view():
    # maps= with a report: the chosen reports' every query and key in the page's head view, as the
    # CLI's --attention-reports; without maps= the view holds only the top reports' cuts.
    long = " ".join(["the system failed because the disk filled up"] * 4)
    m = headsep.model(MODEL)
    plain = m.run(TEXTS + [long], threads=1, top=1).report_html()
    picked = m.run(TEXTS + [long], threads=1, top=1, maps=[4]).report_html()
    assert "chosen (--attention-reports, Python maps=)" not in plain
    view = json.loads(picked.split('id="hv-data">', 1)[1].split("</script>", 1)[0])
    chosen = [r for r in view["reports"] if r["note"].startswith("chosen (--attention-reports, Python maps=)")]
    n = len(m.tokenize(long)["tokens"])
    assert n > 12 and len(chosen) == 1 and chosen[0]["name"].endswith("report 4 (chosen)")
    assert len(chosen[0]["kt"]) == n and len(chosen[0]["layers"]) == 6  # whole, every layer


def test_text_errors_name_the_text():
    m = headsep.model(MODEL)
    with pytest.raises(ValueError, match=r"texts\[1\]: has no scenario, but texts\[0\] has one"):
        m.run([("a", "x", "s1"), ("b", "y")])
    with pytest.raises(ValueError, match=r"texts\['k'\]: the text is not valid Unicode \(a lone surrogate U\+D800"):
        m.run({"j": "fine", "k": "bad \ud800 text"})
    with pytest.raises(ValueError, match=r"texts\[0\]: the scenario .* is empty"):
        m.run([("a", "x", "")])


def test_a_lexicon_of_other_axes_says_which_axes_to_pass(tmp_path):
    lex = tmp_path / "lex.csv"
    lex.write_text("word,happy,sad\nglad,1,0\ngloomy,0,1\n", encoding="utf-8")
    with pytest.raises(headsep.UsageError, match=r"axes='happy=happy;sad=sad'"):
        headsep.model(MODEL).run(["a glad day"], lexicon=lex)
    res = headsep.model(MODEL).run(["a glad day"], lexicon=lex, axes="happy=happy;sad=sad")
    assert res.summary["axes"] == ["happy", "sad"]
    p = cli("run", "--model", MODEL, "-s", "ops-text", "-p", f"lexicon={lex}", "--quiet", check=False)
    assert p.returncode == 2 and "--axes 'happy=happy;sad=sad'" in p.stderr


def test_integers_past_the_cpp_types_are_value_errors_naming_the_argument():
    m = headsep.model(MODEL)
    for kwargs, name in [({"threads": 2**40}, "threads"), ({"top": 2**70}, "top"), ({"chunk": -1}, "chunk"),
                         ({"maps": [2**70]}, "maps"), ({"map_layers": [-1]}, "map_layers"),
                         ({"map_layers": [2**70]}, "map_layers"), ({"top": -3}, "top")]:
        with pytest.raises(ValueError, match=name):
            m.run(TEXTS, **kwargs)
    for kwargs, name in [({"threads": 2**40}, "threads"), ({"top": 2**70}, "top"), ({"bins": 2**40}, "bins"),
                         ({"chunk": 2**64}, "chunk"), ({"threads": -1}, "threads")]:
        with pytest.raises(ValueError, match=name):
            headsep.run("ops-reports", "axis-focus", **kwargs)
    import numpy as np
    x = np.zeros((2, 3, 4), dtype=np.float32)
    w = {"in_proj_weight": np.zeros((12, 4), dtype=np.float32)}
    for kwargs, name in [({"heads": 2**40}, "heads"), ({"threads": 2**40}, "threads"), ({"seed": 2**70}, "seed"),
                         ({"maps": [2**70]}, "maps"), ({"offsets": [0, 2**70]}, "offsets")]:
        with pytest.raises(ValueError, match=name):
            headsep.attention(x, weights=w, **({"heads": 2} | kwargs))


SLOW = textwrap.dedent("""
    import sys, time, numpy as np, headsep
    class Slow(headsep.ScenarioGenerator):
        features = ("decision_axis", "evidence_axis", "condition_axis")
        random_access = True
        total_reports = 40 * 64
        def chunk(self, index, max_reports):
            if index >= 40:
                return None
            time.sleep(0.04)   # 40 chunks: at least 1.6 s, past the bar's first second
            x = np.ones(3 * max_reports)
            return headsep.Chunk(np.arange(max_reports + 1) * 3, [x, x, x])
    mode = sys.argv[1]
    progress = {"on": True, "off": False, "default": None}[mode]
    headsep.run(Slow(), "uniform", threads=1, chunk=64, rows=False, report=False, progress=progress)
    print("done", flush=True)
""")


@pytest.mark.parametrize("mode", ["on", "off", "default"])
def test_progress_bar_on_stderr(mode):
    p = subprocess.run([sys.executable, "-c", SLOW, mode], capture_output=True, env=dict(os.environ), timeout=120)
    err = p.stderr.decode()  # bytes: text mode would turn each "\r" into a line break
    assert p.returncode == 0, err
    assert p.stdout.decode().strip() == "done"
    if mode == "on":
        # the CLI's line, redrawn: "\r[####...] 100.0%  2.6 k reports  ... reports/s  in 2s", then a newline
        assert err.startswith("\r[") and err.endswith("\n") and "\n" not in err[:-1]
        last = err.rstrip("\n").split("\r")[-1].rstrip()
        assert last.startswith("[" + "#" * 30 + "] 100.0%  2.6 k reports") and " in " in last
        assert "\x1b" not in err  # not a terminal: no escape sequences
    else:
        assert err == ""  # captured: not a terminal, not a notebook


def test_model_run_progress_goes_to_sys_stderr(monkeypatch):
    # A notebook's sys.stderr is a Python object, not file descriptor 2: the bar is written there.
    # The bar starts after a run's first second: runs twice as long each time until one draws.
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    m = headsep.model(MODEL)
    n = 100
    while not buf.getvalue():
        m.run(TEXTS * n, threads=1, rows=False, report=False, progress=True)
        n *= 2
    text = buf.getvalue()
    assert text.startswith("\r[") and text.endswith("\n") and "100.0%" in text and "reports/s" in text
    buf.truncate(0), buf.seek(0)
    m.run(TEXTS * (n // 2), threads=1, rows=False, report=False)  # default: a StringIO is no terminal
    assert buf.getvalue() == ""


def test_runs_read_a_changed_tokenizer_again(tmp_path):
    # The text generator keeps the folder's tokenizer while a loaded model keeps it loaded, keyed by
    # the files' sizes and times: a tokenizer.json that changed is read again.
    folder = tmp_path / "m"
    shutil.copytree(MODEL, folder)
    m = headsep.model(folder)
    text = "one two three four five six seven eight nine ten eleven twelve"
    assert m.run([text]).rows["n_tokens"][0] == 14
    assert m.run([text]).rows["n_tokens"][0] == 14
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tj["truncation"]["max_length"] = 8
    (folder / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    assert m.run([text]).rows["n_tokens"][0] == 8


def test_a_generator_error_in_the_in_memory_file_is_named_by_the_callers_key():
    # Whatever the text generator says about line N of the texts' in-memory file is about
    # records[N - 1]: named as the caller's key and report id, never /proc/self/fd/N.
    from headsep import _located
    records = [{"report_id": "x", "text": "a"}, {"report_id": "y", "text": "b"}]
    e = headsep.Error("scenario plugin 'text' (text.so): /proc/self/fd/7:2: \"scenario\" is missing")
    got = _located(e, 7, ["first", "second"], records)
    assert type(got) is headsep.Error
    assert str(got) == "scenario plugin 'text' (text.so): texts['second'] (report 'y'): \"scenario\" is missing"
    assert str(_located(headsep.Error("/proc/self/fd/7: cannot open"), 7, [0], records[:1])) == "texts: cannot open"
