"""compile_jobs.py: kernels split into chunks of about equal size, each emitted and
compiled by a worker process, link into an artifact that computes what one process's
compile does."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm import compile_jobs
from tensorsmith.ir import GraphBuilder, build, run_graph

rng = np.random.default_rng(3)


def _layers(n: int = 6):  # noqa: ANN202
    """Products of different widths, so that every kernel is its own."""
    b = GraphBuilder()
    h = b.input("x", (4, 16), "float32")
    for i in range(n):
        w = b.constant(f"w{i}", (rng.standard_normal((h.shape[1], 16 + 8 * i)) / 4).astype(
            "float32"))
        h = b.add1("relu", [b.add1("matmul", [h, w], name=f"mm{i}")], name=f"r{i}")
    return b.finish([h])


def test_chunks_balance_sizes_and_keep_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_jobs, "MIN_PARALLEL_SIZE", 0)
    funcs = build(_layers(), target="llvm").kernels.funcs
    parts = compile_jobs.chunks(funcs, 2)
    assert len(parts) == 2 and sorted(f.name for p in parts for f in p) == sorted(
        f.name for f in funcs)
    for part in parts:
        assert [funcs.index(f) for f in part] == sorted(funcs.index(f) for f in part)
    assert compile_jobs.chunks(funcs, 1) == [funcs]
    monkeypatch.setattr(compile_jobs, "MIN_PARALLEL_SIZE", 1 << 40)
    assert compile_jobs.chunks(funcs, 8) == [funcs]  # too small to pay for a worker


def test_worker_processes_build_the_same_model(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setattr(compile_jobs, "MIN_PARALLEL_SIZE", 0)
    monkeypatch.setenv("TSM_COMPILE_JOBS", "3")
    graph = _layers()
    lib = build(graph, target="llvm")
    assert len(lib.kernels.objects) == 3
    lib.export_library(tmp_path / "m.so")
    x = rng.standard_normal((4, 16)).astype("float32")
    got = rt.load(tmp_path / "m.so", device="cpu").run({"x": x})[0]
    np.testing.assert_allclose(got, run_graph(graph, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_failing_worker_names_the_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_jobs, "MIN_PARALLEL_SIZE", 0)
    funcs = build(_layers(2), target="llvm").kernels.funcs
    monkeypatch.setattr(sys, "executable", shutil.which("false") or "/bin/false")
    with pytest.raises(RuntimeError, match="TSM_COMPILE_JOBS=1"):
        compile_jobs.compile_objects(funcs, jobs=2)


def test_emitted_size_counts_unrolled_copies_and_one_arm_of_a_table() -> None:
    """Chunks are balanced by what emitting a kernel writes out: an unrolled loop's
    copies, and of a branch on unrolled indices (a Winograd table) the one arm taken."""
    from tensorsmith.ir.te.expr import Var, const
    from tensorsmith.ir.te.stmt import Buffer, For, IfThenElse, PrimFunc, Store

    out = Buffer("out", (64,), "float32")
    i, j = Var("i"), Var("j")
    store = Store(out, i, const(1.0))  # 2 nodes: the index and the value
    table = IfThenElse(i.eq(0), store, Store(out, i, const(2.0)))
    on_loop = IfThenElse(j.eq(0), store, Store(out, i, const(2.0)))

    def size(body) -> int:  # noqa: ANN001
        return compile_jobs.emitted_size(PrimFunc("k", [out], body, 0, 1))

    assert size(For(i, 8, "unrolled", store)) == 8 * 2
    assert size(For(i, 8, "serial", store)) == 2
    assert size(For(i, 8, "unrolled", table)) == 8 * 2  # one arm per copy
    assert size(For(j, 8, "serial", For(i, 8, "unrolled", on_loop))) == 8 * 2 * 2  # both
