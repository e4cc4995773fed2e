"""A module's lifetime: calls after close(), close() racing a run, repeated load/close of a
rewritten artifact, loading the verified bytes, and byte counts that must not wrap."""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime.artifact import PARAMS_ALIGN, read_artifact, write_artifact
from tensorsmith.runtime.cpu import TensorSpec
from tensorsmith.runtime.module import _tensors

CLOSED = "was closed; load it again with tensorsmith.runtime.load"


def calls(m: rt.GraphModule, inputs: dict) -> dict:
    """Every call of a module that reaches native code."""
    return {
        "run": lambda: m.run(inputs),
        "call": lambda: m(**inputs),
        "set_input": lambda: m.set_input("x", inputs["x"]),
        "get_output": lambda: m.get_output(0),
        "profile": lambda: m.profile(inputs, repeat=1),
        "set_num_threads": lambda: m.set_num_threads(1),
    }


def test_every_call_after_close_is_refused(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    m.run(inputs)
    m.close()
    assert m.closed and "(closed)" in repr(m)
    for call in calls(m, inputs).values():
        with pytest.raises(rt.InputError, match=CLOSED):
            call()
    m.close()  # idempotent
    assert m.input_info[0]["name"] == "x"  # the description needs no native model


def test_with_block_closes(model_artifact, inputs) -> None:
    with rt.load(model_artifact.path) as m:
        m.run(inputs)
    with pytest.raises(rt.InputError, match=CLOSED):
        m.run(inputs)


def race_close(m: rt.GraphModule, inputs: dict, run_in_threads) -> list[BaseException]:
    """Two threads run `m` while two others close it; returns what went wrong."""

    def runner() -> None:
        for _ in range(20):
            try:
                m.run(inputs)
            except rt.InputError as e:
                if CLOSED not in str(e):
                    raise

    return run_in_threads([runner, runner, m.close, m.close])


def test_close_racing_runs_never_crashes(model_artifact, inputs, run_in_threads) -> None:
    for _ in range(20):
        m = rt.load(model_artifact.path, num_threads=2)
        errors = race_close(m, inputs, run_in_threads)
        assert not errors, errors
        assert m.closed


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _rewrite(path: Path) -> None:
    """Write the artifact again beside itself and rename it into place, as an export does:
    the path then names a new file."""
    tmp = path.with_name(path.name + ".new")
    shutil.copyfile(path, tmp)
    os.replace(tmp, path)


def test_reloading_a_rewritten_artifact_keeps_threads_and_memory_flat(
    model_artifact, inputs, tmp_path
) -> None:
    path = tmp_path / "model.so"
    shutil.copyfile(model_artifact.path, path)

    def cycle() -> None:
        _rewrite(path)
        m = rt.load(path, num_threads=3)
        m.run(inputs)
        m.close()

    for _ in range(3):  # warm up: imports, allocator pools
        cycle()
    gc.collect()
    threads, fds, rss = _threads(), _fds(), _rss_kib()
    for _ in range(30):
        cycle()
    gc.collect()
    assert _threads() == threads
    assert _fds() == fds
    # Each leaked library held ~1 MB (its mappings, its pool's thread stacks).
    assert _rss_kib() - rss < 8 * 1024


def test_a_closed_module_leaves_other_modules_of_the_library_running(
    model_artifact, inputs
) -> None:
    a, b = rt.load(model_artifact.path), rt.load(model_artifact.path)
    want = a.run(inputs)
    a.close()
    for got, expected in zip(b.run(inputs), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    b.close()


def test_dropped_modules_release_their_library(model_artifact, inputs, tmp_path) -> None:
    path = tmp_path / "model.so"
    shutil.copyfile(model_artifact.path, path)
    for _ in range(3):
        _rewrite(path)
        rt.load(path, num_threads=3).run(inputs)
    gc.collect()
    threads = _threads()
    for _ in range(10):
        _rewrite(path)
        rt.load(path, num_threads=3).run(inputs)
        gc.collect()
    assert _threads() == threads


def test_loads_the_bytes_it_verified(model_artifact, inputs, tmp_path, monkeypatch) -> None:
    """A file swapped in at the path between the checksum and dlopen is not what runs."""
    import tensorsmith.runtime.cpu as cpu

    path = tmp_path / "model.so"
    shutil.copyfile(model_artifact.path, path)
    impostor = tmp_path / "impostor.so"
    impostor.write_bytes(b"not even a library")
    opened = cpu.open_library

    def swap_then_open(artifact, fd):  # the swap lands after the checks, before dlopen
        os.replace(impostor, path)
        return opened(artifact, fd)

    monkeypatch.setattr(cpu, "open_library", swap_then_open)
    m = rt.load(path)
    np.testing.assert_array_equal(m.run(inputs)[0], model_artifact.reference(inputs["x"], 3)[0])
    m.close()


def test_abi_is_checked_before_the_library_is_loaded(model_artifact, tmp_path, monkeypatch) -> None:
    """A library of a C ABI this runtime does not know never gets its constructors run."""
    import tensorsmith.runtime.cpu as cpu

    monkeypatch.setattr(cpu, "C_ABI_FORMAT_VERSIONS", frozenset({99}))
    dlopened: list[str] = []
    monkeypatch.setattr(cpu.ctypes, "CDLL", lambda name, *a, **k: dlopened.append(name))
    with pytest.raises(rt.ArtifactError, match="C ABI"):
        rt.load(model_artifact.path)
    assert not dlopened


def test_python_byte_counts_do_not_wrap(model_artifact) -> None:
    """The shape (2**62 + 1000, 4) has 4000 elements in wrapped int64 arithmetic, so a
    library claiming 16000 bytes for it must not pass."""
    artifact = read_artifact(model_artifact.path)
    spec = TensorSpec("y", "float32", (2**62 + 1000, 4), 16000)
    with pytest.raises(rt.ArtifactError, match="contradicts"):
        _tensors(artifact, [spec], "outputs")
    spec = TensorSpec("y", "float32", (-1, -4000), 16000)
    with pytest.raises(rt.ArtifactError, match="negative"):
        _tensors(artifact, [spec], "outputs")


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ("{4611686018427388904LL, 1}", "more bytes than 64 bits count"),  # * 4 wraps to 4000
        ("{4294967296LL, 4294967296LL}", "more elements than 64 bits count"),
        ("{-1, -1000}", "negative dimension"),
        ("{2, 1000}", "shape and dtype make 8000"),
    ],
)
def test_c_byte_counts_do_not_wrap(toolchain, tmp_path, shape: str, message: str) -> None:
    """tsm_model_create refuses an output whose shape contradicts its byte count."""
    plan = (toolchain.test_csrc / "model_plan.c").read_text()
    plan = plan.replace("y_shape[] = {1, 1000}", f"y_shape[] = {shape}")
    (tmp_path / "model_plan.c").write_text(plan)
    (tmp_path / "metadata.h").write_text(
        'static const char metadata_json[] = "{}";\n#define PARAMS_ID {0}\n'
    )
    library = toolchain.link_library(
        tmp_path / "bad.so",
        [tmp_path / "model_plan.c", toolchain.test_csrc / "model_kernels.c"],
        [tmp_path, toolchain.test_csrc],
        cwd=tmp_path,
    )
    params = {"params": bytes(8032), "params.id": bytes([0] * 16)}
    write_artifact(tmp_path / "bad.tsm", library.read_bytes(), params, {"target": "llvm"},
                   align={"params": PARAMS_ALIGN})
    dll = ctypes.CDLL(str(tmp_path / "bad.tsm"))
    dll.tsm_model_create.restype = ctypes.c_void_p
    dll.tsm_last_error.restype = ctypes.c_char_p
    assert not dll.tsm_model_create()
    assert message in dll.tsm_last_error().decode()
