"""Emitting and compiling a model's kernels on every core.

Emitting LLVM IR and LLVM's optimisation and code emission are nearly all of a large
model's build (DenseNet-121: 4 s of Python emission and 14 s of LLVM on one core of a
Zen 1 host), and they ran on one core: llvmlite serialises its calls behind one lock,
so threads do not help. Each kernel is its own LLVM module with nothing shared, so the
kernels are split into chunks of about equal size, one per core; each chunk other than
the first goes, pickled, to a worker process (``python -m
tensorsmith.codegen.llvm.compile_jobs``: kernels on stdin, the object on stdout) that
emits and compiles it, while this process does the first. The linker then takes one
object per chunk. Small models, whose whole compile is shorter than starting a worker,
stay in this process.

``TSM_COMPILE_JOBS`` sets the number of chunks (1: no workers); by default it is the
number of cores this process may run on, at most :data:`MAX_JOBS`.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tensorsmith.ir.te.expr import Expr
from tensorsmith.ir.te.stmt import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store
from tensorsmith.ir.te.visit import free_vars, walk

if TYPE_CHECKING:
    from .target_options import LlvmTarget

#: Emitted expression nodes (:func:`emitted_size`) under which a model compiles in this
#: process: about 20,000 lines of LLVM IR, 1.5 s of emission and LLVM on a Zen 1 core;
#: a worker starts in 0.3 s.
MIN_PARALLEL_SIZE = 30_000
MAX_JOBS = 8


def default_jobs() -> int:
    forced = os.environ.get("TSM_COMPILE_JOBS", "").strip()
    if forced:
        return max(1, int(forced))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_JOBS, cores or 1))


def module_text(func: PrimFunc, target: LlvmTarget | None = None) -> str:
    """One kernel as a textual LLVM module, using the instructions of ``target`` that only
    some CPUs have (integer dot products, dot4.py) where it is given."""
    from .cpu_features import compiled_features
    from .emit import emit_module

    features = frozenset(compiled_features(target)) if target is not None else frozenset()
    return str(emit_module([func], func.name, features=features))


def chunks(funcs: list[PrimFunc], jobs: int) -> list[list[PrimFunc]]:
    """``funcs`` in at most ``jobs`` groups of about equal cost (largest first, each to
    the lightest group; see :func:`emitted_size`), in their order within a group."""
    sizes = [emitted_size(f) for f in funcs] if jobs > 1 else [0] * len(funcs)
    return [[funcs[i] for i in part] for part in _chunks(sizes, jobs)]


def emitted_size(func: PrimFunc) -> int:
    """About how many expression nodes emitting ``func`` writes out: each store's, times
    the copies its unrolled loops make, counting one arm of a branch on unrolled
    indices (the emitter emits only the arm taken). Compile time follows it; a kernel's
    pickle does not (a Winograd kernel's tables pickle large and emit small, and its
    unrolled tiles the other way round), and chunks balanced by pickles left one core
    idle for seconds."""
    return _stmt_size(func.body, 1, frozenset())


def _stmt_size(s: Stmt, copies: int, unrolled: frozenset[int]) -> int:
    if isinstance(s, Seq):
        return sum(_stmt_size(x, copies, unrolled) for x in s.stmts)
    if isinstance(s, For):
        if s.kind == "unrolled" and isinstance(s.extent, int):
            return _stmt_size(s.body, copies * s.extent, unrolled | {id(s.var)})
        return _stmt_size(s.body, copies, unrolled)
    if isinstance(s, Allocate):
        return _stmt_size(s.body, copies, unrolled)
    if isinstance(s, IfThenElse):
        arms = [_stmt_size(x, copies, unrolled) for x in (s.then, s.otherwise) if x is not None]
        if all(id(v) in unrolled for v in free_vars(s.cond)):
            return max(arms)
        return sum(arms)
    if isinstance(s, Store):
        return copies * (_expr_size(s.value) + _expr_size(s.index))
    return copies


def _expr_size(e: Expr) -> int:
    return sum(1 for _ in walk(e))


def _chunks(sizes: list[int], jobs: int) -> list[list[int]]:
    """:func:`chunks` as indices, from the kernels' sizes."""
    if jobs < 2 or len(sizes) < 2 or sum(sizes) < MIN_PARALLEL_SIZE:
        return [list(range(len(sizes)))]
    groups: list[list[int]] = [[] for _ in range(min(jobs, len(sizes)))]
    load = [0] * len(groups)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = load.index(min(load))
        groups[lightest].append(i)
        load[lightest] += sizes[i]
    return [sorted(g) for g in groups if g]


def compile_objects(
    funcs: list[PrimFunc], target: LlvmTarget | None = None, jobs: int | None = None
) -> list[bytes]:
    """One ELF object per chunk of ``funcs`` (see :func:`chunks`), all chunks at once, for
    ``target`` (default: this host); none for a model without kernels (all its ops are
    reshapes)."""
    if not funcs:
        return []
    if target is None:
        from .target_options import host_target

        target = host_target()
    jobs = default_jobs() if jobs is None else jobs
    # each kernel pickled once, its bytes go to a worker
    pickled = [pickle.dumps(f) for f in funcs] if jobs > 1 and len(funcs) > 1 else []
    parts = _chunks([emitted_size(f) for f in funcs] if pickled else [0] * len(funcs), jobs)
    with ThreadPoolExecutor(max(1, len(parts) - 1)) as pool:
        workers = [
            pool.submit(_in_worker, [pickled[i] for i in part], target) for part in parts[1:]
        ]
        first = _compile([funcs[i] for i in parts[0]], target)
        return [first, *(w.result() for w in workers)]


def _compile(funcs: list[PrimFunc], target: LlvmTarget) -> bytes:
    from .target_machine import compile_modules

    return compile_modules([module_text(f, target) for f in funcs], target)


def _in_worker(pickled: list[bytes], target: LlvmTarget) -> bytes:
    """The worker gets the resolved target (host CPU and features named), so it compiles
    for exactly the machine this process does."""
    request = pickle.dumps({"funcs": pickled, "target": target})
    done = subprocess.run(
        [sys.executable, "-m", __name__], input=request, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            "compiling a chunk of kernels in a worker process failed "
            f"(exit {done.returncode}); TSM_COMPILE_JOBS=1 compiles them in "
            f"this process:\n{done.stderr.decode(errors='replace')[-4000:]}"
        )
    return done.stdout


def _main() -> None:
    request = pickle.loads(sys.stdin.buffer.read())
    funcs = [pickle.loads(f) for f in request["funcs"]]
    sys.stdout.buffer.write(_compile(funcs, request["target"]))


if __name__ == "__main__":
    _main()
