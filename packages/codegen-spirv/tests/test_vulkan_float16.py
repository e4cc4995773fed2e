"""float16 arithmetic on Vulkan (``vulkan -float16-arithmetic=1``): float16 values are
computed in float16 instead of each being widened to float32, what the graph computes in
float32 stays float32, and results match the reference interpreter (NumPy's float16)
on lavapipe, which has shaderFloat16."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, build, run_graph

pytestmark = pytest.mark.vulkan

FLOAT16 = "vulkan -float16-arithmetic=1"


def elementwise_graph() -> object:
    b = GraphBuilder()
    x = b.input("x", (8, 96), "float16")
    y = b.input("y", (8, 96), "float16")
    h = b.add1("sigmoid", [b.add1("add", [b.add1("mul", [x, y], name="m"), x], name="a")],
               name="s")
    return b.finish([b.add1("softmax", [h], {"axis": -1}, name="sm"),
                     b.add1("tanh", [b.add1("sub", [x, y], name="d")], name="t"),
                     b.add1("reduce_max", [x], {"axes": [1], "keepdims": 1}, name="r")])


def test_float16_values_are_computed_in_float16() -> None:
    plain = build(elementwise_graph(), target="vulkan").kernels
    native = build(elementwise_graph(), target=FLOAT16).kernels
    plain_text, native_text = plain.source(), native.source()
    assert "OpFAdd %half" not in plain_text and "OpFMul %half" not in plain_text
    assert "OpFAdd %half" in native_text and "OpFMul %half" in native_text
    # no widening of each loaded value: far fewer conversions than the plain kernels
    assert native_text.count("OpFConvert") < plain_text.count("OpFConvert") // 2
    assert "shaderFloat16" in native.features() and "shaderFloat16" not in plain.features()
    native.validate()


def test_float16_results_match_the_reference(tmp_path: Path,
                                              rng: np.random.Generator) -> None:
    graph = elementwise_graph()
    inputs = {k: rng.standard_normal((8, 96)).astype("float16") for k in ("x", "y")}
    lib = build(graph, target=FLOAT16)
    lib.kernels.validate()
    path = tmp_path / "f16.tsm"
    lib.export_library(path)
    import tensorsmith.runtime as rt

    got = rt.load(path, device="vulkan").run(inputs)
    for g, w in zip(got, run_graph(graph, inputs)):
        assert g.dtype == w.dtype == np.float16
        # a float16 result within 2 ulps of NumPy's float16 one
        np.testing.assert_allclose(g.astype("float32"), w.astype("float32"), rtol=2e-3,
                                   atol=1e-3)


def test_float32_accumulation_stays_float32(tmp_path: Path,
                                            rng: np.random.Generator) -> None:
    """A float16 matmul sums in float32 (the graph casts to float32): its kernel
    multiplies and adds in float32, converting its float16 inputs and its result."""
    b = GraphBuilder()
    x = b.input("x", (64, 48), "float16")
    y = b.input("y", (48, 40), "float16")
    graph = b.finish([b.add1("matmul", [x, y], name="mm")])
    lib = build(graph, target=FLOAT16)
    text = lib.kernels.source()
    assert "OpFMul %float" in text and "OpFMul %half" not in text
    lib.kernels.validate()
    lib.export_library(tmp_path / "mm.tsm")
    import tensorsmith.runtime as rt

    inputs = {"x": rng.standard_normal((64, 48)).astype("float16"),
              "y": rng.standard_normal((48, 40)).astype("float16")}
    (got,) = rt.load(tmp_path / "mm.tsm", device="vulkan").run(inputs)
    want = inputs["x"].astype("float32") @ inputs["y"].astype("float32")
    np.testing.assert_allclose(got.astype("float32"), want, rtol=2e-3, atol=2e-3)
