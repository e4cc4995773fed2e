"""Winograd convolutions as a tuning choice: offered for 3x3 stride-1 convolutions with
constant weights only, computing what the direct convolution computes (in the
interpreter, compiled, and through ``build(records=...)``), with the weights stored
transformed at build time."""

from __future__ import annotations

import random

import numpy as np
import pytest
from autotune_testing import needs_llvm, random_inputs

from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import Task, extract_tasks
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.schedules import schedule_cpu
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.lower import lower

ALGORITHMS = ["direct", "winograd_f2_3", "winograd_f4_3"]


def _conv(size: tuple[int, int] = (7, 9), pads: tuple[int, ...] = (1, 1, 1, 1),
          strides: tuple[int, int] = (1, 1), kernel: int = 3, batch: int = 1,
          weight_is_input: bool = False, dtype: str = "float32") -> Graph:
    rng = np.random.default_rng(0)
    b = GraphBuilder("conv")
    x = b.input("x", (batch, 5, *size), dtype)
    shape = (6, 5, kernel, kernel)
    w = (b.input("w", shape, dtype) if weight_is_input
         else b.constant("w", rng.standard_normal(shape).astype(dtype)))
    bias = b.constant("bias", rng.standard_normal((1, 6, 1, 1)).astype(dtype))
    h = b.add1("conv2d", [x, w], {"pads": list(pads), "strides": list(strides)}, name="conv")
    return b.finish([b.add1("relu", [b.add1("add", [h, bias], name="bias")], name="relu")])


def _task(graph: Graph) -> Task:
    return next(t for t in extract_tasks(graph) if t.name.startswith("fused_conv2d"))


def _with_algorithm(space: SearchSpace, config: tuple, name: str) -> tuple:
    values = list(config)
    values[[k.name for _, k in space.knobs].index("algorithm")] = name
    return tuple(values)


def _interpret(space: SearchSpace, config: tuple, arrays: list[np.ndarray]) -> np.ndarray:
    inputs, outputs = space.io(config)
    func = lower(space.schedule(config), inputs, outputs)
    bufs = [a.copy() for a in func.stored_inputs(arrays)] + [
        np.zeros(p.shape, p.dtype) for p in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(arrays)]


def _reference(task: Task, arrays: list[np.ndarray]) -> np.ndarray:
    inputs, outputs = task.compute()
    func = lower(schedule_cpu(outputs), inputs, outputs)
    bufs = [a.copy() for a in arrays] + [np.zeros(p.shape, p.dtype)
                                         for p in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(arrays)]


def test_offered_only_where_it_computes_the_convolution() -> None:
    assert [a.name for a in SearchSpace(_task(_conv())).algorithms] == ALGORITHMS
    for graph in (_conv(strides=(2, 2)), _conv(kernel=1, pads=(0, 0, 0, 0)),
                  _conv(weight_is_input=True), _conv(dtype="float64")):
        space = SearchSpace(_task(graph))
        assert [a.name for a in space.algorithms] == ["direct"]
        assert "algorithm" not in [k.name for _, k in space.knobs]


def test_each_algorithm_is_a_seed_and_stores_its_weights_transformed() -> None:
    space = SearchSpace(_task(_conv()))
    seeds = space.seeds()
    chosen = [space._values(c)[0]["algorithm"] for c in seeds]
    assert chosen[0] == "direct" and set(chosen) == set(ALGORITHMS)
    for config, name in zip(seeds, chosen, strict=True):
        layouts = [s.args for s in space.steps(config) if s.kind == "layout"]
        if name == "direct":
            assert all(len(a) < 4 for a in layouts)
        else:
            assert layouts == [("in1", [0, 1, 2, 3], None, name)]


@pytest.mark.parametrize("size,pads,batch", [
    ((7, 9), (1, 1, 1, 1), 1), ((6, 6), (0, 0, 0, 0), 1), ((5, 8), (1, 0, 2, 1), 2)])
def test_random_winograd_candidates_compute_the_convolution(size, pads, batch) -> None:  # noqa: ANN001
    task = _task(_conv(size, pads, batch=batch))
    space = SearchSpace(task)
    arrays = random_inputs(task, seed=1)
    want = _reference(task, arrays)
    rng = random.Random(3)
    for name in ALGORITHMS[1:]:
        for k in range(3):
            config = _with_algorithm(space, space.sample(rng) if k else space.default(), name)
            if not space.valid(config):
                continue
            got = _interpret(space, config, arrays)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_compiled_candidates_match_and_build_applies_the_record(tmp_path) -> None:  # noqa: ANN001
    needs_llvm()
    import tensorsmith.runtime as rt
    from tensorsmith.autotune.measure import LocalBuilder, LocalRunner, MeasureInput

    graph = _conv((14, 13))
    task = _task(graph)
    space = SearchSpace(task)
    configs = [_with_algorithm(space, space.default(), name) for name in ALGORITHMS[1:]]
    builder, runner = LocalBuilder(1), LocalRunner(timeout=60, min_repeat_ms=1)
    try:
        builds = builder.build([MeasureInput(task, None)] + [
            MeasureInput(task, space.steps(c)) for c in configs], tmp_path)
        assert all(b.error is None for b in builds), [b.error for b in builds]
        results = runner.run(task, builds[0].path, builds[1:])  # checked against the default
    finally:
        builder.close()
        runner.close()
    assert all(r.error is None and r.costs for r in results), [r.error for r in results]

    x = np.random.default_rng(2).standard_normal((1, 5, 14, 13)).astype("float32")
    (want,) = run_graph(graph, {"x": x})
    plain = build(graph, "llvm")
    for config in configs:
        path = tmp_path / "r.jsonl"
        path.unlink(missing_ok=True)
        with RecordLog(path) as log:
            log.append(make_record(task.key, "llvm", space.steps(config), [1e-4], None))
        lib = build(graph, "llvm", records=path)
        (func,) = [f for f in lib.funcs if f.attrs["workload"] == task.key]
        transform = func.attrs["layouts"][1]["transform"]
        alpha = {"winograd_f2_3": 4, "winograd_f4_3": 6}[transform]
        # the 3x3 weights are stored once, as alpha x alpha matrices instead
        grown = lib.plan.params_bytes - plain.plan.params_bytes
        assert abs(grown - 4 * 6 * 5 * (alpha * alpha - 9)) < 64  # (64-byte alignment)
        lib.export_library(tmp_path / "m.so")
        (got,) = rt.load(tmp_path / "m.so").run({"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_knob_defaults_to_what_build_computes_on_blocked_activations() -> None:
    """On channel-blocked activations (the CPU default) a large 3x3 convolution runs
    Winograd without records; the search's default point is that same schedule."""
    from tensorsmith.autotune.artifact import lower_candidate

    rng = np.random.default_rng(0)
    b = GraphBuilder("conv")
    x = b.input("x", (1, 64, 28, 28), "float32")
    w0 = b.constant("w0", rng.standard_normal((64, 64, 1, 1)).astype("float32"))
    h = b.add1("relu", [b.add1("conv2d", [x, w0], {}, name="c0")], name="r0")
    w = b.constant("w", rng.standard_normal((64, 64, 3, 3)).astype("float32"))
    y = b.add1("conv2d", [h, w], {"pads": [1, 1, 1, 1]}, name="conv")
    graph = b.finish([b.add1("relu", [y], name="relu")])
    task = next(t for t in extract_tasks(graph) if any(n.name == "conv" for n in t.group.nodes))
    assert task.default_transforms == {1: "winograd_f4_3"}
    space = SearchSpace(task)
    default = space.default()
    assert space._values(default)[0]["algorithm"] == "winograd_f4_3"
    assert [s.to_json() for s in space.steps(default)] == \
        lower_candidate(task, None).attrs["steps"]
