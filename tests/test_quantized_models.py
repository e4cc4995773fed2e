"""int8 QDQ models through the full stack on every target, against ONNX Runtime.

A small convolutional net (a 3-channel strided stem, 3x3 convolutions with a residual
add, max pooling, a 1x1 convolution, a depthwise one, global pooling, a Gemm), a
MobileNetV3 block (HardSwish, squeeze and excitation with HardSigmoid and Mul, a
residual add) and an MLP (MatMul + Add, Gemm with a transposed weight, MatMul) are
quantized by ONNX Runtime's own tool (QDQ, int8 per-channel weights; uint8 and int8
activations). tensorsmith computes their dense convolutions and products with integer
ops (passes/integer_products.py); the result must be within one quantization step of
the output of ONNX Runtime with its graph optimizations off (ONNX's QDQ semantics: float
compute of the dequantized values). On the CPU, the integer weights are stored as int8.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from model_testing import device_of
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import GraphBuilder, Target, build, run_graph
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight

rng = np.random.default_rng(21)


def _init(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                   name)


def conv_net() -> onnx.ModelProto:
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["c0"], ["r0"]),
        node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        node("Add", ["c2", "r0"], ["s2"]), node("Relu", ["s2"], ["r2"]),
        node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p2", "w3", "b3"], ["c3"]), node("Relu", ["c3"], ["r3"]),
        node("Conv", ["r3", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1], group=32),
        node("Relu", ["c4"], ["r4"]),
        node("GlobalAveragePool", ["r4"], ["gp"]), node("Flatten", ["gp"], ["f"]),
        node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [_init("w0", 16, 3, 3, 3), _init("b0", 16, scale=0.1),
             _init("w1", 16, 16, 3, 3, scale=0.1), _init("b1", 16, scale=0.1),
             _init("w2", 16, 16, 3, 3, scale=0.1), _init("b2", 16, scale=0.1),
             _init("w3", 32, 16, 1, 1), _init("b3", 32, scale=0.1),
             _init("w4", 32, 1, 3, 3), _init("b4", 32, scale=0.1),
             _init("wf", 10, 32), _init("bf", 10, scale=0.1)]
    graph = helper.make_graph(
        nodes, "conv_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                          [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mlp() -> onnx.ModelProto:
    node = helper.make_node
    nodes = [node("MatMul", ["x", "w1"], ["m1"]), node("Add", ["m1", "b1"], ["a1"]),
             node("Relu", ["a1"], ["r1"]),
             node("Gemm", ["r1", "w2", "b2"], ["g2"], transB=1), node("Relu", ["g2"], ["r2"]),
             node("MatMul", ["r2", "w3"], ["y"])]
    inits = [_init("w1", 256, 192), _init("b1", 192, scale=0.1), _init("w2", 128, 192),
             _init("b2", 128, scale=0.1), _init("w3", 128, 10)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mobile_block() -> onnx.ModelProto:
    """A MobileNetV3 block: a 1x1 expansion, HardSwish, a depthwise 3x3, squeeze and
    excitation (global pooling, two 1x1 convolutions, HardSigmoid, Mul), a 1x1
    projection added to the block's input, then pooling and a Gemm."""
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["c0"]), node("HardSwish", ["c0"], ["h0"]),
        node("Conv", ["h0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=32),
        node("HardSwish", ["c1"], ["h1"]),
        node("GlobalAveragePool", ["h1"], ["g1"]), node("Conv", ["g1", "w2", "b2"], ["c2"]),
        node("Relu", ["c2"], ["r2"]), node("Conv", ["r2", "w3", "b3"], ["c3"]),
        node("HardSigmoid", ["c3"], ["e3"], alpha=1.0 / 6.0),
        node("Mul", ["h1", "e3"], ["m3"]), node("Conv", ["m3", "w4", "b4"], ["c4"]),
        node("Add", ["c4", "x"], ["s4"]),
        node("GlobalAveragePool", ["s4"], ["gp"]), node("Flatten", ["gp"], ["f"]),
        node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [_init("w0", 32, 16, 1, 1, scale=0.3), _init("b0", 32, scale=0.1),
             _init("w1", 32, 1, 3, 3, scale=0.3), _init("b1", 32, scale=0.1),
             _init("w2", 8, 32, 1, 1, scale=0.3), _init("b2", 8, scale=0.1),
             _init("w3", 32, 8, 1, 1, scale=0.3), _init("b3", 32, scale=0.1),
             _init("w4", 16, 32, 1, 1, scale=0.2), _init("b4", 16, scale=0.1),
             _init("wf", 10, 16), _init("bf", 10, scale=0.1)]
    graph = helper.make_graph(
        nodes, "mobile_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                              [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


#: (builder, ops on a VNNI CPU, ops on a GPU target)
MODELS = {"conv_net": (conv_net, {"qconv2d": 3, "conv2d": 2, "qmatmul": 1},
                       {"qconv2d": 3, "conv2d": 2, "qmatmul": 1}),
          "mobile_block": (mobile_block, {"qconv2d": 2, "conv2d": 3, "qmatmul": 1},
                           {"qconv2d": 4, "conv2d": 1, "qmatmul": 1}),
          "mlp": (mlp, {"qmatmul": 3}, {"qmatmul": 3})}
ACTIVATIONS = ["uint8", "int8"]


def _shape(model: onnx.ModelProto) -> tuple[int, ...]:
    return tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Each model quantized by ONNX Runtime for each activation type (QDQ files)."""
    return quantize_models(tmp_path_factory.mktemp("quantized"))


def quantize_models(folder: Path) -> dict[tuple[str, str], Path]:
    """Each of MODELS quantized by ONNX Runtime for each activation type, QDQ files in
    ``folder`` (also for tests/test_cross_aarch64.py)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    out = {}
    for name, (make, _, _) in MODELS.items():
        model = make()
        source = folder / f"{name}.onnx"
        onnx.save(model, source)
        seeds = np.random.default_rng(5)
        calibration = [{"x": seeds.standard_normal(_shape(model)).astype(np.float32)}
                       for _ in range(8)]

        class Reader(CalibrationDataReader):
            def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
                self.feeds = iter(feeds)

            def get_next(self) -> dict[str, np.ndarray] | None:
                return next(self.feeds, None)

        for activation in ACTIVATIONS:
            target = folder / f"{name}_{activation}.onnx"
            quantize_static(str(source), str(target), Reader(calibration),
                            quant_format=QuantFormat.QDQ,
                            per_channel=True, weight_type=QuantType.QInt8,
                            activation_type=QuantType.QUInt8 if activation == "uint8"
                            else QuantType.QInt8)
            out[name, activation] = target
    return out


def _output_step(model: onnx.ModelProto) -> float:
    """The scale of the QuantizeLinear whose DequantizeLinear gives the graph's output."""
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    by_output = {o: n for n in model.graph.node for o in n.output}
    dq = by_output[model.graph.output[0].name]
    assert dq.op_type == "DequantizeLinear", dq.op_type
    return float(init[dq.input[1]].reshape(-1)[0])


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_within_one_quantization_step_of_onnxruntime(
        name: str, activation: str, target: str, quantized: dict[tuple[str, str], Path],
        tmp_path: Path) -> None:
    model = onnx.load(quantized[name, activation])
    graph, params = from_onnx(model)
    artifact = tmp_path / f"{name}{Target.parse(target).info.suffix}"
    build(graph, target=target, params=params).export_library(artifact)
    step = _output_step(model)
    feeds_rng = np.random.default_rng(9)
    with rt.load(artifact, device=device_of(target)) as module:
        for _ in range(3):
            feeds = {"x": feeds_rng.standard_normal(_shape(model)).astype(np.float32)}
            got = module.run(feeds)[0]
            want = _reference(model, feeds)
            assert got.shape == want.shape
            steps = float(np.max(np.abs(got - want))) / step
            assert steps <= 1.0 + 1e-3, f"{name} ({activation}) on {target}: {steps:.2f} steps"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dense_layers_compute_in_integers(name: str,
                                          quantized: dict[tuple[str, str], Path]) -> None:
    """What an AVX-512 VNNI CPU computes in integers (its channel-blocked graph): dense
    convolutions and products; the stem's 3 channels, the depthwise convolution and the
    squeeze-and-excitation's 8-channel ones stay in float. A GPU target with packed
    four-byte dots computes every dense one in integers, one without them none
    (build._integer_products says why); depthwise stays float."""
    graph, params = from_onnx(onnx.load(quantized[name, "uint8"]))
    floats = collections.Counter({"conv2d": 0, "matmul": 0})
    for op, count in MODELS[name][2].items():
        floats[op.removeprefix("q")] += count
    for target, expected in (("llvm -mcpu=skylake-avx512 -mattr=+avx512vnni",
                              MODELS[name][1]),
                             ("vulkan -integer-dot-product=1", MODELS[name][2]),
                             ("vulkan", {k: v for k, v in floats.items() if v})):
        optimized, _, _ = fused_groups(graph.copy(), params, target=target)
        counted = collections.Counter(n.op for n in optimized.nodes if "conv" in n.op
                                      or "matmul" in n.op)
        assert dict(counted) == expected, (target, counted)


def test_a_cpu_without_integer_dot_products_keeps_qdq_products_in_float(
        quantized: dict[tuple[str, str], Path]) -> None:
    """On AVX2 (no VNNI) the integer kernels are exact but slower than float32 ones: a
    QDQ model's products stay float there; the QOperator ops (int32 products in the
    model itself) still take the integer kernels."""
    graph, params = from_onnx(onnx.load(quantized["conv_net", "uint8"]))
    optimized, _, _ = fused_groups(graph, params, target="llvm -mcpu=haswell")
    ops = {n.op for n in optimized.nodes}
    assert "conv2d" in ops and "matmul" in ops and not ops & {"qconv2d", "qmatmul"}
    graph, params = from_onnx(_qoperator("QLinearConv"))
    optimized, _, _ = fused_groups(graph, params, target="llvm -mcpu=haswell")
    assert "qconv2d" in {n.op for n in optimized.nodes}


def test_integer_weights_are_stored_as_int8(quantized: dict[tuple[str, str], Path],
                                            tmp_path: Path) -> None:
    """The MLP's weights (its 84 KiB of float32 matrices): int8 in the artifact's weights
    for a VNNI CPU, a quarter of the bytes plus a few per-column constants (compiled
    only: any x86 host builds it)."""
    sizes = {}
    for label, model in (("float", mlp()), ("int8", onnx.load(quantized["mlp", "uint8"]))):
        graph, params = from_onnx(model)
        path = tmp_path / f"{label}.so"
        build(graph, target="llvm -mcpu=skylake-avx512 -mattr=+avx512vnni",
              params=params).export_library(path)
        artifact = rt.read_artifact(path)
        sizes[label] = artifact.section_length("params")
    weights = 4 * (256 * 192 + 128 * 192 + 128 * 10)
    assert sizes["float"] >= weights
    assert sizes["int8"] < 0.3 * sizes["float"], sizes


def _qoperator(kind: str) -> onnx.ModelProto:
    """One integer op of ONNX's QOperator format on a small input (what onnx.helper
    writes; ONNX Runtime runs each natively)."""
    q = np.random.default_rng(4)

    def const(name: str, a: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(a, name)

    conv = kind in ("QLinearConv", "ConvInteger")
    signed = kind in ("ConvInteger", "QLinearMatMul")  # int8 activations for these two
    xtype = np.int8 if signed else np.uint8
    shape, wshape, out_shape = (((1, 16, 6, 6), (16, 16, 3, 3), (1, 16, 6, 6)) if conv
                                else ((5, 32), (32, 24), (5, 24)))
    w = q.integers(-127, 128, wshape).astype(np.int8)
    x_zero = np.array(-7 if signed else 131, xtype)
    if kind.endswith("Integer"):
        inputs, inits = ["x", "w", "xz"], [const("w", w), const("xz", x_zero)]
    else:
        scales = [const("xs", np.array(0.05, np.float32)), const("xz", x_zero),
                  const("w", w)]
        w_scale = np.full(16, 0.01, np.float32) if conv else np.array(0.01, np.float32)
        w_zero = np.zeros(16, np.int8) if conv else np.array(0, np.int8)
        y_zero = np.array(-3 if signed else 5, xtype)
        scales += [const("ws", w_scale), const("wz", w_zero),
                   const("ys", np.array(0.5, np.float32)), const("yz", y_zero)]
        inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
        inits = scales
        if conv:
            inits.append(const("b", q.integers(-500, 500, 16).astype(np.int32)))
            inputs.append("b")
    attrs = {"pads": [1, 1, 1, 1]} if conv else {}
    elem = TensorProto.INT8 if signed else TensorProto.UINT8
    out = TensorProto.INT32 if "Integer" in kind else elem
    graph = helper.make_graph([helper.make_node(kind, inputs, ["y"], **attrs)], kind.lower(),
                              [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", out, out_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("kind", ["ConvInteger", "MatMulInteger", "QLinearConv",
                                  "QLinearMatMul"])
def test_qoperator_ops_compute_with_the_integer_ops(kind: str, target: str,
                                                    tmp_path: Path) -> None:
    """ConvInteger, MatMulInteger (int32 results: equal to ONNX Runtime's) and QLinearConv,
    QLinearMatMul (requantized: within one step), as qconv2d / qmatmul on every target."""
    model = _qoperator(kind)
    graph, params = from_onnx(model)
    optimized, _, _ = fused_groups(graph.copy(), params, target=target)
    ops = {n.op for n in optimized.nodes}
    assert ops & {"qconv2d", "qmatmul"} and not ops & {"conv2d", "matmul"}, ops
    artifact = tmp_path / f"m{Target.parse(target).info.suffix}"
    build(graph, target=target, params=params).export_library(artifact)
    x_type = np.int8 if kind in ("ConvInteger", "QLinearMatMul") else np.uint8
    info = np.iinfo(x_type)
    shape = _shape(model)
    feeds = {"x": np.random.default_rng(6).integers(info.min, info.max + 1, shape).astype(x_type)}
    with rt.load(artifact, device=device_of(target)) as module:
        got = module.run(feeds)[0]
    want = _reference(model, feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    limit = 0 if "Integer" in kind else 1
    assert np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))) <= limit


def test_an_activation_between_integer_convolutions_is_stored_as_bytes(
        quantized: dict[tuple[str, str], Path]) -> None:
    """The conv net's second convolution feeds only the third: its kernel ends with the
    third's quantize step and writes one uint8 tensor (channel-blocked on the CPU), which
    the third's kernel reads; no float copy of it is made."""
    graph, params = from_onnx(onnx.load(quantized["conv_net", "uint8"]))
    for target in ("llvm -mcpu=skylake-avx512 -mattr=+avx512vnni",
                   "llvm -mcpu=haswell -mattr=+avxvnni"):  # blocks of 16 and 8
        _, groups, _ = fused_groups(graph.copy(), params, target=target)
        convs = [g for g in groups if any(n.op == "qconv2d" for n in g.nodes)]
        assert len(convs) == 3
        second, third = convs[0], convs[1]
        assert [v.dtype for v in second.outputs] == ["uint8"], second.outputs
        assert second.outputs[0] in third.inputs


def _op_graph(kind: str) -> tuple[Graph, dict[str, np.ndarray]]:
    """One integer op on its own (what integer_products writes), with inputs."""
    g = np.random.default_rng(8)
    b = GraphBuilder()
    if kind == "qconv2d":
        x = b.input("x", (1, 8, 7, 6), "uint8")
        w = pack_conv_weight(g.integers(-128, 128, (5, 8, 3, 3)).astype(np.int8))
        y = b.add1("qconv2d", [x, b.constant("w", w)],
                   {"pads": [1, 0, 1, 2], "strides": [2, 1], "zero_point": 77}, name="q")
    else:
        x = b.input("x", (2, 5, 12), "uint8")
        w = pack_matmul_weight(g.integers(-128, 128, (12, 9)).astype(np.int8))
        y = b.add1("qmatmul", [x, b.constant("w", w)], name="q")
    return b.finish([y]), {"x": g.integers(0, 256, x.shape).astype(np.uint8)}


@pytest.mark.parametrize("kind", ["qconv2d", "qmatmul"])
def test_integer_ops_compute_on_every_target(kind: str, target: str, tmp_path: Path) -> None:
    """The integer ops' generic code (no dot idiom) on every target, equal to the
    interpreter's (exact int32 sums)."""
    graph, feeds = _op_graph(kind)
    want = run_graph(graph, feeds)[0]
    artifact = tmp_path / f"m{Target.parse(target).info.suffix}"
    build(graph, target=target).export_library(artifact)
    with rt.load(artifact, device=device_of(target)) as module:
        got = module.run(feeds)[0]
    assert got.dtype == np.int32 and np.array_equal(got, want)


def _near_ties(scale: np.float32, count: int) -> np.ndarray:
    """``count`` float32 values an ulp or two from a tie ``(k + 0.5) * scale`` (k in
    -127..126), whose quotient ``x / scale`` rounds one way and ``x * (1 / scale)`` the
    other: where a quantize step computed with a reciprocal is a whole step off."""
    ties = ((np.arange(-127, 127) + 0.5) * np.float64(scale)).astype(np.float32)
    x = np.concatenate([ties, *(np.nextafter(ties, np.float32(d)) for d in (-np.inf, np.inf)),
                        *(np.nextafter(np.nextafter(ties, np.float32(d)), np.float32(d))
                          for d in (-np.inf, np.inf))])
    differ = np.rint(x / scale) != np.rint(x * (np.float32(1) / scale))
    picked = np.unique(x[differ])
    assert picked.size >= count, f"only {picked.size} values near a tie"
    return np.random.default_rng(5).permutation(picked)[:count]


def test_quantize_rounds_the_exact_quotient_on_every_target(target: str,
                                                            tmp_path: Path) -> None:
    """QuantizeLinear rounds ``x / scale`` as divided in float32 (ties to even): on values
    where the quotient and the product with the reciprocal round differently, every
    target's result is ONNX Runtime's (without optimizations) exactly. The LLVM backend
    multiplied by the reciprocal (fast-math ``arcp``) and was a step off on all of them."""
    scale = np.float32(0.07932984)
    x = _near_ties(scale, 64).reshape(1, 4, 4, 4)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "quantize_ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                               x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
        [numpy_helper.from_array(np.asarray(scale), "s"),
         numpy_helper.from_array(np.asarray(128, np.uint8), "z")]),
        opset_imports=[helper.make_opsetid("", 17)])
    want = _reference(model, {"x": x})
    graph, params = from_onnx(model)
    artifact = tmp_path / f"m{Target.parse(target).info.suffix}"
    build(graph, target=target, params=params).export_library(artifact)
    with rt.load(artifact, device=device_of(target)) as module:
        got = module.run({"x": x})[0]
    steps = np.rint(np.abs(got.astype(np.float64) - want) / scale)
    assert np.array_equal(got, want), (
        f"{target}: {int(np.count_nonzero(steps))} of {x.size} values a step off")
