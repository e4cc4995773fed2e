"""``tensorsmith run --profile [--trace]`` on ResNet-18, and what the kernel times add up to.

ResNet-18 at 64x64 runs for tens of milliseconds in 23 kernels, so the per-step cost of
timing (two clock reads) is far below 1% of a kernel and the sum of the kernel times
must account for the run's wall time.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.runtime.kernel_names import kernel_labels

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # the model builders live in bench/
    sys.path.insert(0, str(ROOT))

from bench.models import input_shapes, resnet18, sample_inputs  # noqa: E402

REPEAT = 3


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = resnet18(opset=17, batch=1, image=64)
    mod, params = from_onnx(model, input_shapes(model))
    path = tmp_path_factory.mktemp("profile") / "resnet18.so"
    build(mod, target="llvm", params=params).export_library(path)
    return path


def tsm(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tensorsmith.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_profile_table_and_trace(resnet, tmp_path) -> None:
    trace_path = tmp_path / "trace.json"
    proc = tsm("run", resnet, "--profile", "--repeat", REPEAT, "--trace", trace_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metadata = rt.read_artifact(resnet).metadata
    names = kernel_labels(metadata)  # symbol -> the name every tool prints
    assert len(set(names.values())) == len(names) and all("#" in n for n in names.values())
    kernels = {names[k["name"]]: k for k in metadata["kernels"]}
    steps = [{**s, "kernel": names[s["kernel"]]} for s in metadata["steps"]]

    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    header = lines[start].split()
    assert header[:6] == ["kernel", "calls", "total", "ms", "mean", "ms"]
    rows = lines[start + 1 : start + 1 + len(kernels)]
    assert {row.split()[0] for row in rows} == set(kernels)  # one row per kernel
    totals = [float(row.split()[2]) for row in rows]
    assert totals == sorted(totals, reverse=True)  # slowest first
    for row in rows:
        name, calls, _total, _mean, percent, ops = row.split()[:6]
        sharing = sum(step["kernel"] == name for step in steps)  # steps calling it
        assert int(calls) == REPEAT * sharing and 0.0 <= float(percent) <= 100.0
        assert ops == "+".join(kernels[name]["ops"])  # the fused ops it holds ...
        assert kernels[name]["nodes"][0] in row  # ... and the model's node names
    assert f"{REPEAT} runs: median" in lines[start + 1 + len(kernels)]
    assert "conv2d+add+relu" in proc.stdout

    trace = json.loads(trace_path.read_text())
    events = trace["traceEvents"]
    calls = [e for e in events if e.get("cat") == "kernel"]
    assert len(calls) == REPEAT * len(steps)  # one event per kernel call
    for i, e in enumerate(calls):
        step = steps[i % len(steps)]
        assert e["ph"] == "X" and e["name"] == step["kernel"]
        assert e["args"]["ops"] == kernels[step["kernel"]]["ops"]
        assert e["args"]["nodes"] == step["nodes"]  # this call's own nodes
        assert e["dur"] >= 0 and isinstance(e["ts"], int | float)
    starts = [e["ts"] for e in calls]
    assert starts == sorted(starts)
    assert len([e for e in events if e.get("cat") == "run"]) == REPEAT


def test_trace_needs_profile(resnet, tmp_path) -> None:
    proc = tsm("run", resnet, "--trace", tmp_path / "t.json")
    assert proc.returncode == 2 and "--trace needs --profile" in proc.stderr


def test_kernel_times_add_up_to_the_run_time(resnet) -> None:
    """Per run, the summed kernel times against the run's wall time (both from the same
    profiled runs); medians over the runs, so one preempted run does not decide. One
    thread: the test must hold on a busy 2-core machine running other tests."""
    model = resnet18(opset=17, batch=1, image=64)
    m = rt.load(resnet, num_threads=1)
    report = m.profile(sample_inputs(model), repeat=15)
    kernel_ms = report.kernel_ms_per_run()
    assert len(kernel_ms) == len(report.run_ms) == 15
    ratios = [k / r for k, r in zip(kernel_ms, report.run_ms, strict=True)]
    median_ratio = statistics.median(ratios)
    assert 0.90 <= median_ratio <= 1.0 + 1e-9, (median_ratio, kernel_ms, report.run_ms)
    rows = report.by_kernel(m.metadata)
    assert sum(r["total_ms"] for r in rows) == pytest.approx(sum(kernel_ms))
    assert sum(r["percent"] for r in rows) == pytest.approx(100.0)
