"""What a tuning run bought, measured where it counts: inside the model.

The search and the re-measurement time each kernel alone, in a fresh process, after a
64 MB write that evicts the caches (:mod:`.runner_main`). That ranks candidates, but its
times are not the model's. Inside the model a kernel runs right after the one before it:
its input is in cache, small weights too, and the thread pool's workers still poll from
the previous parallel loop. Alone, after the flush, the workers have gone to sleep (they
poll for 500 us; the flush takes milliseconds), so every parallel loop first waits for
them to wake. The example MLP's first layer takes about 10 us in the model and 45 us
alone (20 us alone with the workers kept polling); its second layer 2 us and 20 us. A
candidate that merely runs on one thread, or reads less, looks several times faster
than the default alone (and on tiny kernels, where waking the workers is all the time
there is, hundreds of times), while in the model it gains a fraction of that or loses.
The search's "best" is moreover the minimum over many candidates' single timings, which
favours a lucky one.

So the account of a tuning run is taken in the model alone. It is built twice, as
``tensorsmith compile`` builds it: without records and with the records just written.
Both builds are timed in interleaved rounds with the runtime's profiler, as
``tensorsmith run --profile`` does (:mod:`.model_timing`), and every number of the account
-- each kernel's time in either build, the model's kernel and wall time per run -- comes
from those same runs. The model's kernel time is the sum of the kernels' rows.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensorsmith.ir.graph import Graph
from tensorsmith.ir.target import Target

from .model_timing import ModelBuild, Timings, build_model, time_interleaved
from .task import Task


def ratio(before: float, after: float) -> float:
    """``before / after``: how many times faster; NaN where either is not a positive time."""
    if before > 0 and after > 0 and math.isfinite(before) and math.isfinite(after):
        return before / after
    return math.nan


@dataclass
class KernelOutcome:
    """One kernel (a task): milliseconds per model run of all its steps, in the default
    build and in the tuned one, and whether the records changed its schedule."""

    task: Task
    default_ms: float
    tuned_ms: float
    tuned: bool

    @property
    def speedup(self) -> float:
        return ratio(self.default_ms, self.tuned_ms)


@dataclass
class Outcome:
    """Both builds of the model, timed together: per kernel and for the whole run."""

    kernels: list[KernelOutcome]
    default: Timings
    tuned: Timings
    rounds: int
    repeat: int

    @property
    def kernel_speedup(self) -> float:
        """The model's kernel time per run, default over tuned."""
        return ratio(self.default.kernel_ms, self.tuned.kernel_ms)

    @property
    def run_speedup(self) -> float:
        """The model's wall time per run, default over tuned."""
        return ratio(self.default.run_ms, self.tuned.run_ms)


def measure_outcome(mod: Graph, params: Mapping[str, np.ndarray] | None, target: str | Target,
                    tasks: Sequence[Task], records: str | Path, *, rounds: int = 30,
                    repeat: int = 3, opt_level: int = 2,
                    progress: Callable[[str], None] | None = None) -> Outcome:
    """Build ``mod`` without and with ``records``, time both builds interleaved
    (``rounds`` rounds of ``repeat`` runs) and account for each of ``tasks``."""
    tgt = Target.parse(target)
    say = progress or (lambda _: None)
    builds: list[ModelBuild] = []
    with tempfile.TemporaryDirectory(prefix="tsm-outcome-") as tmp:
        try:
            say("building the model with the default schedules")
            builds.append(build_model(mod, params, tgt, None, opt_level,
                                      Path(tmp) / "default.tsm"))
            say("building the model with the tuning records, as compile --records does")
            builds.append(build_model(mod, params, tgt, records, opt_level,
                                      Path(tmp) / "tuned.tsm"))
            say(f"timing both builds, {rounds} interleaved rounds of {repeat} runs")
            default, tuned = time_interleaved([b.module for b in builds], rounds, repeat)
        finally:
            for b in builds:
                b.close()
    base, best = builds
    kernels = [KernelOutcome(t, default.workload_ms(t.key, base.step_workloads),
                             tuned.workload_ms(t.key, best.step_workloads),
                             base.schedules.get(t.key) != best.schedules.get(t.key))
               for t in tasks]
    return Outcome(kernels, default, tuned, rounds, repeat)
