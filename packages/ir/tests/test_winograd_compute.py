"""The Winograd convolution compute (ops/winograd.py) equals the direct one.

``group_compute`` builds it when a weight input is to be read transformed; unscheduled
(every stage a plain loop nest at root), the interpreter must give the direct
convolution's result for any padding, odd sizes (partial tiles) and batch."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.lowering import group_compute, lower_group, weight_transforms
from tensorsmith.ir.ops.winograd import eligible
from tensorsmith.ir.schedules import schedule_cpu
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.schedule import Schedule


def _group(size: tuple[int, int], pads: list[int], batch: int):  # noqa: ANN202
    rng = np.random.default_rng(0)
    b = GraphBuilder("conv")
    x = b.input("x", (batch, 3, *size), "float32")
    w = b.constant("w", rng.standard_normal((4, 3, 3, 3)).astype("float32"))
    h = b.add1("conv2d", [x, w], {"pads": pads}, name="conv")
    _, groups, _ = fused_groups(b.finish([b.add1("relu", [h], name="relu")]))
    return groups[0]


def _run(func, arrays):  # noqa: ANN001, ANN202
    bufs = [a.copy() for a in func.stored_inputs(arrays)] + [
        np.zeros(p.shape, p.dtype) for p in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(arrays)]


def _assert_computes_the_direct_convolution(group, func) -> None:  # noqa: ANN001
    """``func`` (a Winograd kernel of ``group``) against the group's direct default
    kernel, in the interpreter, on random inputs."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(v.shape).astype("float32") if not v.is_constant else v.data
              for v in group.inputs]
    want = _run(lower_group(group, "r", schedule_cpu), arrays)
    np.testing.assert_allclose(_run(func, arrays), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("transform", ["winograd_f2_3", "winograd_f4_3"])
@pytest.mark.parametrize("size,pads,batch", [
    ((5, 6), [1, 1, 1, 1], 1), ((7, 7), [0, 0, 0, 0], 1), ((4, 9), [1, 0, 2, 1], 2)])
def test_unscheduled_winograd_equals_direct(transform: str, size, pads, batch) -> None:  # noqa: ANN001
    group = _group(size, pads, batch)
    inputs, outputs = group_compute(group, {1: transform})
    assert inputs[1].shape == ((4, 4, 3, 4) if transform.endswith("2_3") else (6, 6, 3, 4))
    s = Schedule(outputs)
    tags = [st.tensor.op.tag for st in s.stages]
    assert {"winograd_input", "winograd_gemm", "winograd_output"} <= set(tags)
    reader = next(st for st in s.stages if st.tensor.op.tag == "winograd_gemm")
    s.layout(reader.name, "in1", (0, 1, 2, 3), None, transform)
    assert weight_transforms(s.steps) == {1: transform}
    func = lower_group(group, "k", schedule_cpu, list(s.steps))
    assert func.attrs["layouts"] == {1: {"order": [0, 1, 2, 3], "block": None,
                                         "transform": transform}}
    _assert_computes_the_direct_convolution(group, func)


def test_eligible_convolutions() -> None:
    f2 = "winograd_f2_3"
    assert eligible({"pads": [1, 1, 1, 1]}, (8, 4, 3, 3), f2)
    assert not eligible({"strides": [2, 2]}, (8, 4, 3, 3), f2)
    assert not eligible({"dilations": [2, 2]}, (8, 4, 3, 3), f2)
    assert not eligible({"groups": 4}, (8, 1, 3, 3), f2)
    assert not eligible({}, (8, 4, 5, 5), f2)


def _blocked_group(channels: int, size: tuple[int, int], batch: int = 1):  # noqa: ANN202
    """A 3x3 convolution in a model's blocked layout (its input made blocked by a 1x1
    convolution before it), with a bias and ReLU to fuse into the output transform."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("conv")
    x = b.input("x", (batch, channels, *size), "float32")
    w0 = b.constant("w0", rng.standard_normal((channels, channels, 1, 1)).astype("float32"))
    h = b.add1("relu", [b.add1("conv2d", [x, w0], {}, name="c0")], name="r0")
    w = b.constant("w", 0.1 * rng.standard_normal((channels, channels, 3, 3)).astype("float32"))
    bias = b.constant("bias", rng.standard_normal((1, channels, 1, 1)).astype("float32"))
    y = b.add1("conv2d", [h, w], {"pads": [1, 1, 1, 1]}, name="conv")
    graph = b.finish([b.add1("relu", [b.add1("add", [y, bias], name="bias")], name="relu")])
    pytest.importorskip("tensorsmith.codegen.llvm")  # provides the llvm target
    _, groups, _ = fused_groups(graph, target="llvm -mcpu=x86-64-v3")
    return next(g for g in groups if any(n.name == "conv" for n in g.nodes))


@pytest.mark.parametrize("transform", ["winograd_f2_3", "winograd_f4_3"])
@pytest.mark.parametrize("size", [(8, 8), (7, 9)])
def test_blocked_winograd_with_the_default_rules_equals_direct(transform: str, size) -> None:  # noqa: ANN001
    group = _blocked_group(16, size)
    assert any(len(v.shape) == 5 for v in group.inputs)  # the input arrives blocked
    weight = next(i for i, v in enumerate(group.inputs) if len(v.shape) == 4)
    func = lower_group(group, "k", schedule_cpu, None, transforms={weight: transform})
    assert func.attrs["layouts"][weight]["transform"] == transform
    tags = {st.tensor.op.tag
            for st in Schedule(group_compute(group, {weight: transform})[1]).stages}
    assert {"winograd_input_blocked", "winograd_gemm", "winograd_columns",
            "winograd_output"} <= tags
    _assert_computes_the_direct_convolution(group, func)


def test_default_transform_by_tiles_and_channels() -> None:
    from tensorsmith.ir.schedules.cpu_algorithms import default_conv_transform

    attrs = {"pads": [1, 1, 1, 1], "block": 8}

    def choice(channels: int, size: int, blocked: bool = True, **extra: object) -> str | None:
        shape = (1, channels // 8, size, size, 8) if blocked else (1, channels, size, size)
        return default_conv_transform({**attrs, **extra}, shape, (channels, channels, 3, 3),
                                      (1, channels // 8, size, size, 8), "float32")

    assert choice(64, 56) == choice(128, 28) == "winograd_f4_3"  # 196 and 49 tiles of 4x4
    assert choice(256, 14) == "winograd_f2_3"  # 16 tiles of 4x4 are too few, 49 of 2x2 not
    assert choice(512, 7) is None  # 16 tiles of 2x2
    assert choice(32, 56) is None  # too few channels to amortize the transforms
    assert choice(64, 56, blocked=False) is None  # NCHW: the tuner's choice only
    assert choice(64, 56, strides=[2, 2]) is None


def test_default_transforms_of_a_group() -> None:
    from tensorsmith.ir.lowering import default_transforms

    group = _blocked_group(64, (28, 28))
    weight = next(i for i, v in enumerate(group.inputs) if len(v.shape) == 4)
    assert default_transforms(group, "cpu", [weight]) == {weight: "winograd_f4_3"}
    assert default_transforms(group, "gpu", [weight]) == {}
    assert default_transforms(group, "cpu", []) == {}  # a weight that is an input
