"""The example MLP (examples/mlp.onnx) on the Vulkan device against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spirv_testing import REPO, compile_vulkan

pytestmark = pytest.mark.vulkan

EXAMPLE = REPO / "examples" / "mlp.onnx"


@pytest.mark.parametrize("batch", [1, 3])
def test_example_mlp_matches_onnxruntime(batch: int, tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    frontend = pytest.importorskip("tensorsmith.frontend.onnx")
    model = onnx.load(EXAMPLE)
    graph, params = frontend.from_onnx(model, shape={"input": (batch, 784)})
    _, module = compile_vulkan(graph, tmp_path, params=params)
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype("float32")
    got = module.run({"input": x})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"input": x})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.abs(g - w).max() <= 1e-4
