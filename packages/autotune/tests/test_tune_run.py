"""A real tuning run (local builder and runner) and its curves; the `tensorsmith tune` CLI."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from autotune_testing import (
    FakeBuilder,
    FakeRunner,
    matmul,
    mlp,
    needs_llvm,
    needs_matplotlib,
    trial_records,
)

from tensorsmith.autotune.measure import LocalRunner
from tensorsmith.autotune.plot import PLOT_INSTALL, PlotUnavailable, curves, plot_curves
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
    search = [e for e in events if e.stage == "search"]
    assert [e.total_trials for e in search] == [4, 8]
    assert search[-1].best_gflops > 0 and search[0].round_errors == 1
    assert all((e.task_index, e.task_count) == (0, 1) for e in events)
    # the re-measuring of the front-runners is announced before it starts
    assert [e.stage for e in events] == ["search", "search", "confirm"]


def _fake_run(tmp_path: Path):  # noqa: ANN202
    builder = FakeBuilder()
    return Tuner(extract_tasks(mlp()), tmp_path / "r.jsonl", 20, per_round=4,
                 builder=builder, runner=FakeRunner(builder)).run()


def test_curves_are_each_kernels_best_so_far(tmp_path) -> None:
    result = _fake_run(tmp_path)
    per_task = curves(result)
    assert [label for label, _ in per_task] == [t.label for t in result.tasks]
    for (_, series), n in zip(per_task, result.trials, strict=True):
        trials, best = zip(*series)
        assert trials == tuple(range(1, n + 1))  # every trial of the kernel, in order
        assert list(best) == sorted(best, reverse=True)  # the best so far never rises


def test_plot_writes_a_png_through_matplotlib(tmp_path) -> None:
    needs_matplotlib()
    result = _fake_run(tmp_path)
    path = plot_curves(result, tmp_path / "curves.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"Matplotlib" in data[:2000]  # Agg's "Software" text chunk: drawn by matplotlib


def test_plot_without_matplotlib_names_the_pip_command(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlotUnavailable, match="matplotlib") as caught:
        plot_curves(_fake_run(tmp_path), tmp_path / "c.png")
    assert PLOT_INSTALL in str(caught.value) and not (tmp_path / "c.png").exists()


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
    assert "model: kernels per run" in out.out and "model: wall time per run" in out.out
    assert "\r" not in out.err  # stderr is no terminal here: no progress bars drawn
    assert len(trial_records(read_records(records))) == 6
    if importlib.util.find_spec("matplotlib") is not None:
        assert records.with_suffix(".png").exists()
    else:
        assert PLOT_INSTALL in out.out
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
