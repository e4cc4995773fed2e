"""Single kernels compiled for this host and called with NumPy arrays, without a plan.

The kernels' object is linked with the thread pool of the C runtime
(csrc/tsm_threadpool.c) into a small shared library, so parallel loops run on threads
as they do in an artifact. A kernel is called as the plan calls it (codegen-llvm's
emit.py): ``args`` holds its buffers in order, then, for a kernel with run-time sizes
(``attrs["symbols"]``), a pointer to their int64 values in that order.
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tensorsmith.codegen.llvm.compile_jobs import compile_objects
from tensorsmith.codegen.llvm.link import CFLAGS, csrc_dir, find_cc
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.lowering import default_transforms, lower_group
from tensorsmith.ir.passes.fuse import FusedGroup, fuse_ops
from tensorsmith.ir.schedules import default_schedule
from tensorsmith.ir.symbolic import evaluate
from tensorsmith.ir.te.stmt import PrimFunc


class KernelLibrary:
    """``funcs`` compiled and loaded; :meth:`run` calls one of them."""

    def __init__(self, funcs: Sequence[PrimFunc]) -> None:
        self.funcs = {f.name: f for f in funcs}
        self._tmp = tempfile.TemporaryDirectory(prefix="tsm-kernels-")
        d = Path(self._tmp.name)
        objects = []
        for i, data in enumerate(compile_objects(list(funcs), jobs=1)):
            path = d / f"kernels{i}.o"
            path.write_bytes(data)
            objects.append(str(path))
        csrc = csrc_dir()
        lib = d / "kernels.so"
        subprocess.run([find_cc(), *CFLAGS, "-shared", "-I", str(csrc),
                        str(csrc / "tsm_threadpool.c"), *objects, "-o", str(lib),
                        "-lpthread", "-lm"], check=True, capture_output=True)
        self.lib = ctypes.CDLL(str(lib))

    def run(self, name: str, arrays: Sequence[np.ndarray],
            sizes: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Call kernel ``name`` on ``arrays`` (its inputs, in their stored layout); its
        outputs and scratch are allocated here (from the buffers' shapes with ``sizes``)
        and the outputs returned."""
        func = self.funcs[name]
        sizes = dict(sizes or {})
        bufs = [np.ascontiguousarray(a) for a in arrays]
        for b in func.params[len(bufs):]:
            shape = tuple(evaluate(d, sizes) for d in b.shape)
            bufs.append(np.zeros(shape, b.dtype))
        for b, a in zip(func.params, bufs):
            want = tuple(evaluate(d, sizes) for d in b.shape)
            assert a.size == int(np.prod(want)) and a.dtype == np.dtype(b.dtype), \
                f"{b.name}: {a.dtype}{a.shape} for {b!r} at {sizes}"
        values = np.array([sizes[n] for n in func.attrs.get("symbols", ())], np.int64)
        pointers = [a.ctypes.data for a in bufs]
        if "symbols" in func.attrs:
            pointers.append(values.ctypes.data)
        args = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        getattr(self.lib, name)(args)
        return bufs[func.num_inputs:func.num_inputs + func.num_outputs]

    def close(self) -> None:
        self._tmp.cleanup()


def lower_graph(graph: Graph) -> list[tuple[FusedGroup, PrimFunc]]:
    """Each fused group of ``graph`` with its kernel, lowered by the llvm target's default
    rules (no graph passes: the groups are the graph's nodes as ``fuse_ops`` groups them)."""
    schedule = default_schedule("llvm")
    groups = fuse_ops(graph)
    return [(g, lower_group(g, f"kernel{i}", schedule, transforms=default_transforms(
        g, "cpu", [k for k, v in enumerate(g.inputs) if v.is_constant])))
        for i, g in enumerate(groups)]


def run_groups(lib: KernelLibrary, kernels: list[tuple[FusedGroup, PrimFunc]], graph: Graph,
               inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int]) -> list[np.ndarray]:
    """Run ``graph`` kernel by kernel with the symbols at ``sizes``."""
    env: dict[int, np.ndarray] = {v.uid: np.asarray(inputs[v.name], v.dtype)
                                  for v in graph.inputs}
    for group, func in kernels:
        arrays = [v.data if v.is_constant else env[v.uid] for v in group.inputs]
        outs = lib.run(func.name, func.stored_inputs(arrays), sizes)
        for v, a in zip(group.outputs, outs):
            env[v.uid] = a.reshape(tuple(evaluate(d, sizes) for d in v.shape))
    return [v.data if v.is_constant else env[v.uid] for v in graph.outputs]
