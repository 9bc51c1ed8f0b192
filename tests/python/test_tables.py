"""Result.heads() / pairs() (tidy: one row per head or pair of every row) and head_summary() /
pair_summary() / layer_summary() (the summary as tables): the very numbers of Result.rows and of
the summary, for a BERT model run, a decoder (key/value heads), a synthetic run and an attention
run; pandas and NumPy structured arrays give the same."""
import os
import sys

import numpy as np
import pytest

import headsep

MODEL = os.environ.get("HEADSEP_MODEL_DIR")
LLAMA = os.path.join(os.environ.get("HEADSEP_SOURCE_DIR", "."), "tests", "model", "fixtures", "decoder", "llama")
HEAD_STATS = ["entropy", "confidence", "self_weight", "prev_weight", "first_weight"]
PAIR_STATS = ["js_divergence", "position_overlap", "subspace_cosine", "output_cosine", "output_distance"]
TEXTS = [
    ("a", "pressure is too high: stop the pump until the valve check is done", "ops"),
    ("b", "the log shows evidence that the return condition was met", "ops"),
    ("c", "decision: hold; condition: restart only after the inspection", "ops"),
    ("d", "the weather was fine and we went for a walk", "other"),
    ("e", "", "other"),
]

pd = pytest.importorskip("pandas")
needs_model = pytest.mark.skipif(not MODEL, reason="HEADSEP_MODEL_DIR is not set (scripts/fetch_model.sh)")


def wide(res, key):
    return res.rows.set_index(key)


def check_heads_against_rows(res, model):
    """Every value of heads() is the rows' value of that head, in row order then head order."""
    rows, h = res.rows, res.heads()
    H = res._core.heads
    assert len(h) == len(rows) * H
    assert h["head"].tolist() == list(range(1, H + 1)) * len(rows)
    assert (h["report_id"].to_numpy()[::H] == rows["report_id"].to_numpy()).all()
    assert (h["scenario"].to_numpy()[::H] == rows["scenario"].to_numpy()).all()
    if model:
        assert (h["layer"].to_numpy()[::H] == rows["layer"].to_numpy()).all()
    stats = HEAD_STATS if res._core.attention else []
    for s in stats:
        want = rows[[f"head{k}_{s}" for k in range(1, H + 1)]].to_numpy().ravel()
        assert np.array_equal(h[s].to_numpy(), want), s
    for a in res._core.axes:
        assert np.array_equal(h[f"context_{a}"].to_numpy(), rows[[f"head{k}_{a}" for k in range(1, H + 1)]].to_numpy().ravel())
        assert np.array_equal(h[f"difference_{a}"].to_numpy(),
                              rows[[f"diff_head{k}_{a}" for k in range(1, H + 1)]].to_numpy().ravel())
    # separation of head k: the mean of its pairs' context distances (rows' separation_i_j)
    dist = {}
    for i in range(1, H + 1):
        for j in range(i + 1, H + 1):
            dist[i, j] = dist[j, i] = (rows["head_separation"] if H == 2 else rows[f"separation_{i}_{j}"]).to_numpy()
    sep = np.stack([sum(dist[k, o] for o in range(1, H + 1) if o != k) / (H - 1) for k in range(1, H + 1)], axis=1)
    np.testing.assert_allclose(h["separation"].to_numpy(), sep.ravel(), rtol=1e-15, atol=0)


@needs_model
def test_model_heads_and_pairs_are_the_rows_regrouped():
    res = headsep.model(MODEL).run(TEXTS, threads=2)
    check_heads_against_rows(res, model=True)
    h, rows = res.heads(), res.rows
    assert list(h.columns[:5]) == ["report_id", "scenario", "layer", "head", "kv_head"]
    assert h["kv_head"].tolist() == (h["head"] - 1).tolist()  # BERT: each head its own key/value head
    js = {(i, j): rows[f"head{i}_head{j}_js_divergence"].to_numpy() for i in range(1, 13) for j in range(i + 1, 13)}
    k3 = h[h["head"] == 3]["js_mean"].to_numpy()
    want = sum(js[min(3, o), max(3, o)] for o in range(1, 13) if o != 3) / 11
    np.testing.assert_allclose(k3, want, rtol=1e-15, atol=0)
    p = res.pairs()
    assert len(p) == len(rows) * 66
    assert list(p.columns) == ["report_id", "scenario", "layer", "head_i", "head_j", "shared_kv", "context_distance"] + PAIR_STATS
    assert not p["shared_kv"].any()
    for s in PAIR_STATS:
        want = rows[[f"head{i}_head{j}_{s}" for i in range(1, 13) for j in range(i + 1, 13)]].to_numpy().ravel()
        assert np.array_equal(p[s].to_numpy(), want), s
    assert np.array_equal(p["context_distance"].to_numpy(),
                          rows[[f"separation_{i}_{j}" for i in range(1, 13) for j in range(i + 1, 13)]].to_numpy().ravel())


@needs_model
def test_model_summary_tables_equal_the_summary_and_the_heads_means():
    res = headsep.model(MODEL).run(TEXTS, threads=1)
    h, hs, ls = res.heads(), res.head_summary(), res.layer_summary()
    # "mean entropy per head of layer 3": one line, the summary's numbers.
    per_head = res.heads().query("layer == 3 and scenario == 'ops'").groupby("head").entropy.mean()
    layer3 = next(sc for sc in res.summary["scenarios"] if sc["name"] == "ops")["layers"][3]
    np.testing.assert_allclose(per_head.to_numpy(), [x["entropy"] for x in layer3["heads"]], rtol=1e-12)
    assert len(hs) == 2 * 6 * 12 and len(ls) == 2 * 6
    means = h.groupby(["scenario", "layer", "head"], sort=False).mean(numeric_only=True).reset_index()
    for col in HEAD_STATS + ["separation", "js_mean"] + [f"context_{a}" for a in res._core.axes] + \
            [f"difference_{a}" for a in res._core.axes]:
        np.testing.assert_allclose(hs[col].to_numpy(), means[col].to_numpy(), rtol=1e-12, atol=1e-15, err_msg=col)
    # the summary's own values, looked up directly
    for _, row in hs.sample(10, random_state=1).iterrows():
        sc = next(s for s in res.summary["scenarios"] if s["name"] == row["scenario"])
        hd = sc["layers"][row["layer"]]["heads"][row["head"] - 1]
        assert row["entropy"] == hd["entropy"] and row["separation"] == hd["separation"]
        assert row["js_mean"] == hd["js_divergence_mean"] and row["entropy_p50"] == hd["entropy_quantiles"]["p50"]
        assert row["separation_p90"] == hd["separation_quantiles"]["p90"] and row["reports"] == sc["reports"]
    # exact quantiles (few reports): the heads' own values give them
    g = h[(h["scenario"] == "ops") & (h["layer"] == 2) & (h["head"] == 5)]
    row = hs[(hs["scenario"] == "ops") & (hs["layer"] == 2) & (hs["head"] == 5)].iloc[0]
    np.testing.assert_allclose(np.quantile(g["separation"], 0.5), row["separation_p50"], rtol=1e-12)
    np.testing.assert_allclose(np.quantile(g["entropy"], 0.9), row["entropy_p90"], rtol=1e-12)
    layer = next(sc for sc in res.summary["scenarios"] if sc["name"] == "other")["layers"][4]
    lrow = ls[(ls["scenario"] == "other") & (ls["layer"] == 4)].iloc[0]
    assert lrow["separation"] == layer["separation"] and lrow["baseline_entropy"] == layer["baseline"]["entropy"]
    ps = res.pair_summary()
    assert len(ps) == 2 * 6 * 66
    pm = res.pairs().groupby(["scenario", "layer", "head_i", "head_j"], sort=False).mean(numeric_only=True)
    np.testing.assert_allclose(ps["js_divergence"].to_numpy(), pm["js_divergence"].to_numpy(), rtol=1e-12, atol=1e-15)
    with_base = res.heads(baseline=True)
    assert len(with_base) == len(res.rows) * 13
    base = with_base[with_base["head"] == 0]
    assert np.array_equal(base["entropy"].to_numpy(), res.rows["single_entropy"].to_numpy())
    assert base["separation"].isna().all() and (base["kv_head"] == -1).all()


def test_a_decoders_key_value_heads():
    res = headsep.model(LLAMA).run(TEXTS[:3])
    check_heads_against_rows(res, model=True)
    h = res.heads()
    assert h.groupby("head")["kv_head"].first().tolist() == [0, 0, 1, 1]
    p = res.pairs()
    shared = p.groupby(["head_i", "head_j"])["shared_kv"].first()
    assert shared.to_dict() == {(1, 2): True, (1, 3): False, (1, 4): False, (2, 3): False, (2, 4): False,
                                (3, 4): True}
    assert np.array_equal(p["shared_kv"].to_numpy(), res.rows[[f"head{i}_head{j}_shared_kv"
                                                                for i in range(1, 5) for j in range(i + 1, 5)]].to_numpy().ravel())
    assert res.head_summary()["kv_head"].tolist()[:4] == [0, 0, 1, 1]


def test_synthetic_runs_tables():
    res = headsep.run("ops-reports", "axis-focus", {"reports": 300}, threads=2)
    check_heads_against_rows(res, model=False)
    assert "layer" not in res.heads() and "entropy" not in res.heads()
    hs = res.head_summary()
    m = res.summary["scenarios"][1]["metrics"]
    row = hs[(hs["scenario"] == res.summary["scenarios"][1]["scenario"]) & (hs["head"] == 2)].iloc[0]
    a = res._core.axes[0]
    assert row[f"difference_{a}"] == m[f"diff_head2_{a}"]["mean"] and row[f"difference_{a}_p99"] == m[f"diff_head2_{a}"]["p99"]
    ls = res.layer_summary()
    assert ls["head_separation"].tolist() == [sc["metrics"]["head_separation"]["mean"] for sc in res.summary["scenarios"]]
    assert len(res.pairs()) == len(res.rows)  # two heads: one pair, its distance head_separation
    assert np.array_equal(res.pairs()["context_distance"].to_numpy(), res.rows["head_separation"].to_numpy())
    assert len(res.pair_summary()) == 0


def test_attention_runs_tables():
    rng = np.random.default_rng(0)
    d, H = 8, 4
    w = {"in_proj_weight": rng.uniform(-0.5, 0.5, (3 * d, d)).astype(np.float32)}
    res = headsep.attention(rng.standard_normal((20, 6, d)).astype(np.float32), weights=w, heads=H, threads=1)
    check_heads_against_rows(res, model=False)
    assert "js_mean" in res.heads() and "kv_head" not in res.heads()
    hs = res.head_summary()
    m = res.summary["scenarios"][0]["metrics"]
    assert hs["entropy"].tolist() == [m[f"head{k}_entropy"]["mean"] for k in range(1, H + 1)]
    ps = res.pair_summary()
    assert ps["js_divergence"].tolist() == [m[f"head{i}_head{j}_js_divergence"]["mean"]
                                            for i in range(1, H + 1) for j in range(i + 1, H + 1)]


def test_numpy_output_and_the_fallback_without_pandas(monkeypatch):
    res = headsep.run("ops-reports", "axis-focus", {"reports": 50}, threads=1)
    df, arr = res.heads(), res.heads(output="numpy")
    assert isinstance(arr, np.ndarray) and arr.dtype.names == tuple(df.columns)
    for name in df.columns:
        assert arr[name].tolist() == df[name].tolist()
    assert res.layer_summary(output="numpy")["head_separation"].tolist() == res.layer_summary()["head_separation"].tolist()
    with pytest.raises(ValueError, match="output"):
        res.heads(output="polars")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    assert isinstance(res.pairs(), np.ndarray)
    with pytest.raises(ImportError, match="output='numpy'"):
        res.pairs(output="pandas")
    bare = headsep.run("ops-reports", "axis-focus", {"reports": 10}, rows=False)
    with pytest.raises(ValueError, match="rows=True"):
        bare.heads()
    assert isinstance(bare.head_summary(), np.ndarray)  # from the summary: no rows needed
