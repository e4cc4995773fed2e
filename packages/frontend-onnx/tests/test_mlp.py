"""The bundled example MLP (examples/mlp.onnx, or the same network built here when the
file is absent) imports, keeps its names and weights, and matches onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import check, make_model, one_node, rand
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mlp.onnx"


def build_mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = {"W1": rng.standard_normal((784, 256)) / 28, "b1": rng.standard_normal(256) / 10,
         "W2": rng.standard_normal((128, 256)) / 16, "b2": rng.standard_normal(128) / 10,
         "W3": rng.standard_normal((128, 10)) / 11, "b3": rng.standard_normal(10) / 10}
    nodes = [
        helper.make_node("MatMul", ["input", "W1"], ["fc1_out"], name="fc1"),
        helper.make_node("Add", ["fc1_out", "b1"], ["add1_out"], name="add1"),
        helper.make_node("Relu", ["add1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("Gemm", ["relu1_out", "W2", "b2"], ["fc2_out"], name="fc2", transB=1),
        helper.make_node("Relu", ["fc2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MatMul", ["relu2_out", "W3"], ["fc3_out"], name="fc3"),
        helper.make_node("Add", ["fc3_out", "b3"], ["add3_out"], name="add3"),
        helper.make_node("Softmax", ["add3_out"], ["output"], name="softmax", axis=-1),
    ]
    return make_model(nodes, {"input": ("float32", ["N", 784])}, ["output"],
                      {k: v.astype(np.float32) for k, v in w.items()})


@pytest.fixture(scope="module", params=["example", "built"])
def mlp(request: pytest.FixtureRequest) -> onnx.ModelProto:
    if request.param == "example":
        if not EXAMPLE.exists():
            pytest.skip("examples/mlp.onnx is not there")
        return onnx.load(str(EXAMPLE))
    return build_mlp()


@pytest.mark.parametrize("batch", [1, 4])
def test_mlp_matches_onnxruntime(mlp: onnx.ModelProto, batch: int) -> None:
    check(mlp, {"input": rand(batch, 784)}, shape={"input": (batch, 784)})


def test_mlp_names_and_params(mlp: onnx.ModelProto) -> None:
    graph, params = from_onnx(mlp, {"input": (2, 784)})
    assert [v.name for v in graph.inputs] == ["input"]
    assert graph.inputs[0].shape == (2, 784) and graph.inputs[0].dtype == "float32"
    assert [v.name for v in graph.outputs] == ["output"]
    assert graph.outputs[0].shape == (2, 10)
    assert set(params) == {"W1", "b1", "W2", "b2", "W3", "b3"}
    held = {c.name: c.data for c in graph.constants()}
    for name in ("W1", "b1", "W2", "b2", "W3", "b3"):
        assert held[name] is params[name]  # the very arrays, not copies
    ops = [n.op for n in graph.nodes]
    assert ops.count("matmul") == 3 and ops[-1] == "softmax"
    assert {n.name for n in graph.nodes} >= {"fc1", "add1", "relu1", "fc2", "softmax"}


def test_mlp_from_path(tmp_path: Path, mlp: onnx.ModelProto) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp, str(path))
    for model in (str(path), path):
        graph, _ = from_onnx(model, {"input": (3, 784)})
        assert graph.outputs[0].shape == (3, 10)


def test_weights_stay_rebindable() -> None:
    """Arithmetic on float initializers is left to the folding pass, which runs after
    build() binds params by name: nothing derived from a weight is baked in at import."""
    m = one_node("Gemm", {"a": ("float32", [2, 3])}, ["y"],
                 {"W": rand(4, 3), "C": rand(4)}, transB=1, alpha=2.0, beta=0.5)
    graph, params = from_onnx(m)
    reads = {v.name for n in graph.nodes for v in n.inputs}
    assert {"W", "C"} <= reads and set(params) == {"W", "C"}
    assert [n.op for n in graph.nodes] == ["transpose", "matmul", "mul", "mul", "add"]
