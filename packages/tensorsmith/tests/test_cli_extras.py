"""`tensorsmith tune` without the extras it needs fails at once, naming the pip command.

The plain install leaves out the auto-tuner (`tensorsmith[tune]`) and the GPU bindings
(`tensorsmith[vulkan]`, `[opencl]`). Before these checks, tuning for vulkan without the
binding measured every candidate, recorded each as an error and exited 0. The missing
package is simulated in-process (a None entry in sys.modules makes its import fail), so
these run in the test environment, where everything is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tensorsmith.cli.extras import DEVICE_BINDINGS
from tensorsmith.cli.main import main

MLP = Path(__file__).resolve().parents[3] / "examples" / "mlp.onnx"


def _tune(tmp_path: Path, *extra: str) -> list[str]:
    return ["tune", str(MLP), "--input-shape", "input:1,784", "--trials", "4",
            "--records", str(tmp_path / "tune.jsonl"), "--no-plot", *extra]


@pytest.mark.parametrize("kind", sorted(DEVICE_BINDINGS))
def test_tune_for_a_gpu_without_its_binding_exits_2_before_measuring(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, DEVICE_BINDINGS[kind], None)
    assert main(_tune(tmp_path, "-t", kind)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert f"pip install 'tensorsmith[{kind}]'" in err
    assert not (tmp_path / "tune.jsonl").exists()  # nothing was measured


def test_tune_without_the_tuner_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "tensorsmith.autotune", None)
    assert main(_tune(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "pip install 'tensorsmith[tune]'" in err
