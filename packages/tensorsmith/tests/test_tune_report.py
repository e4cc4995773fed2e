"""The table `tensorsmith tune` ends with: every time in it comes from the one in-model
measurement (an Outcome), none from the search's kernels-alone timings."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("tensorsmith.autotune", reason="needs tensorsmith-autotune")

from tensorsmith.autotune.model_timing import Timings  # noqa: E402
from tensorsmith.autotune.outcome import KernelOutcome, Outcome  # noqa: E402
from tensorsmith.cli.tune_report import outcome_lines  # noqa: E402


def _task(label: str, weight: int) -> SimpleNamespace:
    return SimpleNamespace(label=label, weight=weight)


def _outcome() -> Outcome:
    # step times in plan order; the first kernel runs twice (two steps)
    default = Timings([0.5, 0.5, 0.25], 1.5)
    tuned = Timings([0.25, 0.25, 0.25], 1.0)
    kernels = [KernelOutcome(_task("fused_matmul_add_relu#40de", 2), 1.0, 0.5, True),
               KernelOutcome(_task("fused_softmax#29b4", 1), 0.25, 0.25, False)]
    return Outcome(kernels, default, tuned, rounds=4, repeat=5)


def _cells(lines: list[str], first: str) -> list[str]:
    row = next(line for line in lines if line.startswith(first))
    return row[len(first):].split()


def test_every_number_comes_from_the_in_model_outcome() -> None:
    lines = outcome_lines(_outcome(), trials=[12, 4], errors=[1, 0])
    assert lines[0].split() == ["kernel", "uses", "trials", "errors", "default", "ms", "tuned",
                                "ms", "speedup", "schedule"]
    assert _cells(lines, "fused_matmul_add_relu#40de") == ["2", "12", "1", "1.0000", "0.5000",
                                                           "2.00x", "tuned"]
    assert _cells(lines, "fused_softmax#29b4") == ["1", "4", "0", "0.2500", "0.2500", "1.00x",
                                                   "default"]
    # the model's kernel time is the kernels' rows added up, from the same runs
    assert _cells(lines, "model: kernels per run") == ["1.2500", "0.7500", "1.67x"]
    assert _cells(lines, "model: wall time per run") == ["1.5000", "1.0000", "1.50x"]
    assert "medians of 20 runs of each build" in lines[-1]
    assert "run --profile" in lines[-1]


def test_a_kernel_that_failed_everywhere_shows_no_ratio() -> None:
    outcome = _outcome()
    outcome.kernels[1].tuned_ms = float("nan")
    lines = outcome_lines(outcome, trials=[12, 4], errors=[0, 4])
    assert _cells(lines, "fused_softmax#29b4")[3:6] == ["0.2500", "-", "-"]


def test_plot_without_matplotlib_is_an_error_before_tuning(tmp_path, monkeypatch, capsys) -> None:
    from tensorsmith.cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    model = Path(__file__).resolve().parents[3] / "examples" / "mlp.onnx"
    records = tmp_path / "r.jsonl"
    code = main(["tune", str(model), "--input-shape", "input:1,784", "--trials", "2",
                 "--records", str(records), "--plot", str(tmp_path / "c.png")])
    assert code == 2 and not records.exists()  # nothing measured
    assert "pip install 'tensorsmith-autotune[plot]'" in capsys.readouterr().err
