"""Convolutions vectorized over output channels, with their weights stored transposed
(``layout`` steps): the search proposes them only for constant weights, the interpreter,
the tuning runner and ``build(records=...)`` all compute what the default schedule does,
and the artifact stores each weight once."""

from __future__ import annotations

import random

import numpy as np
import pytest
from autotune_testing import convnet, interpret, needs_llvm, random_inputs

from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.schedules import schedule_cpu

#: These convolutions stay NCHW (their lanes over output channels are what is tested);
#: by default dense convolutions run on channel-blocked activations instead.
NCHW = "llvm -layout=nchw"


def _conv_task(graph):  # noqa: ANN001, ANN202
    return next(t for t in extract_tasks(graph, target=NCHW)
                if t.name.startswith("fused_conv2d"))


def _channels_config(space: SearchSpace, **values: object):  # noqa: ANN202
    """The default config with the convolution's vector loop over output channels."""
    config = list(space.default())
    want = {"vec_axis": "channels", **values}
    for k, (_, knob) in enumerate(space.knobs):
        if knob.name in want:
            assert want[knob.name] in knob.choices, (knob.name, knob.choices)
            config[k] = want[knob.name]
    assert space.valid(tuple(config))
    return tuple(config)


def _strided_conv(weight_is_input: bool = False, channels: int = 32):  # noqa: ANN202
    rng = np.random.default_rng(3)
    b = GraphBuilder("strided")
    x = b.input("x", (1, 6, 11, 11), "float32")
    w = (b.input("w", (channels, 6, 3, 3), "float32") if weight_is_input
         else b.constant("w", rng.standard_normal((channels, 6, 3, 3)).astype("float32")))
    h = b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, name="conv")
    return b.finish([b.add1("relu", [h], name="relu")])


def test_channel_vectors_are_offered_for_constant_weights_only() -> None:
    task = _conv_task(_strided_conv())
    assert task.constant_inputs == (1,)
    names = [k.name for _, k in SearchSpace(task).knobs]
    assert "vec_axis" in names
    free = _conv_task(_strided_conv(weight_is_input=True))
    assert free.constant_inputs == ()
    assert "vec_axis" not in [k.name for _, k in SearchSpace(free).knobs]


@pytest.mark.parametrize("rows,vec,order,channels", [
    (4, 8, "natural", 32), (6, 16, "rows_first", 32), (2, 8, "cols_first", 32),
    (4, 16, "rows_first", 20)])
def test_channel_vectors_compute_the_default_result(rows: int, vec: int, order: str,
                                                    channels: int) -> None:
    task = _conv_task(_strided_conv(channels=channels))
    space = SearchSpace(task)
    config = _channels_config(space, crows=rows, cvec=vec, outer_order=order)
    steps = space.steps(config)
    layout = [s.args for s in steps if s.kind == "layout"]
    if channels % vec == 0:  # blocks of output channels, each block one run
        assert layout == [("in1", [0, 2, 3, 4, 1], [0, vec])]
    else:  # the whole output-channel axis last
        assert layout == [("in1", [1, 2, 3, 0])]
    arrays = random_inputs(task, seed=1)
    (want,) = interpret(task, schedule_cpu(task.compute()[1]), arrays)
    (got,) = interpret(task, space.schedule(config), arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_random_candidates_with_channel_vectors_match() -> None:
    task = _conv_task(convnet())
    space = SearchSpace(task)
    arrays = random_inputs(task, seed=2)
    (want,) = interpret(task, schedule_cpu(task.compute()[1]), arrays)
    rng = random.Random(5)
    index = [k.name for _, k in space.knobs].index("vec_axis")
    tried = 0
    while tried < 6:
        config = space.sample(rng)
        if config[index] != "channels":
            continue
        tried += 1
        (got,) = interpret(task, space.schedule(config), arrays)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_runner_feeds_the_candidate_its_layout(tmp_path) -> None:
    needs_llvm()
    from tensorsmith.autotune.measure import LocalBuilder, LocalRunner, MeasureInput

    task = _conv_task(_strided_conv())
    space = SearchSpace(task)
    steps = space.steps(_channels_config(space, crows=6, cvec=16))
    builder, runner = LocalBuilder(1), LocalRunner(timeout=60, min_repeat_ms=1)
    try:
        ref, cand = builder.build([MeasureInput(task, None), MeasureInput(task, steps)],
                                  tmp_path)
        assert ref.error is None and cand.error is None, (ref.error, cand.error)
        (result,) = runner.run(task, ref.path, [cand])
    finally:
        builder.close()
        runner.close()
    assert result.error is None and result.costs  # checked against the default first


def test_build_stores_the_transposed_weight_once(tmp_path) -> None:
    needs_llvm()
    import tensorsmith.runtime as rt

    graph = _strided_conv()
    task = _conv_task(graph)
    space = SearchSpace(task)
    steps = space.steps(_channels_config(space, crows=4, cvec=16))
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:
        log.append(make_record(task.key, NCHW, steps, [1e-4], None))
    tuned, plain = build(graph, NCHW, records=path), build(graph, NCHW)
    (func,) = [f for f in tuned.funcs if f.attrs["workload"] == task.key]
    assert func.attrs["layouts"] == {1: {"order": [0, 2, 3, 4, 1], "block": [0, 16]}}
    assert tuned.plan.params_bytes == plain.plan.params_bytes
    tuned.export_library(tmp_path / "m.so")
    x = np.random.default_rng(0).standard_normal((1, 6, 11, 11)).astype("float32")
    (got,) = rt.load(tmp_path / "m.so").run({"x": x})
    (want,) = run_graph(graph, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_layout_records_fall_back_where_the_weight_is_an_input(tmp_path) -> None:
    """The same workload with a runtime weight cannot be transposed at build time: the
    record is not applied there, and the result is still right."""
    needs_llvm()
    import tensorsmith.runtime as rt

    task = _conv_task(_strided_conv())
    space = SearchSpace(task)
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:
        log.append(make_record(task.key, NCHW, space.steps(_channels_config(space)),
                               [1e-4], None))
    graph = _strided_conv(weight_is_input=True)
    lib = build(graph, NCHW, records=path)
    assert all("layouts" not in f.attrs for f in lib.funcs)
    lib.export_library(tmp_path / "m.so")
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((1, 6, 11, 11)).astype("float32"),
            "w": rng.standard_normal((32, 6, 3, 3)).astype("float32")}
    (got,) = rt.load(tmp_path / "m.so").run(feed)
    (want,) = run_graph(graph, feed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_search_measures_the_other_conv_rules_first() -> None:
    import random as _random

    from tensorsmith.autotune.cost_model import CostModel
    from tensorsmith.autotune.search import TaskSearch

    task = _conv_task(_strided_conv())
    space = SearchSpace(task)
    seeds = space.seeds()
    assert seeds[0] == space.default() and len(seeds) > 1
    index = [k.name for _, k in space.knobs].index("vec_axis")
    assert seeds[0][index] == "channels"  # the rule for dense convolutions
    assert {c[index] for c in seeds[1:]} == {"cols", "channels"}  # and its alternatives
    search = TaskSearch(task, CostModel(), _random.Random(0))
    first = search.propose(len(seeds) + 4)
    assert [c.config for c in first[:len(seeds)]] == seeds


def test_matmul_weights_can_be_packed_into_panels() -> None:
    from autotune_testing import mlp

    # the defaults asserted below are those of an AVX2 CPU (8 lanes), whatever the host
    task = next(t for t in extract_tasks(mlp(batch=5, sizes=(24, 32, 32, 10)),
                                         target="llvm -mcpu=haswell")
                if t.group.inputs[1].shape == (24, 32))
    space = SearchSpace(task)
    names = [k.name for _, k in space.knobs]
    pack = names.index("pack")
    assert space.default()[pack] is True and [c[pack] for c in space.seeds()].count(False) == 1
    config = list(space.default())
    config[names.index("pack")] = True
    config[names.index("vec")] = 16
    steps = space.steps(tuple(config))
    assert [s.args for s in steps if s.kind == "layout"] == [("in1", [1, 0, 2], [1, 16])]
    arrays = random_inputs(task, seed=4)
    want = interpret(task, schedule_cpu(task.compute()[1]), arrays)
    got = interpret(task, space.schedule(tuple(config)), arrays)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _blocked_windows():  # noqa: ANN202
    """Dense (from a plain and a blocked input), grouped and depthwise convolutions and a
    pooling window on channel-blocked activations (the default CPU layout)."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("blocked")
    x = b.input("x", (1, 3, 6, 6), "float32")

    def w(shape: tuple[int, ...]):  # noqa: ANN202
        return b.constant(f"w{len(shape)}_{shape[0]}_{shape[1]}",
                          rng.standard_normal(shape).astype("float32"))

    h = b.add1("conv2d", [x, w((16, 3, 3, 3))], {"pads": [1, 1, 1, 1]}, name="stem")
    h = b.add1("relu", [h], name="act")
    h = b.add1("conv2d", [h, w((16, 8, 3, 3))], {"pads": [1, 1, 1, 1], "groups": 2},
               name="grouped")
    h = b.add1("conv2d", [h, w((16, 1, 3, 3))],
               {"pads": [1, 1, 1, 1], "groups": 16, "strides": [2, 2]}, name="dw")
    h = b.add1("pool2d", [h], {"kernel": [3, 3], "mode": "max", "pads": [1, 1, 1, 1],
                               "strides": [1, 1]}, name="pool")
    h = b.add1("conv2d", [h, w((24, 16, 1, 1))], name="dense")
    return b.finish([h])


def test_random_candidates_of_blocked_windows_match() -> None:
    """Every knob of the blocked-window rule (blocks per tile, rows, k orders and
    splits, ...) schedules correctly: random candidates compute the default's result."""
    tasks = [t for t in extract_tasks(_blocked_windows())
             if any(len(v.shape) == 5 for v in t.group.outputs)]
    assert len(tasks) >= 4
    rng = random.Random(7)
    for task in tasks:
        space = SearchSpace(task)
        arrays = random_inputs(task, seed=3)
        (want,) = interpret(task, schedule_cpu(task.compute()[1]), arrays)[:1]
        configs = [space.sample(rng) for _ in range(3)]
        # the rows between split reduce loops, beside unrolled blocks of channels
        mid = list(space.default())
        for k, (_, knob) in enumerate(space.knobs):
            want_value = {"rows_pos": "mid", "ksplit": 4, "cblocks": 2}.get(knob.name)
            if want_value in knob.choices:
                mid[k] = want_value
        if space.valid(tuple(mid)):
            configs.append(tuple(mid))
        for config in configs:
            (got,) = interpret(task, space.schedule(config), arrays)[:1]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
