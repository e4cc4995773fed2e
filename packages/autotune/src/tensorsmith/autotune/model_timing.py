"""Builds of one model, timed side by side the way ``tensorsmith run --profile`` times one.

The in-model choice (:mod:`.in_model`) and the account of what tuning bought
(:mod:`.outcome`) both compare whole builds of a model. Each build is compiled as
``tensorsmith compile`` compiles it (``build`` with the records, exported, loaded by the
runtime), then all are run in interleaved rounds, forwards then backwards, so that a slow
phase of a shared machine hits every build alike. A round of a build is one
``GraphModule.profile`` call, a warm-up run and then ``repeat`` timed runs: the very call
``run --profile`` makes, so these are the numbers a user sees there.

Each CPU artifact brings its own thread pool, whose workers poll for a while after a
parallel loop before they sleep (``TSM_SPIN_US``, 500 us by default). Timed right after
another build, a build shares the cores with that build's polling workers, and its
parallel kernels slow down by up to 2x on a 2-core machine: two identical builds of the
example MLP measured 0.5x to 1.8x apart. So each round starts after a pause longer than
that polling; then identical builds agree within a few percent.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tensorsmith.ir.graph import Graph
from tensorsmith.ir.target import Target

#: The workers' polling time when ``TSM_SPIN_US`` does not set it (tsm_threadpool.c).
DEFAULT_SPIN_US = 500


def idle_pause() -> float:
    """Seconds to wait before timing a build: twice the thread pools' polling time, so the
    previous build's workers are asleep."""
    try:
        spin_us = int(os.environ.get("TSM_SPIN_US", DEFAULT_SPIN_US))
    except ValueError:
        spin_us = DEFAULT_SPIN_US
    return 2e-6 * max(spin_us, DEFAULT_SPIN_US)


@dataclass
class ModelBuild:
    """A build of the model, loaded: ``module`` (a ``GraphModule``), the workload key of
    each plan step, and each workload's schedule steps (JSON, as records hold them)."""

    module: Any
    step_workloads: list[str]
    schedules: dict[str, list[Any]]

    def close(self) -> None:
        self.module.close()


@dataclass
class Timings:
    """One build's medians over all timed runs: each plan step's milliseconds, and the
    wall milliseconds of a whole run."""

    step_ms: list[float]
    run_ms: float

    @property
    def kernel_ms(self) -> float:
        """The steps' medians summed: the kernel time of a run, as ``run --profile``'s
        table adds it up."""
        return float(sum(self.step_ms))

    def workload_ms(self, workload: str, step_workloads: list[str]) -> float:
        """The milliseconds per run of the steps that compute ``workload``."""
        return float(sum(ms for ms, key in zip(self.step_ms, step_workloads, strict=True)
                         if key == workload))


def build_model(mod: Graph, params: Mapping[str, np.ndarray] | None, target: Target,
                records: str | Path | None, opt_level: int, path: Path) -> ModelBuild:
    """Compile ``mod`` with ``records`` (None: the default schedules) to ``path``, as
    ``tensorsmith compile`` does, and load it on the target's device."""
    from tensorsmith.ir import build

    lib = build(mod, target, params, opt_level=opt_level, records=records)
    lib.export_library(path)
    workload = {f.name: f.attrs["workload"] for f in lib.funcs}
    schedules = {f.attrs["workload"]: list(f.attrs["steps"]) for f in lib.funcs}
    return ModelBuild(load(path, target), [workload[s.kernel] for s in lib.plan.steps],
                      schedules)


def load(path: Path, target: Target) -> Any:
    """The artifact at ``path`` loaded on the runtime device of ``target``."""
    import tensorsmith.runtime as rt

    return rt.load(path, device=target.info.device)


def time_interleaved(modules: list[Any], rounds: int, repeat: int) -> list[Timings]:
    """Per module, its :class:`Timings` over ``rounds`` interleaved rounds of ``repeat``
    runs each, all on the same random inputs."""
    rng = np.random.default_rng(0)
    feed = {i["name"]: (rng.standard_normal(i["shape"]).astype(i["dtype"])
                        if np.dtype(i["dtype"]).kind == "f" else np.zeros(i["shape"], i["dtype"]))
            for i in modules[0].input_info}
    steps: list[list[list[float]]] = [[] for _ in modules]
    walls: list[list[float]] = [[] for _ in modules]
    pause = idle_pause()
    for r in range(rounds):
        order = range(len(modules)) if r % 2 == 0 else reversed(range(len(modules)))
        for i in order:
            time.sleep(pause)
            report = modules[i].profile(feed, repeat=repeat)
            steps[i] += report.step_ms
            walls[i] += report.run_ms
    return [Timings([statistics.median(run[s] for run in runs) for s in range(len(runs[0]))],
                    statistics.median(wall))
            for runs, wall in zip(steps, walls, strict=True)]
