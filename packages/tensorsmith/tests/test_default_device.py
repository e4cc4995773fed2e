"""An artifact runs on the kind of device it was compiled for unless told otherwise:
``tensorsmith compile`` without ``-o`` names it by its target (``.so``, ``.vulkan.tsm``,
``.opencl.tsm``), and ``tensorsmith run`` / ``tensorsmith.runtime.load`` without a device
pick the first device of the kind its plan names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tensorsmith.runtime as rt

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mlp.onnx"

CASES = [
    ("llvm", ".so", "cpu"),
    pytest.param("vulkan", ".vulkan.tsm", "vulkan", marks=pytest.mark.vulkan),
    pytest.param("opencl", ".opencl.tsm", "opencl", marks=pytest.mark.opencl),
]


def tsm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tensorsmith.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(("target", "suffix", "device"), CASES)
def test_artifact_runs_on_its_own_kind_of_device(target: str, suffix: str, device: str,
                                                  tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "mlp.onnx")
    proc = tsm("compile", "mlp.onnx", "--target", target, "--input-shape", "input:1,784",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    artifact = tmp_path / f"mlp{suffix}"
    assert artifact.is_file(), sorted(p.name for p in tmp_path.iterdir())

    proc = tsm("run", artifact.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"ran {artifact.name} on {device} with" in proc.stdout
    with rt.load(artifact) as module:
        assert module.device.kind == device
