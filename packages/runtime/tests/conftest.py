"""Fixtures that build a real CPU artifact from hand-written C, with no compiler involved.

The test model (csrc/model_plan.c, csrc/model_kernels.c) has the shape of what
codegen-llvm generates: a plan and kernels, linked with the runtime's C support code
(codegen-llvm's csrc), and the weights appended to the library in the artifact file. `link_library`
is the test's own linker; the production one lives in codegen-llvm and follows the
instructions at the top of csrc/tsm_plan.h.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tensorsmith.runtime import get_include
from tensorsmith.runtime.artifact import PARAMS_ALIGN, PARAMS_ID_BYTES, write_artifact

TESTS = Path(__file__).parent
TEST_CSRC = TESTS / "csrc"
REPO = TESTS.parents[2]
RUNTIME_CSRC = REPO / "packages/codegen-llvm/src/tensorsmith/codegen/llvm/csrc"
CC = os.environ.get("CC", "cc")
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def compiler() -> str:
    if shutil.which(CC) is None:
        pytest.skip(f"no C compiler ({CC}) to build test artifacts")
    return CC


def compile_c(args: list[str | Path], cwd: Path) -> None:
    """Run the C compiler; on failure, fail the test with its diagnostics."""
    cmd = [compiler(), *map(str, args)]
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)}\n{result.stdout}{result.stderr}")


def link_library(out: Path, sources: list[Path], include_dirs: list[Path], cwd: Path) -> Path:
    """Compile and link sources with the runtime's csrc into one shared library."""
    runtime_sources = sorted(RUNTIME_CSRC.glob("*.c"))
    includes = [f"-I{d}" for d in [*include_dirs, RUNTIME_CSRC, Path(get_include())]]
    compile_c(
        [
            "-O2",
            "-fPIC",
            "-shared",
            "-std=c11",
            "-fvisibility=hidden",  # as codegen-llvm links: only what is marked is exported
            *WARNINGS,
            *includes,
            *sources,
            *runtime_sources,
            "-o",
            out,
            "-lpthread",
            "-lm",
        ],
        cwd,
    )
    return out


@dataclass(frozen=True)
class BuiltModel:
    """The built test artifact and what it needs to compute expected outputs."""

    path: Path
    library: Path  # the bare shared library, before write_artifact
    metadata: dict
    w: np.ndarray
    b: np.ndarray
    sections: dict[str, bytes]  # the weights the artifact appends to the library

    def reference(self, x: np.ndarray, s: int) -> list[np.ndarray]:
        t = x * self.w + self.b
        y = (np.maximum(t, np.float32(0)) * np.float32(s)).astype(np.float32)
        return [y, np.array([y.astype(np.float64).sum()])]


def model_metadata() -> dict:
    return {
        "target": "llvm",
        "producer": {"tensorsmith-runtime-tests": "0"},
        "inputs": [
            {"name": "x", "shape": [1, 1000], "dtype": "float32"},
            {"name": "s", "shape": [], "dtype": "int64"},
        ],
        "outputs": [
            {"name": "y", "shape": [1, 1000], "dtype": "float32"},
            {"name": "total", "shape": [1], "dtype": "float64"},
        ],
        "kernels": [
            {"name": "tsm_kernel_affine", "ops": ["Mul", "Add"], "nodes": ["mul", "add"]},
            {"name": "tsm_kernel_relu_scale", "ops": ["Relu", "Mul"], "nodes": ["relu", "scale"]},
            {"name": "tsm_kernel_sum", "ops": ["ReduceSum"], "nodes": ["sum"]},
        ],
        "steps": [
            {"kernel": "tsm_kernel_affine", "args": [0, 2, 3, 4]},
            {"kernel": "tsm_kernel_relu_scale", "args": [4, 1, 5]},
            {"kernel": "tsm_kernel_sum", "args": [5, 6]},
        ],
        "buffers": [
            {"kind": "workspace", "offset": 0, "nbytes": 4000},
            {"kind": "workspace", "offset": 4032, "nbytes": 8},
            {"kind": "param", "offset": 0, "nbytes": 4000},
            {"kind": "param", "offset": 4032, "nbytes": 4000},
            {"kind": "workspace", "offset": 4096, "nbytes": 4000},
            {"kind": "workspace", "offset": 8128, "nbytes": 4000},
            {"kind": "workspace", "offset": 12160, "nbytes": 8},
        ],
        "workspace_bytes": 12224,
        "params_bytes": 8032,
    }


def build_test_model(directory: Path) -> BuiltModel:
    """Build csrc/model_*.c + params.S into a library and wrap it as an artifact."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    params = np.zeros(8032, np.uint8)
    params[:4000] = w.view(np.uint8)
    params[4032:] = b.view(np.uint8)
    params_id = bytes(range(7, 7 + PARAMS_ID_BYTES))
    metadata = model_metadata()
    write_metadata_header(directory, metadata,
                          f"#define PARAMS_ID {{{', '.join(map(str, params_id))}}}\n")
    library = link_library(
        directory / "lib.so",
        [TEST_CSRC / "model_plan.c", TEST_CSRC / "model_kernels.c"],
        [directory, TEST_CSRC],
        cwd=directory,
    )
    path = directory / "model.so"
    sections = {"params": params.tobytes(), "params.id": params_id}
    write_artifact(path, library.read_bytes(), sections, metadata, align={"params": PARAMS_ALIGN})
    return BuiltModel(path, library, metadata, w, b, sections)


@pytest.fixture(scope="session")
def model_artifact(tmp_path_factory: pytest.TempPathFactory) -> BuiltModel:
    return build_test_model(tmp_path_factory.mktemp("model"))


def dynamic_metadata() -> dict:
    """The plan of csrc/dynamic_plan.c as build would write it."""
    def kernel(name: str) -> dict:
        return {"name": f"tsm_kernel_{name}", "ops": [name], "nodes": [name]}

    def placed(size: str, first: int, last: int) -> dict:
        return {"kind": "workspace", "offset": 0, "nbytes": 0, "symbolic_nbytes": size,
                "first_step": first, "last_step": last}

    return {
        "target": "llvm",
        "device": "cpu",
        "symbols": ["batch", "seq"],
        "producer": {"tensorsmith-runtime-tests": "0"},
        "inputs": [
            {"name": "x", "shape": ["batch", 3], "dtype": "float32", "buffer": 0},
            {"name": "m", "shape": ["batch", "seq"], "dtype": "float32", "buffer": 1},
            {"name": "bias", "shape": ["seq + 1"], "dtype": "float32", "buffer": 2},
            {"name": "scale", "shape": [], "dtype": "float32", "buffer": 3},
        ],
        "outputs": [
            {"name": "r", "shape": ["batch"], "dtype": "float32", "buffer": 7},
            {"name": "p", "shape": ["seq + 1"], "dtype": "float32", "buffer": 8},
        ],
        "kernels": [kernel("add_one"), kernel("row_sum"), kernel("col")],
        "steps": [
            {"kernel": "tsm_kernel_add_one", "name": "add_one", "args": [0, 6, 4]},
            {"kernel": "tsm_kernel_row_sum", "name": "row_sum", "args": [6, 1, 3, 7, 5]},
            {"kernel": "tsm_kernel_col", "name": "col", "args": [1, 2, 8, 9, 5]},
        ],
        "buffers": [
            placed("12*batch", 0, 3),
            placed("4*batch*seq", 0, 3),
            placed("4*seq + 4", 0, 3),
            {"kind": "workspace", "offset": 0, "nbytes": 4},
            {"kind": "workspace", "offset": 64, "nbytes": 8, "symbols": ["batch"]},
            {"kind": "workspace", "offset": 128, "nbytes": 16, "symbols": ["batch", "seq"]},
            placed("12*batch", 0, 1),
            placed("4*batch", 1, 3),
            placed("4*seq + 4", 2, 3),
            placed("max(1152921504606846976*(seq//1000), 4)", 2, 2),
        ],
        "workspace_bytes": 192,
        "params_bytes": 0,
    }


@dataclass(frozen=True)
class DynamicModel:
    """The built artifact of csrc/dynamic_plan.c and its NumPy reference."""

    path: Path
    library: Path
    metadata: dict

    @staticmethod
    def reference(x: np.ndarray, m: np.ndarray, bias: np.ndarray,
                  scale: np.ndarray) -> list[np.ndarray]:
        t = x + np.float32(1)
        r = scale * (t.sum(axis=1) + m.sum(axis=1))
        seq = m.shape[1]
        p = np.concatenate([bias[:seq] + m.sum(axis=0), bias[seq:] + np.float32(m.shape[0])])
        return [r.astype(np.float32), p.astype(np.float32)]


def write_metadata_header(directory: Path, metadata: dict, extra: str = "") -> None:
    """metadata.h for a hand-written plan: the library carries the metadata too
    (tsm_artifact_metadata), as bytes, so nothing needs escaping."""
    raw = json.dumps(metadata).encode()
    array = ", ".join(str(byte) for byte in [*raw, 0])
    (directory / "metadata.h").write_text(
        f"static const char metadata_json[] = {{{array}}};\n{extra}")


def build_dynamic_model(directory: Path) -> DynamicModel:
    """Build csrc/dynamic_*.c into a library and wrap it as an artifact (no weights)."""
    directory.mkdir(parents=True, exist_ok=True)
    metadata = dynamic_metadata()
    write_metadata_header(directory, metadata)
    library = link_library(
        directory / "lib.so",
        [TEST_CSRC / "dynamic_plan.c", TEST_CSRC / "dynamic_kernels.c"],
        [directory, TEST_CSRC],
        cwd=directory,
    )
    path = directory / "dynamic.so"
    write_artifact(path, library.read_bytes(), {}, metadata)
    return DynamicModel(path, library, metadata)


@pytest.fixture(scope="session")
def dynamic_artifact(tmp_path_factory: pytest.TempPathFactory) -> DynamicModel:
    return build_dynamic_model(tmp_path_factory.mktemp("dynamic"))


class Toolchain:
    """The C build helpers, for tests that compile their own programs."""

    test_csrc = TEST_CSRC
    runtime_csrc = RUNTIME_CSRC
    include = Path(get_include())
    warnings = WARNINGS
    compile = staticmethod(compile_c)
    link_library = staticmethod(link_library)


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    compiler()
    return Toolchain()


@pytest.fixture
def inputs() -> dict[str, object]:
    x = np.linspace(-1.0, 1.0, 1000, dtype=np.float32).reshape(1, 1000)
    return {"x": x, "s": np.array(3, dtype=np.int64)}


@pytest.fixture
def run_in_threads():
    """Run each job in a thread of its own, started together; return what they raised."""
    return _run_in_threads


def _run_in_threads(jobs) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def guarded(job) -> None:
        try:
            start.wait()
            job()
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors
