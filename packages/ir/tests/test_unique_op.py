"""unique (ops/unique.py): the NumPy reference against ONNX Runtime's Unique (opset 11),
of 1-D inputs (ONNX's Unique without an axis) and of slices along axis 0, sorted and in
order of first occurrence, row for row (the padded rows zero);
its shapes with run-time sizes; the interpreter's counted rows. The kernel is checked on
every target in tests/test_detector.py."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tensorsmith.ir import GraphBuilder, run_graph
from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.op_registry import get_op
from tensorsmith.ir.symbolic import symbol

NAMES = ["y", "indices", "inverse", "counts"]


def _ort_unique(x: np.ndarray, order: int) -> list[np.ndarray]:
    """ONNX Runtime's Unique of ``x``'s slices along axis 0 (of ``x`` 1-D: without axis)."""
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node("Unique", ["x"], NAMES, sorted=order,
                            **({"axis": 0} if x.ndim > 1 else {}))
    outputs = [helper.make_tensor_value_info(n, t, None)
               for n, t in zip(NAMES, [dtype] + [TensorProto.INT64] * 3)]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, x.shape)],
                              outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    return ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})


_RNG = np.random.default_rng(0)
CASES = {
    "ints": _RNG.integers(-4, 5, 21).astype(np.int64),
    "floats": np.round(_RNG.standard_normal(40), 1).astype(np.float32),
    "distinct": _RNG.permutation(12).astype(np.float32),
    "all-equal": np.full(12, 7, np.int64),
    "length-1": np.array([2.5], np.float32),
    "signed-zeros": np.array([-0.0, 1.0, 0.0, -0.0, 2.0, 0.0], np.float32),
    "float64": np.array([3.0, 1.0, 3.0, -2.0], np.float64),
    "int8": np.array([5, -1, 5, 0, -1], np.int8),
    "rows": _RNG.integers(0, 2, (9, 3)).astype(np.float32),
    "slices": _RNG.integers(0, 2, (7, 2, 2)).astype(np.int64),
    "equal-rows": np.tile(np.array([[1.0, -0.0, 2.0]], np.float32), (4, 1)),
    "signed-zero-rows": np.array([[0.0, 1], [-0.0, 1], [0, 0], [-0.0, 0]], np.float32),
}


@pytest.mark.parametrize("order", [1, 0])
@pytest.mark.parametrize("case", CASES)
def test_unique_matches_onnx_runtime(case: str, order: int) -> None:
    x = CASES[case]
    want = _ort_unique(x, order)
    *got, count = get_op("unique").reference([x], {"sorted": order})
    u = int(count)
    assert u == len(want[0])
    for name, g, w in zip(NAMES, got, want):
        assert g.dtype == w.dtype, name
        if name == "inverse":
            np.testing.assert_array_equal(g, w)
            continue
        assert g.shape[0] == len(x) and not g[u:].any(), name
        np.testing.assert_array_equal(g[:u], w)
        np.testing.assert_array_equal(np.signbit(g[:u]), np.signbit(w))  # -0.0 kept


def test_shapes_and_counted_rows() -> None:
    n = symbol("n")
    b = GraphBuilder()
    x = b.input("x", (n, 3), "float32")
    outs = b.add("unique", [x], {"sorted": 0}, "u")
    assert [(v.shape, v.dtype) for v in outs] == [
        ((n, 3), "float32"), ((n,), "int64"), ((n,), "int64"), ((n,), "int64"), ((), "int64")]

    b = GraphBuilder()
    x = b.input("x", (n,), "int64")
    distinct = b.counted_symbol("distinct")
    *outs, total = b.add("unique", [x], {"rows": distinct - 1}, "u")
    b.counted_size(distinct, total, n, "unique")
    y, indices, inverse, counts = run_graph(b.finish(outs), {"x": np.array([3, 1, 3, 3, 2])})
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(indices, [1, 4, 0])
    np.testing.assert_array_equal(inverse, [2, 0, 2, 2, 1])
    np.testing.assert_array_equal(counts, [1, 1, 3])


@pytest.mark.parametrize("shape, attrs, message", [
    ((4,), {"sorted": 2}, "sorted must be 0 or 1"),
    ((), {}, "rank >= 1"),
])
def test_invalid_uses_are_refused(shape: tuple[int, ...], attrs: dict[str, int],
                                  message: str) -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=message):
        b.add("unique", [b.input("x", shape, "float32")], attrs, "u")
