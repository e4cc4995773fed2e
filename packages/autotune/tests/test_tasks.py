"""Task extraction: one task per distinct kernel, weights, FLOPs, stable keys."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

from autotune_testing import HERE, convnet, matmul, mlp

from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.lowering import workload_key


def test_mlp_tasks_counts_and_weights() -> None:
    tasks = extract_tasks(mlp())
    names = [t.name for t in tasks]
    assert names == ["fused_matmul_add_relu", "fused_matmul_add", "fused_softmax"]
    assert [t.weight for t in tasks] == [2, 1, 1]  # the two 16x16 layers share a task
    assert sum(t.weight for t in tasks) == len(fused_groups(mlp())[1])


def test_task_keys_are_the_keys_build_looks_up() -> None:
    graph = convnet()
    _, groups, _ = fused_groups(graph)
    keys = {workload_key(g) for g in groups}
    tasks = extract_tasks(graph)
    assert {t.key for t in tasks} == keys
    assert {t.name for t in tasks} >= {"fused_conv2d_add_relu", "fused_pool2d", "fused_matmul"}


def test_flops_of_a_matmul() -> None:
    (task,) = extract_tasks(matmul(8, 32, 16))
    assert task.flops == 2 * 8 * 32 * 16


def test_tasks_pickle_small_and_detached() -> None:
    for task in extract_tasks(mlp(sizes=(256, 256, 10))):
        blob = pickle.dumps(task)
        assert len(blob) < 20_000  # no weights travel with a task
        again = pickle.loads(blob)
        assert again.key == task.key and again.weight == task.weight
        assert workload_key(again.group) == task.key
        assert len(again.compute()[1]) == len(task.compute()[1])


def test_keys_stable_across_processes() -> None:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from autotune_testing import convnet, mlp;"
        "from tensorsmith.autotune.task import extract_tasks;"
        "print(json.dumps([[t.key, t.weight] for g in (mlp(), convnet())"
        " for t in extract_tasks(g)]))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True,
                         text=True, check=True).stdout
    here = [[t.key, t.weight] for g in (mlp(), convnet()) for t in extract_tasks(g)]
    assert json.loads(out) == here


def test_groups_with_run_time_sizes_are_no_tasks() -> None:
    """They keep the default rules (schedules/cpu_dynamic.py): a measurement at one size
    would not stand for the others."""
    import numpy as np

    from tensorsmith.ir import GraphBuilder
    from tensorsmith.ir.symbolic import symbol

    b = GraphBuilder()
    w = b.constant("w", np.ones((64, 32), "float32"))
    dynamic = b.add1("matmul", [b.input("x", (symbol("batch"), 64), "float32"), w])
    static = b.add1("matmul", [b.input("s", (4, 64), "float32"), w])
    tasks = extract_tasks(b.finish([dynamic, static]))
    assert [list(t.group.inputs[0].shape) for t in tasks] == [[4, 64]]


def test_kernels_written_directly_are_no_tasks() -> None:
    """NonZero's kernel is written as tensor IR (ir/direct.py): no schedule to tune."""
    b = GraphBuilder()
    x = b.input("x", (4, 5), "float32")
    indices, count = b.add("nonzero", [b.add1("relu", [x], {}, "relu")], {}, "nz")
    for target in ("llvm", "vulkan"):
        tasks = extract_tasks(b.finish([indices, count]), target=target)
        assert [t.name for t in tasks] == ["fused_relu"]
