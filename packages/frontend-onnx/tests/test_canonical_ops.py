"""The canonical ops the frontend added to the IR (concat, slice, gather, expand, pad):
type inference errors, and computes that agree with the references on edge cases the
ONNX tests do not reach."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import evaluate

from tensorsmith.ir import te
from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.op_registry import TensorType, get_op


def run_both(op: str, arrays: list[np.ndarray], attrs: dict[str, object]) -> np.ndarray:
    """The op's reference result, after checking infer and compute agree with it."""
    opdef = get_op(op)
    types = opdef.infer([TensorType(a.shape, str(a.dtype)) for a in arrays], attrs)
    (want,) = opdef.reference(arrays, attrs)
    assert (want.shape, str(want.dtype)) == (types[0].shape, types[0].dtype)
    holders = [te.placeholder(a.shape, str(a.dtype), f"in{i}") for i, a in enumerate(arrays)]
    (out,) = opdef.compute(holders, attrs, types, "out")
    got = evaluate(out, {h.uid: a for h, a in zip(holders, arrays)})
    np.testing.assert_array_equal(got, want)
    return want


def test_concat_many_and_empty() -> None:
    parts = [np.arange(6).reshape(2, 3), np.zeros((2, 0), np.int64), np.ones((2, 1), np.int64),
             np.full((2, 2), 7)]
    y = run_both("concat", parts, {"axis": -1})
    assert y.shape == (2, 6)


def test_concat_all_empty() -> None:
    y = run_both("concat", [np.zeros((0, 2), np.float32)] * 2, {"axis": 0})
    assert y.shape == (0, 2)


@pytest.mark.parametrize("begin,end,step", [([4], [-1], [-1]), ([4], [0], [-2]),
                                            ([0], [5], [3]), ([2], [2], [1]),
                                            ([0], [0], [-1])])
def test_slice_normalised(begin: list[int], end: list[int], step: list[int]) -> None:
    x = np.arange(5, dtype=np.float32)
    y = run_both("slice", [x], {"begin": begin, "end": end, "step": step})
    assert y.tolist() == list(range(begin[0], end[0], step[0]))


def test_gather_negative_runtime_indices() -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = run_both("gather", [data, np.array([[-1, 0], [2, -4]], np.int32)], {"axis": 1})
    assert y.shape == (3, 2, 2)


def test_gather_scalar_index() -> None:
    y = run_both("gather", [np.arange(6).reshape(3, 2), np.array(-1, np.int64)], {"axis": 0})
    assert y.tolist() == [4, 5]


def test_expand() -> None:
    y = run_both("expand", [np.arange(3, dtype=np.float32).reshape(3, 1)], {"shape": [2, 3, 4]})
    assert y.shape == (2, 3, 4)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_modes(mode: str) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    before, after = ([2, 0], [1, 3]) if mode == "reflect" else ([4, 0], [1, 5])
    y = run_both("pad", [x], {"before": before, "after": after, "mode": mode, "value": -2.0})
    assert y.shape == (3 + before[0] + after[0], 4 + after[1])


def test_pad_empty_input() -> None:
    y = run_both("pad", [np.zeros((0, 2), np.float32)], {"before": [1, 0], "after": [1, 1],
                                                          "value": 3.0})
    assert y.shape == (2, 3) and (y == 3).all()


@pytest.mark.parametrize("op,shapes,attrs,message", [
    ("concat", [(2, 3), (3, 3)], {"axis": 1}, "differ outside axis 1"),
    ("concat", [(2, 3)], {"axis": 2}, "concat axis 2 out of range"),
    ("slice", [(4,)], {"begin": [0], "end": [9], "step": [1]}, "is not normalised"),
    ("slice", [(4,)], {"begin": [0], "end": [2], "step": [0]}, "slice step is 0"),
    ("expand", [(3,)], {"shape": [2, 2]}, "cannot expand"),
    ("pad", [(2, 2)], {"before": [3, 0], "after": [0, 0], "mode": "reflect"},
     "reflect padding 3 on axis 0"),
    ("pad", [(2, 2)], {"before": [-1, 0], "after": [0, 0]}, "must be >= 0"),
])
def test_infer_errors(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, object],
                      message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        get_op(op).infer([TensorType(s, "float32") for s in shapes], attrs)


def test_gather_needs_integer_indices() -> None:
    with pytest.raises(ShapeError, match="indices must be int64 or int32"):
        get_op("gather").infer([TensorType((3,), "float32"), TensorType((2,), "float32")],
                               {"axis": 0})
