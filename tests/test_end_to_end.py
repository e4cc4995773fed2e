"""ONNX -> graph IR -> tensor IR -> LLVM -> artifact -> runtime, against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import GraphBuilder, build

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mlp.onnx"


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("batch", [1, 3])
def test_example_mlp_matches_onnxruntime(batch: int, tmp_path: Path) -> None:
    model = onnx.load(EXAMPLE)
    mod, params = from_onnx(model, shape={"input": (batch, 784)})
    lib = build(mod, target="llvm", params=params)
    lib.export_library(tmp_path / "model.so")
    m = rt.load(tmp_path / "model.so", device="cpu")
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype("float32")
    got = m.run({"input": x})
    want = ort_run(model, {"input": x})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.abs(g - w).max() <= 1e-4
    # The stateful interface gives the same answer.
    m.set_input("input", x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), got[0])


def test_artifact_is_one_self_contained_file(tmp_path: Path) -> None:
    mod, params = from_onnx(onnx.load(EXAMPLE), shape={"input": (1, 784)})
    build(mod, target="llvm", params=params).export_library(tmp_path / "model.so")
    assert [p.name for p in tmp_path.iterdir()] == ["model.so"]
    meta = rt.load(tmp_path / "model.so").metadata
    assert meta["inputs"][0]["name"] == "input"
    assert meta["params_bytes"] >= (784 * 256 + 256 * 128 + 128 * 10) * 4
    assert meta["workspace_bytes"] > 0


def test_reloading_a_rewritten_artifact_at_the_same_path(tmp_path: Path) -> None:
    """dlopen returns the library already loaded for a path; a re-exported file must not
    be answered by the old one."""
    path = tmp_path / "m.so"
    for n in (3, 5):
        b = GraphBuilder()
        x = b.input("x", (n,), "float32")
        build(b.finish([b.add1("neg", [x], name="neg")]), "llvm").export_library(path)
        m = rt.load(path)
        np.testing.assert_array_equal(m.run({"x": np.ones(n, "float32")})[0], -np.ones(n))
