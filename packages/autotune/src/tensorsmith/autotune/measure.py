"""Measurement: build candidates in parallel, time them in an isolated process.

Two pluggable halves. A :class:`Builder` turns candidates into artifact files; a
:class:`Runner` times artifact files against a reference. The local ones:

- :class:`LocalBuilder` compiles in a pool of worker processes. A worker that dies or a
  build that runs past its timeout becomes an error for that candidate, and the pool is
  replaced.
- :class:`LocalRunner` measures a batch in a fresh subprocess
  (:mod:`.runner_main`), one candidate at a time, watching each with a timeout
  (:mod:`.batch`). A crash or a hang costs that candidate (recorded as an error) and
  the process; the rest of the batch continues in a new one.

Building and running never overlap, so compiles do not steal cores from timings.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Step

from .batch import measure_batch
from .task import Task


@dataclass
class MeasureInput:
    """A candidate: ``steps`` of ``task`` (None: the default schedule)."""

    task: Task
    steps: list[Step] | None


@dataclass
class BuildResult:
    path: str | None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class MeasureResult:
    costs: list[float] = field(default_factory=list)
    error: str | None = None
    build_seconds: float = 0.0

    @property
    def cost(self) -> float:
        """Best seconds per run; infinite for an error."""
        return min(self.costs) if self.costs and self.error is None else float("inf")


class Builder(Protocol):
    def build(self, inputs: list[MeasureInput], folder: Path) -> list[BuildResult]: ...

    def close(self) -> None: ...


class Runner(Protocol):
    def run(self, task: Task, reference: str | None, builds: list[BuildResult]
            ) -> list[MeasureResult]: ...

    def close(self) -> None: ...


def _build_one(task: Task, steps: list[list[Any]] | None, path: str) -> BuildResult:
    """Worker-process entry: one candidate to ``path`` (errors are returned, not raised)."""
    from .artifact import export_candidate

    start = time.perf_counter()
    try:
        parsed = None if steps is None else [Step.from_json(s) for s in steps]
        export_candidate(task, parsed, path)
    except Exception as e:
        return BuildResult(None, f"build: {type(e).__name__}: {e}", time.perf_counter() - start)
    return BuildResult(path, None, time.perf_counter() - start)


class LocalBuilder:
    """Compiles candidates in ``workers`` processes."""

    def __init__(self, workers: int = 2, timeout: float = 120.0,
                 start_method: str | None = None) -> None:
        self.workers = max(1, workers)
        self.timeout = timeout
        # fork by default where there is one: spawn and forkserver re-import the caller's
        # __main__, which breaks scripts without an ``if __name__ == "__main__"`` guard.
        methods = multiprocessing.get_all_start_methods()
        self.start_method = start_method or ("fork" if "fork" in methods else "spawn")
        self._pool: cf.ProcessPoolExecutor | None = None
        self._count = 0

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context(self.start_method))
        return self._pool

    def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def build(self, inputs: list[MeasureInput], folder: Path) -> list[BuildResult]:
        pool = self._executor()
        futures = []
        for inp in inputs:
            self._count += 1
            path = str(folder / f"cand{self._count}.so")
            steps = None if inp.steps is None else [s.to_json() for s in inp.steps]
            futures.append(pool.submit(_build_one, inp.task, steps, path))
        done, _ = cf.wait(futures, timeout=self.timeout)
        results = []
        broken = False
        for fut in futures:
            if fut not in done:
                results.append(BuildResult(None, f"build: timed out after {self.timeout:g} s"))
                broken = True
                continue
            try:
                results.append(fut.result())
            except Exception as e:  # BrokenProcessPool: a worker died (e.g. a crash in LLVM)
                results.append(BuildResult(None, f"build: worker process died ({e})"))
                broken = True
        if broken:
            self._discard_pool()
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# Bytes written before each timed run when tuning for a CPU: more than the last-level
# cache of most CPUs (32 MB on the development machines), so every kernel starts cold.
CPU_CACHE_FLUSH_MB = 64.0


def device_for(target: str) -> str:
    """The runtime device that runs ``target``'s artifacts, as its record says ("cpu",
    "vulkan", "opencl": the first device of that kind)."""
    return Target.parse(target).info.device


class LocalRunner:
    """Times artifacts in a fresh subprocess per batch, each candidate under a timeout.

    The reference (default schedule) and the candidates run on ``device``, by default
    the one of each task's target (:func:`device_for`). The cache flush (``flush_mb``)
    applies to the CPU only: a GPU kernel reads device memory the host's writes do not
    touch, so on a GPU device it would only slow the measurement down.
    """

    def __init__(self, timeout: float = 20.0, min_repeat_ms: float = 50.0, repeats: int = 3,
                 startup_timeout: float = 120.0, hook: str | None = None, seed: int = 0,
                 rtol: float = 1e-3, atol: float = 1e-3,
                 flush_mb: float = CPU_CACHE_FLUSH_MB, device: str | None = None) -> None:
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.device = device
        self.options = {"min_repeat_ms": min_repeat_ms, "repeats": repeats, "hook": hook,
                        "seed": seed, "rtol": rtol, "atol": atol,
                        "flush_bytes": int(flush_mb * (1 << 20))}

    def job(self, task: Task, reference: str | None, builds: list[BuildResult]
            ) -> dict[str, Any]:
        """The runner_main job for the builds that succeeded."""
        device = self.device or device_for(task.target)
        flush = self.options["flush_bytes"] if device.partition(":")[0] == "cpu" else 0
        return {**self.options, "device": device, "flush_bytes": flush, "reference": reference,
                "inputs": [{"shape": list(v.shape), "dtype": v.dtype} for v in task.group.inputs],
                "candidates": [{"index": i, "path": b.path} for i, b in enumerate(builds)
                               if b.error is None and b.path]}

    def run(self, task: Task, reference: str | None, builds: list[BuildResult]
            ) -> list[MeasureResult]:
        job = self.job(task, reference, builds)
        measured = measure_batch(job, [sys.executable, "-m", "tensorsmith.autotune.runner_main"],
                                 self.timeout, self.startup_timeout)
        return merge_results(builds, measured)

    def close(self) -> None:
        pass


def merge_results(builds: list[BuildResult], measured: dict[int, dict[str, Any]]
                  ) -> list[MeasureResult]:
    out = []
    for i, b in enumerate(builds):
        m = measured.get(i)
        if b.error is not None or m is None:
            out.append(MeasureResult([], b.error or "run: not measured", b.seconds))
        else:
            out.append(MeasureResult(list(m["costs"]), m["error"], b.seconds))
    return out
