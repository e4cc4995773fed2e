"""Integer dot products on Vulkan (``vulkan -integer-dot-product=1``): the integer ops'
four-byte dots become one ``OpSUDot`` on packed words, the modules pass spirv-val, list
the shaderIntegerDotProduct feature, and compute the reference's int32 sums exactly on
lavapipe (which has the feature), extremes included (no saturation). Where the bytes are
not four adjacent ones at a word boundary (an NCHW convolution's channels) the plain
form stays, and so it does without the option."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight

pytestmark = pytest.mark.vulkan

DOT = "vulkan -integer-dot-product=1"
SUDOT = "OpSUDot %int"


def matmul_graph(w: np.ndarray) -> Graph:
    b = GraphBuilder()
    a = b.input("a", (6, w.shape[0]), "uint8")
    return b.finish([b.add1("qmatmul", [a, b.constant("w", pack_matmul_weight(w))],
                            name="q")])


def conv_graph(w: np.ndarray) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, w.shape[1], 6, 6), "uint8")
    return b.finish([b.add1("qconv2d", [x, b.constant("w", pack_conv_weight(w))],
                            {"pads": [1, 1, 1, 1], "zero_point": 7}, name="c")])


def _run(graph: Graph, target: str, feeds: dict[str, np.ndarray], tmp_path: Path
         ) -> np.ndarray:
    path = tmp_path / "model.vulkan.tsm"
    build(graph, target=target).export_library(path)
    with rt.load(path, device="vulkan") as module:
        return module.run(feeds)[0]


def test_dots_are_packed_and_valid(rng: np.random.Generator) -> None:
    w = rng.integers(-128, 128, (32, 16)).astype("int8")
    packed = build(matmul_graph(w), target=DOT).kernels
    plain = build(matmul_graph(w), target="vulkan").kernels
    text = packed.source()
    assert SUDOT in text and "PackedVectorFormat4x8Bit" in text
    assert "OpCapability DotProductInput4x8BitPacked" in text
    assert 'OpExtension "SPV_KHR_integer_dot_product"' in text
    # a packed dot on two word loads in place of each four byte products, whose eight
    # byte loads are widened to int32 (S/UConvert) in the plain kernel
    assert text.count("OpLoad %uint") == 2 * text.count(SUDOT)
    assert "OpSConvert" not in text and "OpUConvert" not in text
    assert plain.source().count("OpSConvert") == 4 * text.count(SUDOT)
    assert "shaderIntegerDotProduct" in packed.features()
    packed.validate()
    assert SUDOT not in plain.source() and "shaderIntegerDotProduct" not in plain.features()


@pytest.mark.parametrize("fill", ["random", "extremes"])
def test_packed_dots_are_exact(fill: str, rng: np.random.Generator, tmp_path: Path) -> None:
    """Random bytes, and 255 x -128 everywhere: 32 such products sum to -1044480, which
    a saturating or 16-bit intermediate would get wrong."""
    if fill == "random":
        w = rng.integers(-128, 128, (32, 16)).astype("int8")
        a = rng.integers(0, 256, (6, 32)).astype("uint8")
    else:
        w = np.full((32, 16), -128, "int8")
        a = np.full((6, 32), 255, "uint8")
    graph = matmul_graph(w)
    want = run_graph(graph, {"a": a})[0]
    np.testing.assert_array_equal(_run(graph, DOT, {"a": a}, tmp_path), want)
    if fill == "extremes":
        assert (want == 32 * 255 * -128).all()


def test_unpackable_dots_keep_the_plain_form(rng: np.random.Generator,
                                             tmp_path: Path) -> None:
    """An NCHW convolution's four channels are a plane apart: no word holds them, so the
    option changes nothing there and the result is still the reference's."""
    w = rng.integers(-128, 128, (8, 8, 3, 3)).astype("int8")
    x = rng.integers(0, 256, (1, 8, 6, 6)).astype("uint8")
    graph = conv_graph(w)
    assert SUDOT not in build(graph, target=DOT).kernels.source()
    np.testing.assert_array_equal(_run(graph, DOT, {"x": x}, tmp_path),
                                  run_graph(graph, {"x": x})[0])


def test_the_device_probe_reports_the_feature() -> None:
    """Each device says whether it has the feature; the target string for one that has it
    asks for packed dots, and for one without it does not."""
    from tensorsmith.runtime.vulkan.instance import physical_devices
    from tensorsmith.runtime.vulkan.probe import describe, target_string

    for index, dev in enumerate(physical_devices()):
        facts = describe(dev, index)
        has = facts["features"]["shaderIntegerDotProduct"]
        assert ("-integer-dot-product=1" in facts["target"]) == has, facts
        without = replace(dev, features={**dev.features, "shaderIntegerDotProduct": False})
        assert "-integer-dot-product" not in target_string(without)
        with_it = replace(dev, features={**dev.features, "shaderIntegerDotProduct": True})
        assert target_string(with_it).endswith(" -integer-dot-product=1")
