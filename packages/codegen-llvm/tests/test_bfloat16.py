"""bfloat16 on the llvm target (codegen/llvm/bfloat16.py): stores round to nearest, ties
to even, exactly as ``ml_dtypes`` does; loads widen exactly; arithmetic on bfloat16
tensors runs in float32 and rounds once per stored value. Checked on a vectorized
kernel (many elements) and on a short one (its tail lanes masked)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build, run_graph

BF16 = np.dtype(ml_dtypes.bfloat16)

#: float32 bit patterns whose rounding is easy to get wrong
SPECIAL_BITS = np.array([
    0x3F808000,  # 1 + 2**-8: a tie, rounds down to even (1.0)
    0x3F818000,  # a tie above an odd last bit: rounds up
    0x3F808001,  # just above a tie: up
    0x3F807FFF,  # just below a tie: down
    0x7F7FFFFF,  # the largest float32: rounds to inf, as bfloat16 has no larger finite
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0xFFC00001, 0x7F800001,  # NaNs (the last one's payload is all low bits)
    0x00000001, 0x807FFFFF,  # denormals
    0x80000000, 0x00000000,  # -0.0, 0.0
], dtype=np.uint32)


def _run(graph, feeds: dict[str, np.ndarray], path: Path) -> list[np.ndarray]:  # noqa: ANN001
    artifact = path / "bf16.so"
    build(graph, "llvm").export_library(artifact)
    with rt.load(artifact) as module:
        return module.run(feeds)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def _narrowing(n: int):  # noqa: ANN202
    b = GraphBuilder()
    x = b.input("x", (n,), "float32")
    return b.finish([b.add1("cast", [x], {"dtype": "bfloat16"}, name="narrow")])


@pytest.mark.parametrize("n", [3, 1024])
def test_narrowing_matches_ml_dtypes_bit_for_bit(n: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32) * 100
    x[:min(n, len(SPECIAL_BITS))] = SPECIAL_BITS[:n].view(np.float32)
    (got,) = _run(_narrowing(n), {"x": x}, tmp_path)
    assert got.dtype == BF16
    with np.errstate(invalid="ignore"):  # (NumPy warns of the NaNs it converts)
        want = x.astype(BF16)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


def test_widening_is_exact(tmp_path: Path) -> None:
    bits = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)  # every bfloat16
    b = GraphBuilder()
    x = b.input("x", (bits.size,), "bfloat16")
    g = b.finish([b.add1("cast", [x], {"dtype": "float32"}, name="widen")])
    xs = bits.view(BF16)
    (got,) = _run(g, {"x": xs}, tmp_path)
    want = xs.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_arithmetic_in_float32_rounded_once(tmp_path: Path) -> None:
    """``relu(x * y + 1) * 0.25 - y`` of bfloat16 tensors, one fused kernel: the result
    is the float32 value rounded once (every float32 step here is exact or rounds as
    NumPy's float32 does: bfloat16 products are exact in float32). The NumPy interpreter
    rounds after every op, so it differs, by a few ulps of the terms."""
    rng = np.random.default_rng(5)
    n = 999
    b = GraphBuilder()
    x, y = b.input("x", (n,), "bfloat16"), b.input("y", (n,), "bfloat16")
    one, quarter = (b.constant(k, np.array(v, BF16)) for k, v in (("one", 1), ("q", 0.25)))
    h = b.add1("relu", [b.add1("add", [b.add1("mul", [x, y]), one])])
    g = b.finish([b.add1("sub", [b.add1("mul", [h, quarter]), y])])
    feeds = {"x": rng.standard_normal(n).astype(BF16), "y": rng.standard_normal(n).astype(BF16)}
    (got,) = _run(g, feeds, tmp_path)
    x32, y32 = (feeds[k].astype(np.float32) for k in "xy")
    exact = (np.maximum(x32 * y32 + 1, 0) * np.float32(0.25) - y32).astype(BF16)
    np.testing.assert_array_equal(_bits(got), _bits(exact))
    (interpreted,) = run_graph(g, feeds)
    assert not np.array_equal(_bits(interpreted), _bits(exact))  # (so the claim says something)
    terms = np.maximum(x32 * y32 + 1, 0) * 0.25 + np.abs(y32)
    assert (np.abs(got.astype(np.float32) - interpreted.astype(np.float32))
            <= 3 * 2.0 ** -8 * terms).all()


def test_matmul_accumulates_in_float32(tmp_path: Path) -> None:
    """A 512-term dot product of bfloat16 values: float32 sums, one rounding. A
    bfloat16 accumulator would be off by several percent."""
    rng = np.random.default_rng(6)
    b = GraphBuilder()
    a = b.input("a", (8, 512), "bfloat16")
    w = b.constant("w", rng.standard_normal((512, 16)).astype(BF16))
    g = b.finish([b.add1("matmul", [a, w])])
    feeds = {"a": rng.standard_normal((8, 512)).astype(BF16)}
    (got,) = _run(g, feeds, tmp_path)
    exact = feeds["a"].astype(np.float64) @ w.data.astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact).max() / np.abs(exact).max()
    assert err < 2.0 ** -8
