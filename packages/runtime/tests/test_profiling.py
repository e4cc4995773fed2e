"""The views of a profile: per kernel (joined with the artifact's metadata) and as a
Chrome trace. Synthetic timings check the arithmetic; the hand-built CPU artifact checks
that a real report carries what the views need."""

from __future__ import annotations

import json

import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime.profiling import summarize

METADATA = {
    "kernels": [
        {"name": "k_conv", "ops": ["conv2d", "add", "relu"], "nodes": ["c1", "b1", "r1"]},
        {"name": "k_pool", "ops": ["pool2d"], "nodes": ["p1"]},
    ],
    # k_conv runs twice per run: calls count steps, not kernels
    "steps": [{"kernel": "k_conv"}, {"kernel": "k_pool"}, {"kernel": "k_conv"}],
}
STEP_NAMES = ["fused_conv2d_add_relu", "fused_pool2d", "fused_conv2d_add_relu"]
RUNS = [[1.0, 0.5, 2.0], [1.5, 0.5, 2.5]]
RUN_MS = [4.0, 5.0]


def report() -> rt.ProfileReport:
    return summarize(STEP_NAMES, RUNS, RUN_MS)


def test_report_keeps_raw_step_times() -> None:
    r = report()
    assert r.step_ms == RUNS and r.step_names == STEP_NAMES and r.run_ms == RUN_MS
    assert r.kernel_ms_per_run() == [3.5, 4.5]
    # the per-name entries are unchanged: same-named steps add up
    by_name = {e["name"]: e for e in r}
    assert by_name["fused_conv2d_add_relu"]["calls"] == 4
    assert by_name["fused_conv2d_add_relu"]["total_ms"] == pytest.approx(7.0)


def test_by_kernel_joins_metadata() -> None:
    rows = report().by_kernel(METADATA)
    assert [r["kernel"] for r in rows] == ["k_conv", "k_pool"]  # steps unnamed: symbols
    assert [r["symbol"] for r in rows] == ["k_conv", "k_pool"]
    conv, pool = rows
    assert conv["ops"] == ["conv2d", "add", "relu"] and conv["nodes"] == ["c1", "b1", "r1"]
    assert conv["calls"] == 4 and conv["total_ms"] == pytest.approx(7.0)
    assert conv["mean_ms"] == pytest.approx(1.75)
    assert pool["calls"] == 2 and pool["total_ms"] == pytest.approx(1.0)
    assert conv["percent"] + pool["percent"] == pytest.approx(100.0)
    assert pool["percent"] == pytest.approx(12.5)


@pytest.mark.parametrize(
    "metadata",
    [None, {}, {"steps": [{"kernel": "k_conv"}]}, {"steps": "nope", "kernels": 3}],
    ids=["none", "empty", "wrong-step-count", "malformed"],
)
def test_by_kernel_without_usable_metadata_uses_step_names(metadata) -> None:
    rows = report().by_kernel(metadata)
    assert [r["kernel"] for r in rows] == ["fused_conv2d_add_relu", "fused_pool2d"]
    assert all(r["ops"] == [] and r["nodes"] == [] for r in rows)


def test_chrome_trace_one_event_per_kernel_call() -> None:
    trace = report().chrome_trace(METADATA, label="model.so")
    json.dumps(trace)  # serializable as it is
    events = trace["traceEvents"]
    calls = [e for e in events if e.get("cat") == "kernel"]
    runs = [e for e in events if e.get("cat") == "run"]
    assert len(calls) == len(RUNS) * len(STEP_NAMES) and len(runs) == len(RUN_MS)
    assert all(e["ph"] == "X" and e["pid"] == 1 for e in calls + runs)
    assert [e["name"] for e in calls[:3]] == ["k_conv", "k_pool", "k_conv"]
    assert calls[0]["args"]["ops"] == ["conv2d", "add", "relu"]
    assert calls[1]["args"] == {
        "step": 1,
        "run": 0,
        "step_name": "fused_pool2d",
        "symbol": "k_pool",
        "ops": ["pool2d"],
        "nodes": ["p1"],
    }
    # microseconds; calls end to end inside their run, runs end to end
    assert [e["dur"] for e in calls] == [1000.0, 500.0, 2000.0, 1500.0, 500.0, 2500.0]
    assert [e["ts"] for e in calls] == [0.0, 1000.0, 1500.0, 4000.0, 5500.0, 6000.0]
    assert [(e["ts"], e["dur"]) for e in runs] == [(0.0, 4000.0), (4000.0, 5000.0)]
    for run, run_event in enumerate(runs):
        inside = [e for e in calls if e["args"]["run"] == run]
        assert all(run_event["ts"] <= e["ts"] for e in inside)
        assert inside[-1]["ts"] + inside[-1]["dur"] <= run_event["ts"] + run_event["dur"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"model.so", "runs", "kernels"} <= names


def test_real_profile_by_kernel_and_trace(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    r = m.profile(inputs, repeat=4)
    assert len(r.step_ms) == 4 and all(len(t) == 3 for t in r.step_ms)
    rows = r.by_kernel(m.metadata)
    assert [row["kernel"] for row in rows] == [
        "tsm_kernel_affine",
        "tsm_kernel_relu_scale",
        "tsm_kernel_sum",
    ]
    assert rows[1]["ops"] == ["Relu", "Mul"] and rows[1]["nodes"] == ["relu", "scale"]
    assert all(row["calls"] == 4 for row in rows)
    total = sum(row["total_ms"] for row in rows)
    assert total == pytest.approx(sum(r.kernel_ms_per_run()))
    events = r.chrome_trace(m.metadata)["traceEvents"]
    assert len([e for e in events if e.get("cat") == "kernel"]) == 12
