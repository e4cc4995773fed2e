"""The measuring process: ``python -m tensorsmith.autotune.runner_main < job.json``.

It runs apart from the tuner so that a candidate that crashes (a segfault in generated
code), hangs or corrupts memory takes down only this process; the tuner records the
error and starts a fresh one for the rest of the batch. It imports only the runtime and
NumPy. Protocol: the job (JSON) on stdin; progress on stdout as lines prefixed with
``@@tsm `` (other output is ignored): ``{"ready": true}`` once the reference outputs are
computed, then per candidate ``{"start": i}`` and ``{"done": i, "costs": [...],
"error": null | str}``; ``{"fatal": msg}`` when nothing can be measured.

Each candidate runs once on fixed random inputs and its outputs are compared with the
default schedule's (``np.allclose``); then it is timed: one calibration run picks how
many runs make ``min_repeat_ms / repeats``, and each of ``repeats`` groups of that many
runs yields one cost, the mean seconds per run of the kernel as the C runtime times it.
With ``flush_bytes`` each timed run starts from caches evicted by a large write.

The job's ``device`` ("cpu" by default, "vulkan", "opencl", "vulkan:1"...) is where the
reference and every candidate run; on a GPU the runtime's profiler reports each
dispatch's device time (timestamps), so the costs are kernel time there too. The cache
flush is for the CPU only and is ignored elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tensorsmith.runtime.plan import Plan

PREFIX = "@@tsm "
MAX_RUNS = 100_000
FLUSHED_RUNS = 10
#: How long (microseconds) the pool's idle workers poll in this process when runs are
#: separated by cache flushes: longer than a flush of the default size takes.
FLUSH_SPIN_US = 20_000


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(message) + "\n")
    sys.stdout.flush()


def make_inputs(specs: list[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """Random inputs every candidate sees: floats in [-1, 1), integers 0 (safe indices)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        dtype = np.dtype(spec["dtype"])
        shape = tuple(spec["shape"])
        if dtype.kind == "f":
            out.append(rng.uniform(-1, 1, shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(np.zeros(shape, dtype))
    return out


def load_hook(spec: str | None) -> Callable[..., Any] | None:
    """``module:function`` or ``/path/file.py:function``: called as hook(index, outputs)."""
    if not spec:
        return None
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        loader_spec = importlib.util.spec_from_file_location("tsm_measure_hook", where)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn: Callable[..., Any] = getattr(module, name)
    return fn


def in_layouts(plan: Plan, feed: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """``feed`` with each input the candidate stores in another layout (a ``layout`` step
    on a weight) transposed that way, so it computes what the reference does."""
    from tensorsmith.runtime.layouts import to_stored

    out = dict(feed)
    for i, info in enumerate(plan.inputs):
        if info.layout:
            out[i] = to_stored(feed[i], **info.layout)
    return out


def check_outputs(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float
                  ) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise ValueError(f"wrong result: output {k} is {g.dtype}{list(g.shape)}, the "
                             f"default schedule's {w.dtype}{list(w.shape)}")
        if w.dtype.kind != "f":
            if not np.array_equal(g, w):
                raise ValueError(f"wrong result: output {k} differs from the default "
                                 "schedule's")
            continue
        finite = np.abs(w[np.isfinite(w)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        if not np.allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=True):
            err = np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64)))
            raise ValueError(f"wrong result: output {k} differs from the default schedule's "
                             f"(max abs error {err:.3g})")


def time_module(module: Any, min_repeat_ms: float, repeats: int, flush_bytes: int = 0
                ) -> list[float]:
    """Seconds per run, one value per repeat group, as the C runtime times the kernel.

    With ``flush_bytes``, every timed run follows a write of that many bytes (more than
    the last-level cache), so the kernel starts with cold caches as in a whole model,
    where a layer's weights were last touched a full inference ago. Timed warm and
    alone, a kernel that re-reads its weights looks as fast as one that streams them
    once; in the model it is not. Flushed runs are capped at ``FLUSHED_RUNS`` a group.
    """
    flush = np.empty(flush_bytes, np.uint8) if flush_bytes else None

    def per_run_ms(runs: int) -> float:
        if flush is None:
            report = module.profile(repeat=runs)
            return sum(e["total_ms"] for e in report) / runs
        total = 0.0
        for k in range(runs):
            flush.fill(k & 0xFF)
            total += sum(e["total_ms"] for e in module.profile(repeat=1, warmup=False))
        return total / runs

    first = per_run_ms(1)
    runs = max(1, min(MAX_RUNS, math.ceil(min_repeat_ms / repeats / max(first, 1e-4))))
    if flush is not None:
        runs = min(runs, FLUSHED_RUNS)
    return [per_run_ms(runs) / 1e3 for _ in range(repeats)]


def measure(job: dict[str, Any]) -> None:
    import tensorsmith.runtime as rt

    hook = load_hook(job.get("hook"))
    inputs = make_inputs(job["inputs"], int(job.get("seed", 0)))
    feed = dict(enumerate(inputs))
    device = str(job.get("device") or "cpu")
    flush_bytes = int(job.get("flush_bytes", 0)) if device.partition(":")[0] == "cpu" else 0
    if flush_bytes:
        # Inside a model the thread pool's workers are still polling when the next
        # kernel starts (the previous one just ended); here the flush between runs takes
        # milliseconds, longer than they poll by default, so every timed run would first
        # wake sleeping threads and parallel schedules would rank worse than they run.
        # The pool reads this when a library first uses it, after this point.
        os.environ.setdefault("TSM_SPIN_US", str(FLUSH_SPIN_US))
    reference = None
    if job.get("reference"):
        try:
            ref = rt.load(job["reference"], device=device)
            reference = ref.run(in_layouts(ref.artifact.plan, feed))
            ref.close()
        except Exception as e:
            emit({"fatal": f"the default schedule failed to run: {type(e).__name__}: {e}"})
            return
    emit({"ready": True})
    for item in job["candidates"]:
        index = item["index"]
        emit({"start": index})
        costs: list[float] = []
        error = None
        try:
            module = rt.load(item["path"], device=device)
            outputs = module.run(in_layouts(module.artifact.plan, feed))
            if hook is not None:
                hook(index, outputs)
            if reference is not None:
                check_outputs(outputs, reference, float(job.get("rtol", 1e-3)),
                              float(job.get("atol", 1e-3)))
            costs = time_module(module, float(job.get("min_repeat_ms", 50.0)),
                                int(job.get("repeats", 3)), flush_bytes)
            module.close()
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        emit({"done": index, "costs": costs, "error": error})


def main() -> int:
    job = json.load(sys.stdin)
    try:
        measure(job)
    except Exception:
        emit({"fatal": traceback.format_exc(limit=5)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
