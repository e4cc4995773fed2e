"""Integer dot products on Vulkan (``vulkan -integer-dot-product=1``): the integer ops'
four-byte dots become one ``OpSUDot`` on packed words, the modules pass spirv-val, list
the shaderIntegerDotProduct feature, and compute the reference's int32 sums exactly on
lavapipe (which has the feature), extremes included (no saturation). Where one operand's
bytes are not four adjacent ones at a word boundary (an NCHW convolution's padded
channels) its word is assembled from the four values; without the option the plain form
stays."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.spirv import codegen
from tensorsmith.ir import GraphBuilder, Target, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight
from tensorsmith.ir.te.expr import Binary, Cast, Expr, Load, Var, binary
from tensorsmith.ir.te.stmt import Buffer, For, PrimFunc, Store

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


@pytest.mark.parametrize("fill", ["random", "extremes"])
def test_assembled_words_are_exact(fill: str, rng: np.random.Generator,
                                   tmp_path: Path) -> None:
    """An NCHW convolution's four channels are a plane apart and padded (with the zero
    point 7): the activation's word is assembled, the weight's loaded, and the sums are
    the reference's, the padding's and -128's included."""
    w = (rng.integers(-128, 128, (8, 8, 3, 3)) if fill == "random"
         else np.full((8, 8, 3, 3), -128)).astype("int8")
    x = (rng.integers(0, 256, (1, 8, 6, 6)) if fill == "random"
         else np.full((1, 8, 6, 6), 255)).astype("uint8")
    graph = conv_graph(w)
    kernels = build(graph, target=DOT).kernels
    text = kernels.source()
    assert SUDOT in text and "OpShiftLeftLogical" in text and "OpBitwiseOr" in text
    kernels.validate()
    np.testing.assert_array_equal(_run(graph, DOT, {"x": x}, tmp_path),
                                  run_graph(graph, {"x": x})[0])


def _strided_dots(w_stride: int) -> PrimFunc:
    """``out[i] = sum_j int32(x[8i + 2j]) * int32(w[4i + w_stride * j])``, one output per
    invocation: the activation bytes never adjacent, the weight's adjacent at stride 1."""
    x, w = Buffer("x", (64,), "uint8"), Buffer("w", (64,), "int8")
    out = Buffer("out", (8,), "int32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 8 + tx
    total: Expr | None = None
    for j in range(4):
        term = binary("mul", Cast(Load(x, (i * 8 + 2 * j,), "uint8"), "int32"),
                      Cast(Load(w, (i * 4 + w_stride * j,), "int8"), "int32"))
        total = term if total is None else Binary("add", total, term, "int32")
    assert total is not None
    body = For(bx, 1, "blockIdx.x", For(tx, 8, "threadIdx.x", Store(out, i, total)))
    return PrimFunc("strided", [x, w, out], body, 2, 1)


def test_a_dot_of_two_assembled_words_keeps_the_plain_form() -> None:
    """With one operand's bytes a word, the other's word is assembled; with neither, the
    dot stays as it is written (assembling both costs about what packing saves)."""
    one = codegen([_strided_dots(1)], Target.parse(DOT))
    assert SUDOT in one.source() and "shaderIntegerDotProduct" in one.features()
    one.validate()
    neither = codegen([_strided_dots(2)], Target.parse(DOT)).source()
    assert SUDOT not in neither and neither.count("OpIMul %int") >= 4


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
