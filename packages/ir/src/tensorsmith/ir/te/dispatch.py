"""GPU kernels as dispatches: the split both GPU codegens share.

A GPU-scheduled function's body is a sequence of stage nests (see
``schedules/gpu.py``); each becomes one dispatch. Its ``blockIdx.*`` loops give the
workgroup counts and its ``threadIdx.*`` loops the workgroup size; what remains is the
per-invocation body, with the bound loop variables read from the built-in IDs. In a
kernel with run-time sizes a workgroup count may be an expression of them (see
``symbols.dim_of``); the workgroup size is always fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .expr import Expr, Var
from .stmt import For, PrimFunc, Seq, Stmt


@dataclass
class Dispatch:
    name: str
    body: Stmt  # per-invocation statement
    #: workgroup counts (x, y, z): an int, or an expression of run-time sizes (a kernel
    #: with symbols: its blockIdx loops extend over ceil-divided symbolic extents)
    grid: tuple[int | Expr, int | Expr, int | Expr]
    workgroup: tuple[int, int, int]  # invocations per workgroup (x, y, z)
    block_vars: dict[str, Var] = field(default_factory=dict)  # "x" -> blockIdx.x's var
    thread_vars: dict[str, Var] = field(default_factory=dict)


def split_dispatches(func: PrimFunc) -> list[Dispatch]:
    stages = func.body.stmts if isinstance(func.body, Seq) else [func.body]
    out = []
    for i, stage in enumerate(stages):
        grid: list[int | Expr] = [1, 1, 1]
        wg = [1, 1, 1]
        blocks: dict[str, Var] = {}
        threads: dict[str, Var] = {}
        body = stage
        while isinstance(body, For) and (body.kind.startswith("blockIdx")
                                         or body.kind.startswith("threadIdx")):
            axis = body.kind[-1]
            slot = "xyz".index(axis)
            if body.kind.startswith("blockIdx"):
                grid[slot] = body.extent
                blocks[axis] = body.var
            else:
                if not isinstance(body.extent, int):  # the schedules never bind one so
                    raise ValueError(f"{func.name}: loop {body.var.name} is bound to "
                                     f"{body.kind} over a run-time extent; a workgroup's "
                                     "size is fixed when its pipeline is built")
                wg[slot] = body.extent
                threads[axis] = body.var
            body = body.body
        out.append(Dispatch(f"{func.name}_d{i}", body, (grid[0], grid[1], grid[2]),
                            (wg[0], wg[1], wg[2]), blocks, threads))
    return out
