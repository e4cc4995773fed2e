"""Statements the default GPU schedule does not produce yet but schedules may: shared and
local allocations, workgroup barriers, if/else, unrolled loops, 3-D grids. Built as
tensor IR by hand, compiled, validated and run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.spirv import codegen
from tensorsmith.ir import Target
from tensorsmith.ir.te.expr import Load, Var, binary, const
from tensorsmith.ir.te.stmt import (
    Allocate,
    Barrier,
    Buffer,
    For,
    IfThenElse,
    PrimFunc,
    Seq,
    Store,
)
from tensorsmith.runtime.plan import Plan

pytestmark = pytest.mark.vulkan

GROUPS, WG = 5, 64


def plan_for(func: PrimFunc) -> Plan:
    """A plan running ``func`` once: every parameter its own workspace buffer."""
    buffers, offset = [], 0
    for p in func.params:
        buffers.append({"kind": "workspace", "offset": offset, "nbytes": p.nbytes})
        offset += -(-p.nbytes // 64) * 64

    def io(i: int) -> dict:
        p = func.params[i]
        return {"name": p.name, "shape": list(p.shape), "dtype": p.dtype, "buffer": i}

    return Plan.from_json({
        "target": "vulkan", "device": "vulkan",
        "inputs": [io(i) for i in range(func.num_inputs)],
        "outputs": [io(i) for i in range(func.num_inputs, len(func.params))],
        "kernels": [{"name": func.name, "ops": [], "nodes": []}],
        "steps": [{"kernel": func.name, "name": "step", "args": list(range(len(buffers)))}],
        "buffers": buffers, "workspace_bytes": offset, "params_bytes": 0})


def shared_tile_kernel() -> PrimFunc:
    x = Buffer("x", (GROUPS * WG,), "float32")
    y = Buffer("y", (GROUPS * WG,), "float32")
    b, t, j = Var("b"), Var("t"), Var("j")
    tile = Buffer("tile", (WG,), "float32", "shared")
    acc = Buffer("acc", (4,), "float32", "local")
    gi = b * WG + t
    body = Seq([
        Store(tile, t, Load(x, (gi,), "float32")),
        Barrier(),
        Allocate(acc, Seq([
            For(j, 4, "unrolled", Store(acc, j, Load(tile, ((t + j) % WG,), "float32"))),
            IfThenElse(t < 32,
                       Store(y, gi, Load(acc, (const(0),), "float32")
                             + Load(acc, (const(3),), "float32")),
                       Store(y, gi, -Load(tile, (const(WG - 1) - t,), "float32"))),
        ])),
    ])
    nest = For(b, GROUPS, "blockIdx.x", For(t, WG, "threadIdx.x", Allocate(tile, body)))
    return PrimFunc("tile_kernel", [x, y], nest, 1, 1)


def test_shared_memory_barrier_local_array_and_branches(tmp_path: Path) -> None:
    func = shared_tile_kernel()
    kernels = codegen([func], Target.parse("vulkan"))
    kernels.validate()
    text = kernels.source("spirv")
    assert "OpControlBarrier" in text and "Workgroup" in text
    assert "OpLoopMerge" not in text  # the short unrolled loop is emitted unrolled
    path = tmp_path / "tile.tsm"
    kernels.export(str(path), plan_for(func), b"")
    x = np.random.default_rng(0).standard_normal(GROUPS * WG).astype("float32")
    (y,) = rt.load(path, device="vulkan").run({"x": x})
    tiles = x.reshape(GROUPS, WG)
    t = np.arange(WG)
    want = np.where(t < 32, tiles[:, t] + tiles[:, (t + 3) % WG], -tiles[:, WG - 1 - t])
    np.testing.assert_allclose(y, want.reshape(-1), rtol=1e-6, atol=1e-6)


def test_three_dimensional_grid_and_workgroup(tmp_path: Path) -> None:
    shape = (3, 4, 5, 2, 3, 6)  # blocks z, y, x; threads z, y, x
    out = Buffer("out", (int(np.prod(shape)),), "int32")
    bz, by, bx, tz, ty, tx = (Var(n) for n in ("bz", "by", "bx", "tz", "ty", "tx"))
    flat = ((((bz * 4 + by) * 5 + bx) * 2 + tz) * 3 + ty) * 6 + tx
    value = (bz * 100000 + by * 10000 + bx * 1000 + tz * 100 + ty * 10 + tx)
    body = Store(out, flat, value.astype("int32"))
    for var, extent, kind in reversed(list(zip((bz, by, bx, tz, ty, tx), shape,
                                               ("blockIdx.z", "blockIdx.y", "blockIdx.x",
                                                "threadIdx.z", "threadIdx.y", "threadIdx.x")))):
        body = For(var, extent, kind, body)
    func = PrimFunc("grid3d", [out], body, 0, 1)
    kernels = codegen([func], Target.parse("vulkan"))
    kernels.validate()
    (module,) = kernels.modules()
    assert module.grid == (5, 4, 3) and module.workgroup_size == (6, 3, 2)
    assert "Int64" not in module.capabilities  # all index math proven to fit 32 bits
    path = tmp_path / "grid.tsm"
    kernels.export(str(path), plan_for(func), b"")
    (got,) = rt.load(path, device="vulkan").run({})
    idx = np.indices(shape)
    want = sum(i * 10 ** (5 - k) for k, i in enumerate(idx)).reshape(-1)
    np.testing.assert_array_equal(got, want.astype("int32"))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_and_modulo_of_negative_operands(dtype: str, tmp_path: Path) -> None:
    """floordiv/floormod (Python's // and %) and fmod (C's %) on every sign combination:
    the emitter avoids OpSRem/OpSMod, which drivers get wrong for negative operands."""
    n = 8
    x, y = Buffer("x", (n,), dtype), Buffer("y", (n,), dtype)
    outs = [Buffer(f"o{k}", (n,), dtype) for k in range(3)]
    i = Var("i")
    a, b = Load(x, (i,), dtype), Load(y, (i,), dtype)
    body = Seq([Store(out, i, binary(op, a, b))
                for out, op in zip(outs, ("floordiv", "floormod", "fmod"))])
    func = PrimFunc(f"div_{dtype}", [x, y, *outs], For(i, n, "threadIdx.x", body), 2, 3)
    kernels = codegen([func], Target.parse("vulkan"))
    kernels.validate()
    assert "OpSRem" not in kernels.source("spirv") and "OpSMod" not in kernels.source("spirv")
    kernels.export(str(tmp_path / "div.tsm"), plan_for(func), b"")
    xs = np.array([7, -7, 7, -7, 6, -6, 0, -1], dtype)
    ys = np.array([2, 2, -2, -2, 3, 3, 5, 7], dtype)
    got = rt.load(tmp_path / "div.tsm", device="vulkan").run({"x": xs, "y": ys})
    np.testing.assert_array_equal(got[0], xs // ys)
    np.testing.assert_array_equal(got[1], xs % ys)
    np.testing.assert_array_equal(got[2], np.fmod(xs, ys))


def test_long_unrolled_loops_keep_the_unroll_hint(tmp_path: Path) -> None:
    """Only short loops are unrolled by the emitter; the driver unrolls the rest."""
    y = Buffer("y", (WG,), "float32")
    t, j = Var("t"), Var("j")
    acc = Buffer("acc", (1,), "float32", "local")
    zero = const(0)
    body = Allocate(acc, Seq([
        Store(acc, zero, const(0.0)),
        For(j, 40, "unrolled", Store(acc, zero, Load(acc, (zero,), "float32") + 1.0)),
        Store(y, t, Load(acc, (zero,), "float32")),
    ]))
    func = PrimFunc("count", [y], For(t, WG, "threadIdx.x", body), 0, 1)
    kernels = codegen([func], Target.parse("vulkan"))
    kernels.validate()
    assert "Unroll" in kernels.source("spirv")
    path = tmp_path / "count.tsm"
    kernels.export(str(path), plan_for(func), b"")
    (got,) = rt.load(path, device="vulkan").run({})
    np.testing.assert_array_equal(got, np.full(WG, 40.0, "float32"))
