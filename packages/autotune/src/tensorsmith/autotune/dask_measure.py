"""Measurement on a Dask cluster (``tensorsmith tune --dask tcp://host:8786``).

Past one machine the tuner hands work to Dask distributed, an existing engine, instead
of a home-grown RPC layer:

- :class:`DaskBuilder` compiles candidates on any worker (or those holding
  ``build_resources``) and brings the artifact bytes back;
- :class:`DaskRunner` sends a batch (artifacts as bytes) to one worker holding a
  resource named after the target, e.g. ``dask-worker tcp://host:8786 --resources
  llvm=1`` on the device. There it runs exactly like the local runner (an isolated
  process per batch, a timeout per candidate), with the functions of :mod:`.batch` and
  the source of :mod:`.runner_main` shipped by value: a device worker needs the runtime,
  NumPy and Dask, not the compiler.

Needs ``dask.distributed`` (``pip install 'tensorsmith-autotune[dask]'``).
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path
from typing import Any

import cloudpickle
from distributed import Client

from . import batch
from .measure import (
    CPU_CACHE_FLUSH_MB,
    BuildResult,
    MeasureInput,
    MeasureResult,
    _build_one,
    merge_results,
)
from .task import Task

cloudpickle.register_pickle_by_value(batch)


def _build_bytes(task: Task, steps: list[list[Any]] | None) -> tuple[bytes | None, str | None,
                                                                     float]:
    """On a build worker: one candidate, returned as the artifact's bytes."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tsm-build-") as tmp:
        path = str(Path(tmp) / "cand.so")
        result = _build_one(task, steps, path)
        data = Path(path).read_bytes() if result.error is None else None
        return data, result.error, result.seconds


class DaskBuilder:
    def __init__(self, address: str | Client, build_resources: dict[str, float] | None = None,
                 timeout: float = 300.0) -> None:
        self.client = address if isinstance(address, Client) else Client(address)
        self._own = not isinstance(address, Client)
        self.resources = build_resources
        self.timeout = timeout
        self._count = 0

    def build(self, inputs: list[MeasureInput], folder: Path) -> list[BuildResult]:
        futures = [self.client.submit(_build_bytes, inp.task,
                                      None if inp.steps is None else [s.to_json() for s in
                                                                      inp.steps],
                                      resources=self.resources, pure=False)
                   for inp in inputs]
        results = []
        deadline = time.monotonic() + self.timeout
        for fut in futures:
            try:
                data, error, seconds = fut.result(timeout=max(1.0, deadline - time.monotonic()))
            except Exception as e:  # a worker lost, a timeout
                fut.cancel()
                results.append(BuildResult(None, f"build: {type(e).__name__}: {e}"))
                continue
            if data is None:
                results.append(BuildResult(None, error, seconds))
                continue
            self._count += 1
            path = folder / f"dask{self._count}.so"
            path.write_bytes(data)
            results.append(BuildResult(str(path), None, seconds))
        return results

    def close(self) -> None:
        if self._own:
            self.client.close()


class DaskRunner:
    """Times batches on a worker holding the resource ``target`` (e.g. ``llvm``)."""

    def __init__(self, address: str | Client, target: str = "llvm", timeout: float = 20.0,
                 min_repeat_ms: float = 50.0, repeats: int = 3, startup_timeout: float = 120.0,
                 seed: int = 0, flush_mb: float = CPU_CACHE_FLUSH_MB) -> None:
        from .measure import LocalRunner

        self.client = address if isinstance(address, Client) else Client(address)
        self._own = not isinstance(address, Client)
        self.resources = {target: 1}
        self.local = LocalRunner(timeout, min_repeat_ms, repeats, startup_timeout, seed=seed,
                                 flush_mb=flush_mb)
        self.source = resources.files("tensorsmith.autotune").joinpath(
            "runner_main.py").read_text(encoding="utf-8")

    def run(self, task: Task, reference: str | None, builds: list[BuildResult]
            ) -> list[MeasureResult]:
        job = self.local.job(task, reference, builds)
        candidates = [(c["index"], Path(c["path"]).read_bytes()) for c in job["candidates"]]
        if not candidates:
            return merge_results(builds, {})
        ref = Path(reference).read_bytes() if reference else None
        base = {k: v for k, v in job.items() if k not in ("candidates", "reference")}
        limit = self.local.startup_timeout + self.local.timeout * (len(candidates) + 1)
        future = self.client.submit(batch.measure_remote, base, ref, candidates, self.source,
                                    self.local.timeout, self.local.startup_timeout,
                                    resources=self.resources, pure=False)
        try:
            measured = future.result(timeout=limit)
        except Exception as e:
            future.cancel()
            measured = {i: {"costs": [], "error": f"run: on the Dask cluster: "
                            f"{type(e).__name__}: {e}"} for i, _ in candidates}
        return merge_results(builds, {int(k): v for k, v in measured.items()})

    def close(self) -> None:
        if self._own:
            self.client.close()
