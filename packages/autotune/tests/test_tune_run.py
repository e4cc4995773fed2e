"""A real tuning run (local builder and runner) and its curves; the `tensorsmith tune` CLI."""

from __future__ import annotations

import math
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from autotune_testing import FakeBuilder, FakeRunner, matmul, mlp, needs_llvm, trial_records

from tensorsmith.autotune.measure import LocalRunner
from tensorsmith.autotune.plot import curves, plot_curves
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.autotune.tuner import TuneEvent, Tuner
from tensorsmith.ir.records import read_records

REPO = Path(__file__).resolve().parents[3]
CRASH_ON_2 = "def hook(index, outputs):\n    import ctypes\n    if index == 2:\n" \
             "        ctypes.string_at(0)\n"


def test_tuning_run_with_a_crashing_candidate(tmp_path) -> None:
    needs_llvm()
    (tmp_path / "hook.py").write_text(CRASH_ON_2)
    tasks = extract_tasks(matmul(32, 64, 64))
    events: list[TuneEvent] = []
    runner = LocalRunner(min_repeat_ms=5.0, hook=f"{tmp_path / 'hook.py'}:hook")
    result = Tuner(tasks, tmp_path / "r.jsonl", 8, per_round=4, runner=runner,
                   callback=events.append).run()
    recs = trial_records(read_records(tmp_path / "r.jsonl"))
    assert len(recs) == 8 and result.new_trials == 8
    crashed = [r for r in recs if r["error"]]
    assert len(crashed) == 2 and all("SIGSEGV" in r["error"] for r in crashed)
    assert math.isfinite(result.best_seconds[0]) and result.best_seconds[0] <= \
        result.default_seconds[0]
    assert [e.total_trials for e in events] == [4, 8]
    assert events[-1].best_gflops > 0 and events[0].round_errors == 1


def _png_size_and_ink(data: bytes) -> tuple[int, int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    start = data.index(b"IDAT") + 4
    length = int.from_bytes(data[start - 8:start - 4], "big")
    raw = np.frombuffer(zlib.decompress(data[start:start + length]), np.uint8)
    pixels = raw.reshape(height, 1 + width * 3)[:, 1:]
    return width, height, int((pixels < 128).sum())


def test_curves_png_without_matplotlib(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    builder = FakeBuilder()
    result = Tuner(extract_tasks(mlp()), tmp_path / "r.jsonl", 20, per_round=4,
                   builder=builder, runner=FakeRunner(builder)).run()
    per_task, e2e = curves(result)
    assert len(per_task) == 3 and all(s[0][1] == 1.0 for _, s in per_task)
    assert e2e[0][0] == 1 and e2e[-1][0] == 20 and e2e[-1][1] < e2e[0][1]
    assert plot_curves(result, tmp_path / "c.png") == "builtin"
    width, height, ink = _png_size_and_ink((tmp_path / "c.png").read_bytes())
    assert (width, height) == (900, 760) and ink > 1000


def test_tune_and_compile_commands(tmp_path, capsys) -> None:
    needs_llvm()
    pytest.importorskip("tensorsmith.frontend.onnx", reason="needs tensorsmith-frontend-onnx")
    cli = pytest.importorskip("tensorsmith.cli.main", reason="needs the tensorsmith CLI")
    import tensorsmith.runtime as rt
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import run_graph

    model = REPO / "examples" / "mlp.onnx"
    records = tmp_path / "mlp.jsonl"
    args = ["tune", str(model), "--input-shape", "input:1,784", "--trials", "6",
            "--per-round", "2", "--records", str(records), "--min-repeat-ms", "5"]
    assert cli.main(args) == 0
    out = capsys.readouterr()
    assert "estimated end-to-end kernel time" in out.out
    assert "[" in out.err and "GFLOP/s" in out.err  # the progress bar
    assert len(trial_records(read_records(records))) == 6 and records.with_suffix(".png").exists()
    assert cli.main(args) == 0  # already done: resumes, measures nothing new
    assert len(trial_records(read_records(records))) == 6
    artifact = tmp_path / "mlp.so"
    assert cli.main(["compile", str(model), "--input-shape", "input:1,784", "--records",
                     str(records), "-o", str(artifact)]) == 0
    x = np.random.default_rng(0).random((1, 784), dtype=np.float32)
    (got,) = rt.load(artifact).run({"input": x})
    mod, _ = from_onnx(str(model), {"input": (1, 784)})
    (want,) = run_graph(mod, {"input": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
