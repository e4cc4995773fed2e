"""examples/c/run_model.c runs an exported ResNet-18 with no Python, bit for bit like the
Python runtime.

The full stack compiles bench/models.py's ResNet-18 (64x64 input, to keep CI fast) to a CPU
artifact; the system C compiler builds the example exactly as its README says; the
program (a plain C process) dlopen()s the artifact, reads the input's raw bytes and writes
each output's raw bytes. Same library, same inputs, same thread count: the outputs must be
identical to ``tensorsmith.runtime``'s, not merely close.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "c"
if str(ROOT) not in sys.path:  # the model builders live in bench/
    sys.path.insert(0, str(ROOT))

from bench.models import input_shapes, resnet18, sample_inputs  # noqa: E402

THREADS = 2


@pytest.fixture(scope="module")
def program(c_example: Path) -> Path:
    """run_model built with the documented command (tests/conftest.py)."""
    return c_example


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """ResNet-18 (batch 1, 3x64x64) exported for llvm, and seeded inputs."""
    model = resnet18(opset=17, batch=1, image=64)
    mod, params = from_onnx(model, input_shapes(model))
    path = tmp_path_factory.mktemp("resnet18") / "resnet18.so"
    build(mod, target="llvm", params=params).export_library(path)
    return path, sample_inputs(model, seed=3)


def run_program(program: Path, *args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "TSM_NUM_THREADS": str(THREADS)}
    return subprocess.run(
        [str(program), *map(str, args)], capture_output=True, text=True, env=env, timeout=300
    )


def test_c_program_matches_python_runtime_exactly(program, resnet, tmp_path) -> None:
    artifact, feeds = resnet
    module = rt.load(artifact, num_threads=THREADS)
    files = []
    for info in module.input_info:
        path = tmp_path / f"{info['name']}.in.bin"
        feeds[info["name"]].tofile(path)
        files.append(path)
    out_dir = tmp_path / "out"  # not made beforehand: the program makes it

    proc = run_program(program, artifact, *files, "--out-dir", out_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = module.run(feeds)

    assert len(expected) == len(module.output_info) >= 1
    for info, want in zip(module.output_info, expected, strict=True):
        shape = ",".join(str(d) for d in info["shape"])
        assert f"{info['name']} {info['dtype']}[{shape}]" in proc.stdout  # e.g. float32[1,1000]
        got = np.fromfile(out_dir / f"{info['name']}.bin", dtype=info["dtype"])
        assert got.size == want.size
        assert np.array_equal(got.reshape(want.shape), want), info["name"]
    assert "input  0 input float32[1,3,64,64]" in proc.stdout


def test_c_program_reports_library_errors(program, resnet, tmp_path) -> None:
    artifact, _ = resnet
    short = tmp_path / "short.bin"
    np.zeros(10, np.float32).tofile(short)
    proc = run_program(program, artifact, short)
    assert proc.returncode == 1
    # tsm_last_error's message, naming the input and both byte counts
    assert "tsm_model_set_input" in proc.stderr and "49152" in proc.stderr
    assert "40" in proc.stderr

    proc = run_program(program, artifact)  # no input file
    assert proc.returncode == 2 and "takes 1 input" in proc.stderr
    assert "float32[1,3,64,64]" in proc.stderr

    proc = run_program(program, tmp_path / "missing.so", short)
    assert proc.returncode == 1 and "cannot load" in proc.stderr


def test_c_program_repeat_prints_latency(program, resnet, tmp_path) -> None:
    artifact, feeds = resnet
    path = tmp_path / "x.bin"
    feeds["input"].tofile(path)
    proc = run_program(program, artifact, path, "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    assert "latency over 2 runs" in proc.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # no --out-dir: nothing written


def test_makefile_uses_the_documented_command() -> None:
    makefile = (EXAMPLE / "Makefile").read_text()
    assert "run_model.c -o run_model -ldl" in makefile
    assert "get_include()" in makefile


def test_c_program_runs_a_dynamic_batch_at_the_shape_given(program, tmp_path) -> None:
    """A ResNet whose batch is symbolic: --shape sizes the input, the outputs come back at
    the batch of the run, identical to the Python runtime's, and a wrong rank is the
    library's error."""
    model = resnet18(opset=17, batch="batch", image=32)
    mod, params = from_onnx(model)
    artifact = tmp_path / "dynamic.so"
    build(mod, target="llvm", params=params).export_library(artifact)
    feeds = sample_inputs(model, seed=5, dims={"batch": 3})
    feeds["input"].tofile(tmp_path / "x.bin")
    proc = run_program(program, artifact, tmp_path / "x.bin", "--shape", "0:3,3,32,32",
                       "--out-dir", tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "input  0 input float32[3,3,32,32]" in proc.stdout
    with rt.load(artifact, num_threads=THREADS) as module:
        (want,) = module.run(feeds)
    got = np.fromfile(tmp_path / "out" / "logits.bin", dtype=np.float32)
    assert want.shape == (3, 1000) and np.array_equal(got.reshape(want.shape), want)
    bad = run_program(program, artifact, tmp_path / "x.bin", "--shape", "0:3,3,32")
    assert bad.returncode == 1 and "has 4 axes, got a shape of 3" in bad.stderr, bad.stderr
