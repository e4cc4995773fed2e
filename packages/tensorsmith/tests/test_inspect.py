"""``tensorsmith inspect``: an artifact described from its metadata, for any target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tensorsmith.runtime.artifact import write_artifact

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.onnx"


def tsm(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tensorsmith.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example MLP compiled for llvm and for opencl (code generation needs no GPU)."""
    out = tmp_path_factory.mktemp("inspect")
    paths = {}
    for target in ("llvm", "opencl"):
        path = out / f"mlp_{target}.so"
        proc = tsm("compile", MLP, "--target", target, "--input-shape", "input:2,784", "-o", path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        paths[target] = path
    return paths


# The model's weights, 64-byte aligned. The artifact may hold a little more: weights the
# kernels read in panels of the target's vector width are stored that way, zero-padded.
WEIGHT_BYTES = 940_608


def _params_bytes(path) -> int:  # noqa: ANN001
    return json.loads(tsm("inspect", path, "--json").stdout)["params_bytes"]


def test_inspect_text(artifacts) -> None:
    proc = tsm("inspect", artifacts["llvm"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    params = _params_bytes(artifacts["llvm"])
    for fragment in (
        "target     llvm",
        "format     version 2",
        "tensorsmith-ir",
        "input float32[2,784]",
        "output float32[2,10]",
        "kernels    4 (4 steps per run)",
        "matmul+add+relu  [fc1, add1, relu1]",
        "without memory planning",
        f"weights    {params:,} bytes",
        f"file       {artifacts['llvm'].stat().st_size:,} bytes",
    ):
        assert fragment in out, (fragment, out)


def test_inspect_json(artifacts) -> None:
    proc = tsm("inspect", artifacts["llvm"], "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["target_kind"] == "llvm" and info["format_version"] == 2
    assert info["file_bytes"] == artifacts["llvm"].stat().st_size
    assert info["inputs"] == [{"name": "input", "shape": [2, 784], "dtype": "float32"}]
    assert info["outputs"] == [{"name": "output", "shape": [2, 10], "dtype": "float32"}]
    assert [k["ops"] for k in info["kernels"]][-1] == ["softmax"]
    assert info["steps"] == len(info["kernels"]) == 4
    assert 0 < info["workspace_bytes"] <= info["unplanned_workspace_bytes"]
    assert WEIGHT_BYTES <= info["params_bytes"] <= 1.01 * WEIGHT_BYTES
    # the weights follow the library (section "params"), then the id tying them to it
    assert info["sections"] == {"params": info["params_bytes"], "params.id": 16}
    assert 0 < info["payload_bytes"] < info["file_bytes"] - info["params_bytes"]
    assert "tensorsmith-runtime" in info["producer"]


def test_inspect_gpu_artifact(artifacts) -> None:
    info = json.loads(tsm("inspect", artifacts["opencl"], "--json").stdout)
    assert info["target_kind"] == "opencl" and info["payload_bytes"] == 0
    assert set(info["sections"]) == {"opencl.source", "params"}
    assert info["sections"]["params"] == info["params_bytes"]
    text = tsm("inspect", artifacts["opencl"]).stdout
    assert "opencl.source" in text and "target     opencl" in text


def test_inspect_loads_no_native_code(tmp_path) -> None:
    """A CPU artifact whose payload is no shared library at all: loading it would fail,
    inspecting it works, because only the metadata is read."""
    path = tmp_path / "fake.so"
    metadata = {
        "target": "llvm -mcpu=some-other-cpu",
        "inputs": [{"name": "x", "shape": [3], "dtype": "float32"}],
        "outputs": [{"name": "y", "shape": [3], "dtype": "float32"}],
        "kernels": [{"name": "k0", "ops": ["exp"], "nodes": ["Exp_0"]}],
        "steps": [{"kernel": "k0", "args": [0, 1]}],
        "workspace_bytes": 128,
        "params_bytes": 0,
    }
    write_artifact(path, b"not an ELF file", {}, metadata)
    proc = tsm("inspect", path, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["target"] == "llvm -mcpu=some-other-cpu" and info["target_kind"] == "llvm"
    assert info["unplanned_workspace_bytes"] is None and info["producer"] == {}
    assert "k0  exp  [Exp_0]" in tsm("inspect", path).stdout
    assert tsm("run", path).returncode == 2  # while loading it does fail


def test_inspect_damaged_or_missing(tmp_path, artifacts) -> None:
    damaged = tmp_path / "damaged.so"
    data = bytearray(artifacts["llvm"].read_bytes())
    data[100] ^= 0xFF
    damaged.write_bytes(bytes(data))
    proc = tsm("inspect", damaged)
    assert proc.returncode == 2 and "damaged" in proc.stderr and "Traceback" not in proc.stderr
    proc = tsm("inspect", tmp_path / "nope.so")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
