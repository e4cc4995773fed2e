"""The C side: the ABI called directly, the library's dependencies and exports, a C program
with no Python, the thread pool on its own, and warnings-clean C support code."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def lib(model_artifact) -> ctypes.CDLL:
    dll = ctypes.CDLL(str(model_artifact.path))
    dll.tsm_model_create.restype = ctypes.c_void_p
    dll.tsm_model_destroy.argtypes = [ctypes.c_void_p]
    dll.tsm_last_error.restype = ctypes.c_char_p
    for name in ("tsm_model_set_input", "tsm_model_get_output"):
        getattr(dll, name).argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
    for name in ("input_name", "output_name", "input_dtype", "step_name"):
        fn = getattr(dll, f"tsm_model_{name}")
        fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int]
    for name in ("input_ndim", "output_ndim"):
        getattr(dll, f"tsm_model_{name}").argtypes = [ctypes.c_void_p, ctypes.c_int]
    for name in ("input_nbytes", "output_nbytes"):
        fn = getattr(dll, f"tsm_model_{name}")
        fn.restype, fn.argtypes = ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int]
    for name in ("input_index", "output_index"):
        getattr(dll, f"tsm_model_{name}").argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    for name in ("run", "num_inputs", "num_outputs", "num_steps"):
        getattr(dll, f"tsm_model_{name}").argtypes = [ctypes.c_void_p]
    dll.tsm_model_input_shape.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    dll.tsm_model_run_profiled.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    dll.tsm_artifact_metadata.restype = ctypes.c_char_p
    return dll


@pytest.fixture
def handle(lib):
    model = lib.tsm_model_create()
    assert model
    yield model
    lib.tsm_model_destroy(model)


def error(lib) -> str:
    return lib.tsm_last_error().decode()


def test_introspection(lib, handle) -> None:
    assert lib.tsm_model_num_inputs(handle) == 2 and lib.tsm_model_num_outputs(handle) == 2
    assert lib.tsm_model_input_name(handle, 1) == b"s"
    assert lib.tsm_model_output_name(handle, 1) == b"total"
    assert lib.tsm_model_input_dtype(handle, 0) == b"float32"
    assert lib.tsm_model_input_ndim(handle, 0) == 2 and lib.tsm_model_input_ndim(handle, 1) == 0
    shape = (ctypes.c_int64 * 2)()
    assert lib.tsm_model_input_shape(handle, 0, shape) == 0 and list(shape) == [1, 1000]
    assert lib.tsm_model_input_shape(handle, 1, None) == 0  # ndim 0 needs no room
    assert lib.tsm_model_input_nbytes(handle, 0) == 4000
    assert lib.tsm_model_output_nbytes(handle, 1) == 8
    assert lib.tsm_model_input_index(handle, b"s") == 1
    assert lib.tsm_model_output_index(handle, b"total") == 1
    assert lib.tsm_model_num_steps(handle) == 3
    assert lib.tsm_model_step_name(handle, 2) == b"reduce_sum"
    metadata = json.loads(lib.tsm_artifact_metadata())
    assert metadata["inputs"][0]["name"] == "x" and "checksum" not in metadata


def test_out_of_range_and_absent_are_refused(lib, handle) -> None:
    assert lib.tsm_model_input_name(handle, 2) is None
    assert "input index 2 is out of range: the model has 2 inputs" in error(lib)
    assert lib.tsm_model_output_name(handle, -1) is None
    assert lib.tsm_model_input_ndim(handle, 9) == -1
    assert lib.tsm_model_input_nbytes(handle, 9) == 0
    assert lib.tsm_model_step_name(handle, 3) is None
    assert "step index 3 is out of range" in error(lib)
    assert lib.tsm_model_input_index(handle, b"input") == -1
    assert "has no input named 'input'" in error(lib)
    assert lib.tsm_model_input_shape(handle, 0, None) != 0
    assert "shape is NULL" in error(lib)


def test_wrong_byte_counts_and_indices_are_refused(lib, handle) -> None:
    x = np.zeros(1000, np.float32)
    assert lib.tsm_model_set_input(handle, 0, x.ctypes.data, 12) != 0
    assert "input 'x' (index 0) takes 4000 bytes, got 12" in error(lib)
    assert lib.tsm_model_set_input(handle, 0, x.ctypes.data, 4004) != 0
    assert lib.tsm_model_set_input(handle, 5, x.ctypes.data, 4000) != 0
    assert "tsm_model_set_input: input index 5 is out of range" in error(lib)
    assert lib.tsm_model_set_input(handle, 0, None, 4000) != 0
    assert "is NULL" in error(lib)

    assert lib.tsm_model_run(handle) != 0
    assert "input 'x' (index 0) was never set" in error(lib)
    assert lib.tsm_model_get_output(handle, 0, x.ctypes.data, 4000) != 0
    assert "call tsm_model_run first" in error(lib)

    s = np.array(2, np.int64)
    assert lib.tsm_model_set_input(handle, 0, x.ctypes.data, 4000) == 0
    assert lib.tsm_model_set_input(handle, 1, s.ctypes.data, 8) == 0
    assert lib.tsm_model_run(handle) == 0
    small = np.zeros(10, np.float32)
    assert lib.tsm_model_get_output(handle, 0, small.ctypes.data, small.nbytes) != 0
    assert "output 'y' (index 0) has 4000 bytes, got room for 40" in error(lib)
    assert lib.tsm_model_get_output(handle, 2, small.ctypes.data, 4000) != 0
    assert "output index 2 is out of range" in error(lib)
    y = np.empty(1000, np.float32)
    assert lib.tsm_model_get_output(handle, 0, y.ctypes.data, 4000) == 0

    steps = (ctypes.c_double * 3)()
    assert lib.tsm_model_run_profiled(handle, None) != 0
    assert lib.tsm_model_run_profiled(handle, steps) == 0 and min(steps) >= 0


def test_null_model_and_bad_thread_count(lib) -> None:
    assert lib.tsm_model_run(None) != 0 and "the model is NULL" in error(lib)
    assert lib.tsm_model_num_inputs(None) == -1
    lib.tsm_model_destroy(None)
    assert lib.tsm_set_num_threads(-3) != 0
    assert "-3 threads is not a thread count" in error(lib)
    assert lib.tsm_set_num_threads(0) == 0


def test_internal_symbols_are_hidden(lib) -> None:
    for internal in ("tsm_graph_plan", "tsm_params", "tsm_kernel_affine"):
        assert not hasattr(lib, internal), internal
    assert hasattr(lib, "tsm_parallel_for")


def test_needs_only_libc_libm_libpthread(model_artifact) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("readelf is not installed")
    dynamic = subprocess.run(
        ["readelf", "-d", "-l", str(model_artifact.path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    # ld-linux is glibc's dynamic loader (it provides __tls_get_addr for tsm_last_error).
    allowed = ("libc.so", "libm.so", "libpthread.so", "ld-linux")
    assert needed and all(n.startswith(allowed) for n in needed), needed
    stack = [line for line in dynamic.splitlines() if "GNU_STACK" in line]
    assert stack and "RWE" not in dynamic.split("GNU_STACK")[1].splitlines()[1]


def test_c_program_runs_the_artifact_without_python(toolchain, model_artifact, tmp_path) -> None:
    program = tmp_path / "run_model"
    toolchain.compile(
        [
            "-O2",
            "-std=c11",
            *toolchain.warnings,
            f"-I{toolchain.include}",
            toolchain.test_csrc / "run_model.c",
            model_artifact.path,
            "-o",
            program,
        ],
        tmp_path,
    )
    result = subprocess.run([str(program), "4"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["outputs"] == "y float32 ndim 2 shape 1 1000"
    x = (np.arange(1000, dtype=np.float32) / np.float32(1000)).reshape(1, 1000)
    y, total = model_artifact.reference(x, 4)
    first, last = map(float, lines["y"].split())
    assert first == pytest.approx(y[0, 0], abs=1e-5) and last == pytest.approx(y[0, -1], abs=1e-5)
    assert float(lines["total"]) == pytest.approx(total[0], rel=1e-6)


@pytest.fixture(scope="module")
def pool_test(toolchain, tmp_path_factory) -> Path:
    program = tmp_path_factory.mktemp("pool") / "test_threadpool"
    toolchain.compile(
        [
            "-O2",
            "-std=c11",
            *toolchain.warnings,
            f"-I{toolchain.runtime_csrc}",
            toolchain.test_csrc / "test_threadpool.c",
            toolchain.runtime_csrc / "tsm_threadpool.c",
            "-o",
            program,
            "-lpthread",
        ],
        program.parent,
    )
    return program


def test_thread_pool(pool_test) -> None:
    result = subprocess.run([str(pool_test)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_thread_count_comes_from_the_environment(pool_test) -> None:
    def threads(value: str | None) -> int:
        env = {k: v for k, v in os.environ.items() if k != "TSM_NUM_THREADS"}
        if value is not None:
            env["TSM_NUM_THREADS"] = value
        out = subprocess.run([str(pool_test), "threads"], env=env, capture_output=True, text=True)
        return int(out.stdout)

    cores = len(os.sched_getaffinity(0))
    assert threads(None) == cores
    assert threads("3") == 3
    assert threads("0") == cores and threads("lots") == cores  # ignored, not fatal


def test_support_code_is_warnings_clean(toolchain, tmp_path) -> None:
    for source in sorted(toolchain.runtime_csrc.glob("*.c")):
        toolchain.compile(
            [
                "-O2",
                "-fPIC",
                "-std=c11",
                "-pedantic",
                *toolchain.warnings,
                f"-I{toolchain.runtime_csrc}",
                f"-I{toolchain.include}",
                "-c",
                source,
                "-o",
                tmp_path / f"{source.stem}.o",
            ],
            tmp_path,
        )
    header_user = tmp_path / "uses_header.c"
    header_user.write_text('#include "tensorsmith_runtime.h"\nint main(void) { return 0; }\n')
    toolchain.compile(
        [
            "-std=c99",
            "-pedantic",
            *toolchain.warnings,
            f"-I{toolchain.include}",
            "-c",
            header_user,
            "-o",
            tmp_path / "uses_header.o",
        ],
        tmp_path,
    )
