"""Tuning for GPU targets: the GPU search space (checked in the tensor-IR interpreter,
which runs workgroups in lockstep), and whole tuning runs measured on Vulkan (Mesa's
lavapipe on a CPU machine) and OpenCL (PoCL), whose records ``build`` then applies.

Nothing here is skipped: a machine without the Vulkan or OpenCL driver fails these
tests with the runtime's own message, as a user would see it."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from autotune_testing import (
    convnet,
    distinct_candidates,
    interpret,
    matmul,
    mlp,
    random_inputs,
    trial_records,
)

from tensorsmith.autotune.artifact import lower_candidate
from tensorsmith.autotune.features import NUM_FEATURES, extract_features
from tensorsmith.autotune.measure import BuildResult, LocalRunner
from tensorsmith.autotune.space import SearchSpace, steps_key
from tensorsmith.autotune.task import Task, extract_tasks
from tensorsmith.autotune.tuner import tune
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.records import load_best_steps, read_records
from tensorsmith.ir.schedules import schedule_gpu
from tensorsmith.ir.schedules.gpu_gemm import MAX_INVOCATIONS
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.lower import lower
from tensorsmith.ir.te.schedule import Step, replay
from tensorsmith.ir.te.stmt import For
from tensorsmith.ir.te.visit import walk_stmts


def _batched_and_reductions() -> Graph:
    """A batched matmul with an epilogue, a long (workgroup) and a short reduction."""
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5), "float32")
    y = b.input("y", (2, 5, 6), "float32")
    h = b.add1("tanh", [b.add1("matmul", [x, y], name="bmm")], name="t")
    s = b.add1("reduce_sum", [h], {"axes": [1], "keepdims": 0}, name="rs")
    z = b.input("z", (3, 40), "float32")
    return b.finish([s, b.add1("softmax", [z], {"axis": -1}, name="sm")])


def _tasks(target: str) -> list[Task]:
    out: list[Task] = []
    for graph in (mlp(batch=3, sizes=(9, 7, 7, 5)), convnet(), _batched_and_reductions()):
        out += extract_tasks(graph, target=target)
    return out


TASKS = _tasks("vulkan")


def test_space_follows_the_target() -> None:
    (cpu,) = extract_tasks(matmul(4, 5, 6))
    (gpu,) = extract_tasks(matmul(4, 5, 6), target="opencl")
    # one space for every target: the knobs its rules ask for
    assert {k.name for _, k in SearchSpace(cpu).knobs} >= {"vec", "rows", "outer_order"}
    assert {k.name for _, k in SearchSpace(gpu).knobs} == {"ty", "tx", "ri", "rj", "kt",
                                                          "prefetch"}


@pytest.mark.parametrize("index", range(len(TASKS)), ids=[t.label for t in TASKS])
def test_default_config_is_the_default_gpu_schedule(index: int) -> None:
    """The search starts from the schedule ``build`` uses without records."""
    task = TASKS[index]
    space = SearchSpace(task)
    default = steps_key(space.steps(space.default()))
    assert default == steps_key(schedule_gpu(task.compute()[1]).steps)
    assert default == steps_key(lower_candidate(task, None).attrs["steps"])


@pytest.mark.parametrize("index", range(len(TASKS)), ids=[t.label for t in TASKS])
def test_sampled_and_mutated_gpu_candidates_match_default(index: int) -> None:
    task = TASKS[index]
    space = SearchSpace(task)
    arrays = random_inputs(task, seed=index)
    inputs, outputs = task.compute()
    want = interpret(task, schedule_gpu(outputs), arrays)
    seen = 0
    for config, steps in distinct_candidates(space, random.Random(index), 6):
        seen += 1
        func = lower(space.schedule(config), inputs, outputs)
        features = extract_features(func)
        assert features.shape == (NUM_FEATURES,) and np.isfinite(features).all()
        for loop in (s for s in walk_stmts(func.body) if isinstance(s, For)):
            assert not loop.kind.startswith("threadIdx") or loop.extent <= MAX_INVOCATIONS
        # what a record stores replays to the same kernel
        again = replay(outputs, [Step.from_json(s.to_json()) for s in steps])
        assert steps_key(again.steps) == steps_key(steps)
        got = interpret(task, space.schedule(config), arrays)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=str(config))
    assert seen > 3 or space.size() < 10


def test_gpu_space_has_the_tiles_of_the_default_rules() -> None:
    tasks = {t.name: t for t in TASKS}
    conv = SearchSpace(tasks["fused_conv2d_add_relu"])
    assert len(conv.stages) == 1  # the padding is inlined, the epilogue merged
    assert {k.name for _, k in conv.knobs} == {"to", "ty", "tx", "ri", "rj", "kt"}
    gemm = SearchSpace(next(t for t in TASKS if t.name.startswith("fused_matmul")))
    assert {k.name for _, k in gemm.knobs} == {"ty", "tx", "ri", "rj", "kt", "prefetch"}
    assert gemm.size() > 100
    softmax = SearchSpace(next(t for t in TASKS if t.name == "fused_softmax"
                                  and t.group.inputs[0].shape == (3, 40)))
    knobs = [{k.name for k in sk.knobs} for sk in softmax.stages]
    # the max and the sum are long reductions, the division one output per invocation
    assert knobs == [{"reduce_threads", "workgroup"}] * 2 + [{"workgroup"}]


def test_runner_job_measures_on_the_target_device() -> None:
    runner = LocalRunner(flush_mb=8.0)
    builds = [BuildResult("/nowhere/c.so")]
    for target, device, flush in (("llvm", "cpu", 8 << 20), ("vulkan", "vulkan", 0),
                                  ("opencl", "opencl", 0)):
        (task,) = extract_tasks(matmul(4, 5, 6), target=target)
        job = runner.job(task, "/nowhere/ref.so", builds)
        assert (job["device"], job["flush_bytes"]) == (device, flush)


def _dense_relu(m: int = 16, k: int = 32, n: int = 32) -> Graph:
    rng = np.random.default_rng(1)
    b = GraphBuilder("dense")
    x = b.input("x", (m, k), "float32")
    w = b.constant("w", rng.standard_normal((k, n)).astype("float32") / math.sqrt(k))
    c = b.constant("c", rng.standard_normal((n,)).astype("float32"))
    h = b.add1("add", [b.add1("matmul", [x, w], name="mm"), c], name="bias")
    return b.finish([b.add1("relu", [h], name="relu")])


def _reference(graph: Graph, x: np.ndarray) -> np.ndarray:
    from tensorsmith.ir import run_graph

    (want,) = run_graph(graph, {"x": x})
    return want


def _check_build(graph: Graph, target: str, records, tmp_path, name: str) -> list[Step]:  # noqa: ANN001
    """Build with ``records``, run the artifact on the target's device, compare; returns
    the steps the kernel was built with."""
    import tensorsmith.runtime as rt

    lib = build(graph, target, records=records)
    (func,) = lib.funcs
    path = tmp_path / f"{name}.so"
    lib.export_library(path)
    x = np.random.default_rng(2).standard_normal(graph.inputs[0].shape).astype("float32")
    with rt.load(path, device=target) as module:
        (got,) = module.run({"x": x})
    np.testing.assert_allclose(got, _reference(graph, x), rtol=1e-4, atol=1e-4)
    return [Step.from_json(s) for s in func.attrs["steps"]]


def _tune_and_apply(target: str, trials: int, tmp_path) -> None:  # noqa: ANN001
    graph = _dense_relu()
    (task,) = extract_tasks(graph, target=target)
    records = tmp_path / f"{target}.jsonl"
    result = tune([task], records, trials, per_round=4,
                  runner=LocalRunner(min_repeat_ms=2.0, repeats=2), confirm_top=1,
                  confirm_rounds=2)
    recs = read_records(records)
    trials_done = trial_records(recs)
    assert len(trials_done) == trials and result.new_trials == trials
    assert all(r["error"] is None for r in trials_done), [r["error"] for r in trials_done]
    assert all(Target.parse(r["target"]).kind == target for r in recs)
    (selected,) = [r for r in recs if r.get("selected")]  # confirm re-measured on the device
    assert math.isfinite(result.selected_seconds[0]) and len(selected["medians"]) == 2
    assert math.isfinite(result.default_seconds[0]) and result.best_seconds[0] <= \
        result.default_seconds[0]
    # build applies the record tuning chose ...
    chosen = load_best_steps(records, Target.parse(target))[task.key]
    built = _check_build(graph, target, records, tmp_path, "tuned")
    assert steps_key(built) == steps_key(chosen)
    # ... and a measured schedule other than the default computes the same on the device
    default = steps_key(lower_candidate(task, None).attrs["steps"])
    other = next(r for r in sorted(trial_records(recs), key=lambda r: min(r["costs"]))
                 if steps_key(r["steps"]) != default)
    alone = tmp_path / "other.jsonl"
    alone.write_text(json.dumps(other) + "\n")
    built = _check_build(graph, target, alone, tmp_path, "other")
    assert steps_key(built) == steps_key(other["steps"]) != default


def test_tune_and_build_on_vulkan(tmp_path) -> None:
    _tune_and_apply("vulkan", 8, tmp_path)


def test_tune_and_build_on_opencl(tmp_path) -> None:
    _tune_and_apply("opencl", 6, tmp_path)


def test_tune_command_on_vulkan(tmp_path, capsys) -> None:
    """``tensorsmith tune -t vulkan`` on an ONNX model, then ``compile --records``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import tensorsmith.runtime as rt
    from tensorsmith.cli.main import main

    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 64)).astype("float32") / 8
    node = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(
        node, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
        [numpy_helper.from_array(w, "w")])
    model = tmp_path / "dense.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    records = tmp_path / "dense.jsonl"
    args = ["tune", str(model), "-t", "vulkan", "--trials", "6", "--per-round", "3",
            "--records", str(records), "--min-repeat-ms", "2", "--confirm-top", "1",
            "--no-plot"]
    assert main(args) == 0
    assert "model: kernels per run" in capsys.readouterr().out  # timed in the model
    recs = read_records(records)
    assert len(trial_records(recs)) == 6 and all(r["error"] is None for r in recs)
    assert {Target.parse(r["target"]).kind for r in recs} == {"vulkan"}
    artifact = tmp_path / "dense.so"
    assert main(["compile", str(model), "-t", "vulkan", "--records", str(records),
                 "-o", str(artifact)]) == 0
    x = rng.standard_normal((8, 64)).astype("float32")
    with rt.load(artifact, device="vulkan") as module:
        (got,) = module.run({"x": x})
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
