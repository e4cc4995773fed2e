"""Post-training quantization (``tensorsmith.quantize``) of a small conv + gemm classifier.

ONNX Runtime is the independent judge: the QDQ model must pass onnx's checker, run in
ONNX Runtime, stay close to the float model there and pick the same class on most inputs;
tensorsmith must run the QDQ model as ONNX Runtime does. The weights must really be int8
per output channel along the right axis, the biases int32 on input scale x weight scale.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from quantize_models import CLASSES, classifier, feeds

from tensorsmith.quantize import QuantizeError, QuantizeResult, quantize
from tensorsmith.quantize.engine import CompiledModel

ort = pytest.importorskip("onnxruntime")

CALIBRATION = feeds(16, seed=1)
EVALUATION = feeds(64, seed=2)
# (max |quantized - float| / max |float| of the logits in ONNX Runtime, top-1 agreement):
# entropy clips the (Gaussian) input and activations hardest, so it may lose the most
LIMITS = {"minmax": (0.05, 0.9), "percentile": (0.05, 0.9), "entropy": (0.15, 0.9)}


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return classifier()


@pytest.fixture(scope="module", params=sorted(LIMITS))
def quantized(request: pytest.FixtureRequest, model: onnx.ModelProto) -> tuple[str, QuantizeResult]:
    method = request.param
    return method, quantize(model, CALIBRATION, method=method, evaluation=EVALUATION)


def session(model: onnx.ModelProto, optimized: bool = True) -> object:
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def ort_logits(model: onnx.ModelProto, samples: list[dict[str, np.ndarray]],
               optimized: bool = True) -> np.ndarray:
    s = session(model, optimized)
    return np.concatenate([s.run(["logits"], feed)[0] for feed in samples])


def initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def test_qdq_model_is_valid_and_close_to_the_float_one_in_onnxruntime(
        model: onnx.ModelProto, quantized: tuple[str, QuantizeResult]) -> None:
    method, result = quantized
    onnx.checker.check_model(result.model, full_check=True)
    ops = [n.op_type for n in result.model.graph.node]
    assert ops.count("QuantizeLinear") == 4  # x, r1, f, r3: the inputs of the four ops
    assert ops.count("DequantizeLinear") == 4 + 4 + 3  # those, four weights, three biases
    reference, ours = ort_logits(model, EVALUATION), ort_logits(result.model, EVALUATION)
    relative = np.abs(ours - reference).max() / np.abs(reference).max()
    agreement = np.mean(ours.argmax(1) == reference.argmax(1))
    most_error, least_agreement = LIMITS[method]
    assert 0 < relative <= most_error, (method, relative)  # 0: nothing was quantized
    assert agreement >= least_agreement, (method, agreement)


def test_weights_are_int8_per_output_channel_and_biases_int32(
        quantized: tuple[str, QuantizeResult]) -> None:
    _, result = quantized
    init = initializers(result.model)
    # no float copy of a quantized weight or bias is left; the Add's float bias stays
    assert not {"w1", "w2", "w3", "w4", "b1", "b2", "b4"} & set(init)
    assert init["b3"].dtype == np.float32
    original = initializers(classifier())
    dq = {n.input[0]: n for n in result.model.graph.node if n.op_type == "DequantizeLinear"}
    # (weight, channel axis): Conv [M, C, k, k] axis 0, MatMul [K, N] axis 1, Gemm
    # transB=1 [N, K] axis 0
    for name, axis in [("w1", 0), ("w2", 0), ("w3", 1), ("w4", 0)]:
        q, scale = init[f"{name}_quantized"], init[f"{name}_scale"]
        w = original[name]
        assert q.dtype == np.int8 and q.shape == w.shape
        assert scale.shape == (w.shape[axis],)
        node = dq[f"{name}_quantized"]
        assert onnx.helper.get_node_attr_value(node, "axis") == axis
        assert np.abs(q).max() == 127  # symmetric: each channel's peak maps to 127
        shape = [-1 if d == axis else 1 for d in range(w.ndim)]
        half_step = scale.reshape(shape) / 2 * 1.001
        assert np.all(np.abs(q * scale.reshape(shape) - w) <= half_step)
    for bias, weight, x in [("b1", "w1", "x"), ("b2", "w2", "r1"), ("b4", "w4", "r3")]:
        assert init[f"{bias}_quantized"].dtype == np.int32
        expected = init[f"{x}_scale"] * init[f"{weight}_scale"]
        np.testing.assert_allclose(init[f"{bias}_scale"], expected, rtol=1e-6)
    assert init["x_zero_point"].dtype == np.uint8 and init["x_scale"].dtype == np.float32


def test_tensorsmith_runs_the_qdq_model_as_onnxruntime_does(
        quantized: tuple[str, QuantizeResult]) -> None:
    _, result = quantized
    samples = EVALUATION[:16]
    with CompiledModel(result.model, {"x": (1, 3, 16, 16)}) as compiled:
        ours = np.concatenate([compiled.run(feed)["logits"] for feed in samples])
    # ONNX Runtime without graph optimizations computes each QDQ pair as the standard
    # defines it, in float: tensorsmith does the same, up to float rounding
    plain = ort_logits(result.model, samples, optimized=False)
    assert np.abs(ours - plain).max() <= 1e-5 * np.abs(plain).max() + 1e-6
    # optimized, it fuses the pairs into integer kernels that round differently: the
    # difference stays within a few steps of the last activation's scale
    fused = ort_logits(result.model, samples)
    step = float(initializers(result.model)["r3_scale"])
    assert np.abs(ours - fused).max() <= 8 * step
    assert np.mean(ours.argmax(1) == fused.argmax(1)) >= 0.9


def test_report_compares_float_and_quantized_outputs(
        quantized: tuple[str, QuantizeResult]) -> None:
    method, result = quantized
    report = result.report
    assert report is not None and report.samples == len(EVALUATION)
    logits, probs = report.outputs
    assert (logits.name, probs.name) == ("logits", "probs")
    assert logits.rows == len(EVALUATION) and logits.top1_agreement >= LIMITS[method][1]
    assert 0 < logits.relative_error <= LIMITS[method][0]
    assert 0 < logits.mean_abs_error < logits.max_abs_error
    assert set(result.counts()) == {"Conv", "MatMul", "Gemm"} and not result.skipped


def test_int8_activations_and_quantized_outputs(model: onnx.ModelProto) -> None:
    result = quantize(model, CALIBRATION, activation_type="int8", quantize_outputs=True,
                      evaluation=EVALUATION[:16])
    onnx.checker.check_model(result.model, full_check=True)
    init = initializers(result.model)
    zero_points = [t for t in result.model.graph.initializer
                   if t.name.endswith("_zero_point") and not t.dims]
    assert zero_points and all(t.data_type == TensorProto.INT8 for t in zero_points)
    # every compute op's output is quantized for its consumers; the graph output
    # 'logits' stays the Gemm's own float result, and Softmax reads the quantized one
    assert {"c1_scale", "c2_scale", "m_scale", "logits_scale"} <= set(init)
    producers = {o: n for n in result.model.graph.node for o in n.output}
    assert producers["logits"].op_type == "Gemm"
    softmax = next(n for n in result.model.graph.node if n.op_type == "Softmax")
    assert list(softmax.input) == ["logits_dequantized"]
    reference, ours = ort_logits(model, EVALUATION), ort_logits(result.model, EVALUATION)
    assert np.abs(ours - reference).max() <= 0.08 * np.abs(reference).max()
    assert result.report is not None and result.report.outputs[0].top1_agreement >= 0.9


def test_samples_with_the_batch_axis_as_sample_axis(model: onnx.ModelProto) -> None:
    """[S, 3, H, W] for a [1, 3, H, W] input: S samples of one."""
    arrays = {"x": np.concatenate([f["x"] for f in CALIBRATION[:4]])}
    result = quantize(model, arrays, evaluate_accuracy=False)
    assert result.report is None and len(result.quantized_nodes) == 4
    assert result.ranges["x"][0] == pytest.approx(min(f["x"].min() for f in CALIBRATION[:4]))


@pytest.mark.parametrize(("calibration", "message"), [
    ({"y": np.zeros((2, 1, 3, 16, 16), np.float32)}, "lacks the model input(s) 'x'"),
    ({"x": np.zeros((2, 1, 3, 8, 16), np.float32)}, "the model expects [1, 3, 16, 16]"),
    ({"x": np.zeros((2, 3, 16), np.float32)}, "expected [samples, 1, 3, 16, 16]"),
    ({"x": np.zeros((2, 1, 3, 16, 16), np.complex64)}, "'x' is complex64"),
    ([], "holds no samples"),
])  # fmt: skip
def test_bad_calibration_data_is_a_clear_error(model: onnx.ModelProto, calibration: object,
                                               message: str) -> None:
    with pytest.raises(QuantizeError) as error:
        quantize(model, calibration)  # type: ignore[arg-type]
    assert message in str(error.value)


def test_unknown_method_and_activation_type_are_clear_errors(model: onnx.ModelProto) -> None:
    with pytest.raises(QuantizeError, match="unknown calibration method 'kl'"):
        quantize(model, CALIBRATION, method="kl")
    with pytest.raises(QuantizeError, match="unknown activation type 'int4'"):
        quantize(model, CALIBRATION, activation_type="int4")
    with pytest.raises(QuantizeError, match="percentile must be in"):
        quantize(model, CALIBRATION, method="percentile", percentile=120)
    assert CLASSES == 10
