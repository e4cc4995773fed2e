"""Models compiled for reduced precision (``build(..., precision=...)``,
passes/precision.py) against ONNX Runtime's float32 result.

Tolerances (``max |ours - ort| / max |ort|``): each value between kernels is rounded to
the 16-bit type once (unit roundoff u = 2**-11 for float16, 2**-8 for bfloat16), sums
are float32, and a few layers compound a few such roundings of values near the largest
output; 2e-3 (about 4u) for float16 and 1e-2 (about 2.5u) for bfloat16 leave that room
while still failing for a float16 accumulation (a 576-term float16 sum is off by ~10u)
or a wrong rounding of the weights. Measured here: ResNet-18 (32x32) 1.1e-3 / 4.4e-3.

float16 runs on every target (the ``target`` fixture), OpenCL devices without
``cl_khr_fp16`` (PoCL) included: float16 is memory there, computed in float.
``opencl -float16-arithmetic=1`` computes in ``half``, needs ``cl_khr_fp16`` and is
refused plainly by a device without it. bfloat16 kernels exist only for llvm: the GPU
targets must refuse it at build time, naming the dtype and target.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from bench.measure import relative_error
from bench.models import MODELS, input_shapes, sample_inputs
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, TargetError, build

RTOL = {"fp16": 2e-3, "bf16": 1e-2}


def mlp() -> onnx.ModelProto:
    """Gemm + Relu, Gemm, Softmax: 64 -> 128 -> 10, batch 4."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.15).astype(np.float32), n)
             for n, s in (("w1", (128, 64)), ("b1", (128,)), ("w2", (10, 128)), ("b2", (10,)))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["prob"], axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 10]),
         helper.make_tensor_value_info("prob", TensorProto.FLOAT, [4, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MODELS_UNDER_TEST = {
    "mlp": mlp,
    "convnet": lambda: MODELS["resnet18"](opset=17, image=32),
    "attention": lambda: MODELS["bert_encoder"](opset=17, layers=1, hidden=64, heads=2,
                                                seq=16, vocab=50),
}


def _compile_and_run(model: onnx.ModelProto, target: str, precision: str, path: Path
                     ) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """(ours, ONNX Runtime's float32 outputs, artifact bytes)."""
    feeds = sample_inputs(model, seed=1)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    mod, params = from_onnx(model, shape=input_shapes(model))
    tgt = Target.parse(target)
    artifact = path / f"model_{precision}{tgt.info.suffix}"
    build(mod, target=target, params=params, precision=precision).export_library(artifact)
    with rt.load(artifact, device=tgt.info.device) as module:
        got = module.run(feeds)
    return got, want, artifact.stat().st_size


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("name", list(MODELS_UNDER_TEST))
def test_llvm_within_tolerance(name: str, precision: str, tmp_path: Path) -> None:
    model = MODELS_UNDER_TEST[name]()
    got, want, _ = _compile_and_run(model, "llvm", precision, tmp_path)
    for out, g, w in zip(model.graph.output, got, want):
        assert g.dtype == np.float32 and g.shape == w.shape, out.name
        err = relative_error(g, w)
        assert err < RTOL[precision], f"{name} {out.name}: {err:.3g}"
        # and not suspiciously exact: the outputs did go through the 16-bit type
        assert err > 1e-6, f"{name} {out.name}: {err:.3g} (was it computed in float32?)"


def test_weights_stored_at_half_size(tmp_path: Path) -> None:
    """The fp16 and bf16 artifacts of the conv net carry about half the bytes (the
    weights dominate them)."""
    model = MODELS_UNDER_TEST["convnet"]()
    sizes = {p: _compile_and_run(model, "llvm", p, tmp_path)[2] for p in ("fp32", "fp16", "bf16")}
    weights = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    for p in ("fp16", "bf16"):
        assert sizes["fp32"] - sizes[p] > 0.45 * weights, sizes


@pytest.mark.parametrize("name", list(MODELS_UNDER_TEST))
def test_fp16_on_every_target(name: str, target: str, tmp_path: Path) -> None:
    model = MODELS_UNDER_TEST[name]()
    got, want, _ = _compile_and_run(model, target, "fp16", tmp_path)
    for out, g, w in zip(model.graph.output, got, want):
        err = relative_error(g, w)
        assert err < RTOL["fp16"], f"{name} {out.name} on {target}: {err:.3g}"
        assert err > 1e-6, f"{name} {out.name} on {target}: {err:.3g} (float32 throughout?)"


@pytest.mark.opencl
def test_fp16_with_opencl_half_arithmetic(tmp_path: Path) -> None:
    """``-float16-arithmetic=1`` computes in ``half``: it runs where the device has
    cl_khr_fp16, and a device without it refuses the artifact, naming the extension."""
    model = MODELS_UNDER_TEST["mlp"]()
    target = "opencl -float16-arithmetic=1"
    if "cl_khr_fp16" not in _opencl_extensions():  # PoCL on CPUs
        with pytest.raises(rt.DeviceError, match="needs the OpenCL extension cl_khr_fp16 "
                           r"\(float16 arithmetic\).*or compile it without "
                           "-float16-arithmetic=1"):
            _compile_and_run(model, target, "fp16", tmp_path)
        return
    got, want, _ = _compile_and_run(model, target, "fp16", tmp_path)
    for out, g, w in zip(model.graph.output, got, want):
        assert relative_error(g, w) < RTOL["fp16"], f"mlp {out.name}"


def _opencl_extensions() -> list[str]:
    from tensorsmith.runtime.opencl import list_devices

    return list_devices()[0].extensions.split()


@pytest.mark.parametrize("gpu", [pytest.param("vulkan", marks=pytest.mark.vulkan),
                                 pytest.param("opencl", marks=pytest.mark.opencl)])
def test_bf16_refused_by_gpu_targets(gpu: str) -> None:
    mod, params = from_onnx(MODELS_UNDER_TEST["mlp"]())
    with pytest.raises(TargetError, match=f"the {gpu} target does not support dtype bfloat16: "
                       r"'x_bf16' of node .* \(precision='bf16' stores the model in bfloat16"):
        build(mod, target=gpu, params=params, precision="bf16")


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_symbolic_batch(precision: str, tmp_path: Path) -> None:
    """A model whose batch is known only at run time (examples/mlp.onnx: ``N``), built
    once for reduced precision, runs every batch within tolerance."""
    model = onnx.load(Path(__file__).resolve().parent.parent / "examples" / "mlp.onnx")
    mod, params = from_onnx(model)
    build(mod, "llvm", params=params, precision=precision).export_library(tmp_path / "m.so")
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with rt.load(tmp_path / "m.so") as module:
        for n in (1, 5, 33):
            x = np.random.default_rng(n).standard_normal((n, 784)).astype(np.float32)
            (got,), (want,) = module.run({"input": x}), session.run(None, {"input": x})
            assert relative_error(got, want) < RTOL[precision], n


def test_tuning_tasks_are_the_reduced_kernels() -> None:
    """extract_tasks(precision=...) finds the workloads build looks up for that
    precision: products of 16-bit operands, none of them a float32 build's (the softmax,
    float32 in both, is one task of both)."""
    from tensorsmith.autotune import extract_tasks

    mod, params = from_onnx(MODELS_UNDER_TEST["mlp"]())
    full = {t.key for t in extract_tasks(mod, params, "llvm")}
    products = {t.key for t in extract_tasks(mod, params, "llvm", precision="fp16")
                if "matmul" in t.key}
    assert len(products) == 2 and all("matmul(in0:float16" in k for k in products)
    assert not products & full


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_winograd_convolution_in_reduced_precision(precision: str, tmp_path: Path) -> None:
    """3x3 convolutions of 64 channels on a 16x16 image, on channel-blocked activations
    (the first one converts its input), run Winograd's F(2x2) by default on the CPU; with
    16-bit inputs the transforms and products are float32, so they stay within the
    type's tolerance of the float32 reference."""
    from tensorsmith.ir import GraphBuilder, run_graph

    rng = np.random.default_rng(9)
    b = GraphBuilder()
    x = b.input("x", (1, 64, 16, 16), "float32")
    w1, w2 = (b.constant(n, (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32))
              for n in ("w1", "w2"))
    h = b.add1("relu", [b.add1("conv2d", [x, w1], {"pads": [1, 1, 1, 1]}, name="conv1")])
    g = b.finish([b.add1("conv2d", [h, w2], {"pads": [1, 1, 1, 1]}, name="conv2")])
    feeds = {"x": rng.standard_normal((1, 64, 16, 16)).astype(np.float32)}
    (want,) = run_graph(g, feeds)
    lib = build(g, "llvm", precision=precision)
    assert "_wino_in" in lib.get_source("tir")
    lib.export_library(tmp_path / "wino.so")
    with rt.load(tmp_path / "wino.so") as module:
        (got,) = module.run(feeds)
    assert 1e-6 < relative_error(got, want) < RTOL[precision]


@pytest.mark.parametrize("target,widened", [
    ("llvm", True), pytest.param("vulkan", False, marks=pytest.mark.vulkan)])
def test_16_bit_activations_widened_once_on_cpus_only(target: str, widened: bool) -> None:
    """On a CPU the products' 16-bit activations are converted by a stage of their own
    (passes/precision.py: widen_inputs_first); GPU kernels read them as they are (a
    cooperative-matrix product takes float16 operands only)."""
    mod, params = from_onnx(MODELS_UNDER_TEST["attention"]())
    tir = build(mod, target=target, params=params, precision="fp16").get_source("tir")
    assert ("_widen" in tir) is widened


@pytest.mark.vulkan
@pytest.mark.parametrize("name", ["attention", "convnet"])
def test_fp16_with_vulkan_float16_arithmetic(name: str, tmp_path: Path) -> None:
    """The pass's graphs on Vulkan computing float16 values in float16 registers
    (``-float16-arithmetic=1``): the float32 sums and float32 ops the pass asks for
    stay float32 there."""
    model = MODELS_UNDER_TEST[name]()
    got, want, _ = _compile_and_run(model, "vulkan -float16-arithmetic=1", "fp16", tmp_path)
    for out, g, w in zip(model.graph.output, got, want):
        assert relative_error(g, w) < RTOL["fp16"], f"{name} {out.name}"


@pytest.mark.vulkan
def test_fp16_products_reach_cooperative_matrices() -> None:
    """The pass's products (float16 operands, float32 sums, a cast back after the bias)
    are the float16 x float16 -> float32 products that the cooperative-matrix rule
    tensorizes (schedules/gpu_coop.py), with float16 arithmetic on as on an H100:
    every kernel of the attention model that computes a matmul has the tensorize step."""
    mod, params = from_onnx(MODELS_UNDER_TEST["attention"]())
    target = ("vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 -shared-memory=49152 "
              "-float16-arithmetic=1")
    lib = build(mod, target=target, params=params, precision="fp16")
    steps = [f.attrs.get("steps") or [] for f in lib.funcs]
    products = [s for s in steps if any(st[1] == "t0_matmul" for st in s)]
    assert len(products) == 6, steps  # q, k, v, scores, context, out
    assert all(s[0][0] == "tensorize" for s in products), products
