"""Small graphs, reference runs and fake measurers shared by the autotune tests."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tensorsmith.autotune.measure import BuildResult, MeasureInput, MeasureResult
from tensorsmith.autotune.space import steps_key
from tensorsmith.autotune.task import Task
from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.lowering import weight_transforms
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.lower import lower
from tensorsmith.ir.te.schedule import Schedule

HERE = Path(__file__).resolve().parent


def mlp(batch: int = 2, sizes: tuple[int, ...] = (16, 16, 16, 10), seed: int = 0) -> Graph:
    """Dense layers; the two middle ones have equal shapes (one task, weight 2)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("mlp")
    h = b.input("x", (batch, sizes[0]), "float32")
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        w = b.constant(f"w{i}", rng.standard_normal((k, n)).astype("float32") / math.sqrt(k))
        c = b.constant(f"c{i}", rng.standard_normal((n,)).astype("float32"))
        h = b.add1("add", [b.add1("matmul", [h, w], name=f"mm{i}"), c], name=f"add{i}")
        if i < len(sizes) - 2:
            h = b.add1("relu", [h], name=f"relu{i}")
    return b.finish([b.add1("softmax", [h], {"axis": -1}, name="sm")])


def convnet(seed: int = 0) -> Graph:
    """conv + bias + relu, max pool, flatten, dense: every sketch kind once."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("convnet")
    x = b.input("x", (1, 2, 6, 7), "float32")
    w = b.constant("w", rng.standard_normal((5, 2, 3, 3)).astype("float32"))
    c = b.constant("c", rng.standard_normal((1, 5, 1, 1)).astype("float32"))
    h = b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="conv")
    h = b.add1("relu", [b.add1("add", [h, c], name="bias")], name="relu")
    h = b.add1("pool2d", [h], {"kernel": [2, 2], "mode": "max", "strides": [2, 2]}, name="pool")
    h = b.add1("reshape", [h], {"shape": [1, 5 * 3 * 3]}, name="flat")
    w2 = b.constant("w2", rng.standard_normal((45, 4)).astype("float32"))
    out = b.add1("matmul", [h, w2], name="fc")
    return b.finish([b.add1("reduce_sum", [out], {"axes": [1], "keepdims": 1}, name="sum")])


def matmul(m: int, k: int, n: int) -> Graph:
    b = GraphBuilder("matmul")
    x = b.input("x", (m, k), "float32")
    y = b.input("y", (k, n), "float32")
    return b.finish([b.add1("matmul", [x, y], name="mm")])


def interpret(task: Task, sched: Schedule, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run a scheduled task in the tensor-IR interpreter; returns its outputs."""
    inputs, outputs = task.compute(weight_transforms(sched.steps))
    func = lower(sched, inputs, outputs)
    bufs = [a.copy() for a in func.stored_inputs(arrays)] + [np.zeros(p.shape, p.dtype)
                                         for p in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(arrays):len(arrays) + len(outputs)]


def distinct_candidates(space: Any, rng: random.Random, samples: int
                        ) -> Iterator[tuple[Any, list[Any]]]:
    """(config, steps) of the default, ``samples`` random configs, a mutation of each and
    one crossover, skipping configs whose steps were seen already; every one is valid."""
    configs = [space.default()] + [space.sample(rng) for _ in range(samples)]
    configs += [space.mutate(c, rng) for c in configs]
    configs += [space.crossover(configs[1], configs[2], rng)]
    seen: set[str] = set()
    for config in configs:
        assert space.valid(config)
        steps = space.steps(config)
        if steps_key(steps) not in seen:
            seen.add(steps_key(steps))
            yield config, steps


def random_inputs(task: Task, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype) for v in task.group.inputs]


def needs_llvm() -> None:
    """Tests that compile: the llvm codegen and a C compiler (installed by `nox -s tests`)."""
    pytest.importorskip("tensorsmith.codegen.llvm", reason="needs tensorsmith-codegen-llvm")


def needs_matplotlib() -> None:
    """Tests of the tuning curves: matplotlib, the ``plot`` extra. The test sessions install
    it, so where CI runs (the CI environment variable set) its absence fails the test
    instead of skipping it silently."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise ImportError("the plot tests need matplotlib: it belongs in TEST_DEPS of "
                              "noxfile.py") from None
        pytest.skip("matplotlib is not installed (pip install 'tensorsmith-autotune[plot]')")


def fake_seconds(key: str) -> float:
    """A made-up, deterministic time for a candidate (from its steps)."""
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    return 1e-4 * (1.0 + h / 0xFFFFFFFF)


class FakeBuilder:
    """Builds nothing: each candidate 'compiles' instantly (for tests of the loop itself)."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}  # fake artifact path -> the candidate's steps key
        self.count = 0

    def build(self, inputs: list[MeasureInput], folder: Path) -> list[BuildResult]:
        out = []
        for inp in inputs:
            self.count += 1
            path = str(folder / f"fake{self.count}")
            self.keys[path] = "default" if inp.steps is None else steps_key(inp.steps)
            out.append(BuildResult(path, None))
        return out

    def close(self) -> None:
        pass


class FakeRunner:
    """Times from :func:`fake_seconds`; the default schedule is slower than any candidate."""

    def __init__(self, builder: FakeBuilder) -> None:
        self.builder = builder
        self.runs = 0

    def run(self, task: Task, reference: str | None, builds: list[BuildResult]
            ) -> list[MeasureResult]:
        self.runs += len(builds)
        out = []
        for b in builds:
            key = self.builder.keys[b.path] if b.path else ""
            seconds = 1e-3 if key == "default" else fake_seconds(key)
            out.append(MeasureResult([seconds, seconds * 1.1], None))
        return out

    def close(self) -> None:
        pass


def key_of(record: dict) -> str:
    return steps_key(record["steps"])


def trial_records(records: list[dict]) -> list[dict]:
    """The measurements of the search, without the tuner's final ``selected`` choices."""
    return [r for r in records if not r.get("selected")]
