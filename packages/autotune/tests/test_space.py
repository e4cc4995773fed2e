"""Every candidate the search can propose lowers and computes what the default schedule
computes (tensor-IR interpreter on tiny shapes; a few through the llvm build too)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from autotune_testing import (
    convnet,
    distinct_candidates,
    interpret,
    matmul,
    mlp,
    needs_llvm,
    random_inputs,
)

from tensorsmith.autotune.space import SearchSpace, steps_key
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.lowering import weight_transforms
from tensorsmith.ir.schedules import schedule_cpu
from tensorsmith.ir.te.schedule import Step, replay


def _batched_and_reduce():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5), "float32")
    y = b.input("y", (2, 5, 6), "float32")
    h = b.add1("tanh", [b.add1("matmul", [x, y], name="bmm")], name="t")
    s = b.add1("reduce_sum", [h], {"axes": [1], "keepdims": 0}, name="rs")
    return b.finish([s])


def _row_softmax():
    b = GraphBuilder()
    x = b.input("x", (4, 37), "float32")
    return b.finish([b.add1("softmax", [x], {"axis": -1}, name="sm")])


def _tasks():
    out = []
    for graph in (mlp(batch=3, sizes=(9, 7, 7, 5)), convnet(), _batched_and_reduce(),
                  _row_softmax()):
        out += extract_tasks(graph)
    return out


TASKS = _tasks()


@pytest.mark.parametrize("index", range(len(TASKS)), ids=[t.label for t in TASKS])
def test_sampled_and_mutated_candidates_match_default(index: int) -> None:
    task = TASKS[index]
    space = SearchSpace(task)
    arrays = random_inputs(task, seed=index)
    want = interpret(task, schedule_cpu(task.compute()[1]), arrays)
    seen = 0
    for config, steps in distinct_candidates(space, random.Random(index), 10):
        seen += 1
        got = interpret(task, space.schedule(config), arrays)
        # Winograd's transforms round differently: errors scale with the output's range
        atol = 1e-4 if weight_transforms(steps) else 1e-5
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol * max(1.0, np.abs(w).max()),
                                       err_msg=str(steps))
    assert seen > 3 or space.size() < 100


def _rfactor_configs(space: SearchSpace) -> list[tuple]:
    """The default config with one reduction's ``rfactor`` set, for every choice."""
    out = []
    for i, (_, knob) in enumerate(space.knobs):
        for lanes in knob.choices[1:] if knob.name == "rfactor" else ():
            config = list(space.default())
            config[i] = lanes
            out.append(tuple(config))
    return out


def test_rfactor_candidates_match_default() -> None:
    """Each softmax reduction vectorized along its row (37 long: the last vector of 8 or
    16 lanes is partly masked) gives the default's result, in the interpreter and built
    by llvm."""
    (task,) = extract_tasks(_row_softmax())
    space = SearchSpace(task)
    configs = [c for c in _rfactor_configs(space) if space.valid(c)]
    assert len(configs) == 4  # 8 or 16 lanes, for the max and for the sum
    arrays = random_inputs(task, seed=1)
    (want,) = interpret(task, schedule_cpu(task.compute()[1]), arrays)
    for config in configs:
        steps = space.steps(config)
        assert any(s.kind == "rfactor" for s in steps)
        (got,) = interpret(task, space.schedule(config), arrays)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(steps))


def test_llvm_built_rfactor_candidate_matches_numpy(tmp_path) -> None:
    needs_llvm()
    import tensorsmith.runtime as rt
    from tensorsmith.autotune.artifact import export_candidate

    (task,) = extract_tasks(_row_softmax())
    space = SearchSpace(task)
    (x,) = random_inputs(task, seed=2)
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    both = list(space.default())  # 16 lanes for the max and for the sum
    for i, (_, knob) in enumerate(space.knobs):
        if knob.name == "rfactor":
            both[i] = 16
    export_candidate(task, space.steps(tuple(both)), tmp_path / "c.so")
    (got,) = rt.load(tmp_path / "c.so").run({0: x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_matmul_candidates_match_numpy() -> None:
    (task,) = extract_tasks(matmul(6, 13, 10))
    space = SearchSpace(task)
    a, b = random_inputs(task)
    rng = random.Random(0)
    for _ in range(12):
        (got,) = interpret(task, space.schedule(space.sample(rng)), [a, b])
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-5)


def test_steps_replay_from_json() -> None:
    (task,) = extract_tasks(matmul(8, 16, 24))
    space = SearchSpace(task)
    config = space.sample(random.Random(3))
    steps = space.steps(config)
    again = replay(task.compute()[1], [Step.from_json(s.to_json()) for s in steps])
    assert steps_key(again.steps) == steps_key(steps)


def test_space_has_the_knobs_of_the_default_rules() -> None:
    tasks = {t.name: t for t in extract_tasks(convnet())}
    conv = SearchSpace(tasks["fused_conv2d_add_relu"])
    direct = [{k.name for k in sk.knobs} for sk in conv.algorithms[0].stages]
    assert len(direct) == 2  # the padding and the convolution (the epilogue is merged)
    assert {"inline", "by_rows"} <= direct[0] and {"vec", "rows", "cache"} <= direct[1]
    # a 3x3 convolution may also be computed by Winograd's algorithm, with its own stages
    assert conv.stages[0].knobs[0].name == "algorithm"
    winograd = [{k.name for k in sk.knobs} for sk in conv.algorithms[1].stages]
    assert len(winograd) == 4  # + the input transform, the product, the output transform
    assert "unroll_reduce" in winograd[3] and "kblock" in winograd[2]
    names = {k.name for _, k in conv.knobs}
    assert {"vec", "rows", "tile_rows", "ksplit", "korder", "cache", "epilogue",
            "parallel", "unroll_rows", "inline"} <= names
    assert conv.size() > 10**6


def test_llvm_built_candidates_match_numpy(tmp_path) -> None:
    needs_llvm()
    import tensorsmith.runtime as rt
    from tensorsmith.autotune.artifact import export_candidate

    (task,) = extract_tasks(matmul(12, 40, 72))
    space = SearchSpace(task)
    a, b = random_inputs(task)
    rng = random.Random(1)
    for i in range(4):
        path = tmp_path / f"c{i}.so"
        export_candidate(task, space.steps(space.sample(rng)), path)
        (got,) = rt.load(path).run({0: a, 1: b})
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def _cnn():
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 16, 14, 14), "float32")
    w = b.constant("w", rng.standard_normal((16, 16, 3, 3)).astype("float32"))
    w1 = b.constant("w1", rng.standard_normal((32, 16, 1, 1)).astype("float32"))
    h = b.add1("relu", [b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="c3")], name="r")
    h = b.add1("conv2d", [h, w1], {}, name="c1")  # pointwise: y and x flattened
    h = b.add1("pool2d", [h], {"kernel": [3, 3], "mode": "max", "strides": [2, 2],
                               "pads": [1, 1, 1, 1]}, name="mp")
    return b.finish([b.add1("pool2d", [h], {"kernel": [2, 2], "mode": "avg",
                                            "strides": [2, 2]}, name="ap")])


def _depthwise():
    """MobileNet's depthwise convolutions: a wide image (its padding copied first) and a
    small strided one (padding read in place); then a grouped convolution."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 8, 20, 20), "float32")
    w = b.constant("w", rng.standard_normal((8, 1, 3, 3)).astype("float32"))
    attrs = {"pads": [1, 1, 1, 1], "groups": 8}
    h = b.add1("relu", [b.add1("conv2d", [x, w], attrs, name="dw")], name="r")
    h = b.add1("conv2d", [h, w], {**attrs, "strides": [2, 2]}, name="dw_s2")
    h = b.add1("conv2d", [h, w], {**attrs, "strides": [2, 2]}, name="dw_small")
    g = b.constant("g", rng.standard_normal((8, 4, 3, 3)).astype("float32"))
    return b.finish([b.add1("conv2d", [h, g], {"pads": [1, 1, 1, 1], "groups": 2},
                            name="grouped")])  # RegNet's: 4 output channels per group


def _dense_block():
    """A DenseNet-style concatenation along channels, then an activation."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6), "float32")
    y = b.input("y", (1, 3, 6, 6), "float32")
    z = b.input("z", (1, 5, 6, 6), "float32")
    return b.finish([b.add1("relu", [b.add1("concat", [x, y, z], {"axis": 1}, name="cat")],
                            name="r")])


@pytest.mark.parametrize("graph", [mlp, convnet, _cnn, _depthwise, _dense_block,
                                   lambda: matmul(256, 256, 256),
                                   lambda: mlp(batch=1, sizes=(784, 256, 256, 10)),
                                   lambda: mlp(batch=32, sizes=(768, 1001, 10)),
                                   lambda: mlp(batch=1024, sizes=(1024, 1024, 10))],
                         ids=["mlp", "convnet", "cnn", "depthwise", "dense_block", "matmul256",
                              "mlp784",
                              "wide", "big"])
def test_default_config_is_the_default_cpu_rule(graph) -> None:  # noqa: ANN001
    """The space contains the default schedule, as its default config: the search starts
    from it, by construction (the space runs the rules)."""
    from tensorsmith.autotune.artifact import lower_candidate

    for task in extract_tasks(graph()):
        space = SearchSpace(task)
        rule = lower_candidate(task, None).attrs["steps"]
        assert steps_key(space.steps(space.default())) == steps_key(rule), task.label
