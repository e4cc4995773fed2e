"""Data movement and shape computation: Reshape, Flatten, Transpose, (Un)Squeeze, Concat,
Split, Slice, Gather, Expand, Tile, Pad, Shape/Size, constants, and the shape subgraphs
exporters emit for dynamic axes (which fold to constants at import)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, one_node, rand
from onnx import TensorProto, helper, numpy_helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError

I64 = np.int64
BIG = np.iinfo(np.int64).max


@pytest.mark.parametrize("target,allowzero,opset", [
    ([4, 6], 0, 13), ([-1], 0, 13), ([0, -1], 0, 13), ([2, 0, 2, 2], 0, 14),
    ([3, -1, 2], 0, 14), ([2, 3, 4], 1, 14), ([24, 1], 0, 7)])
def test_reshape(target: list[int], allowzero: int, opset: int) -> None:
    attrs = {"allowzero": allowzero} if opset >= 14 else {}
    m = one_node("Reshape", {"x": ("float32", [2, 3, 4])}, ["y"],
                 {"s": np.array(target, I64)}, opset=opset, **attrs)
    check(m, {"x": rand(2, 3, 4)})


def test_reshape_allowzero_empty() -> None:
    m = one_node("Reshape", {"x": ("float32", [0, 3])}, ["y"], {"s": np.array([3, 0], I64)},
                 opset=14, allowzero=1)
    check(m, {"x": np.zeros((0, 3), np.float32)})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis: int) -> None:
    m = one_node("Flatten", {"x": ("float32", [2, 3, 4])}, ["y"], axis=axis) if axis != 1 else \
        one_node("Flatten", {"x": ("float32", [2, 3, 4])}, ["y"])
    check(m, {"x": rand(2, 3, 4)})


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1], [0, 1, 2]])
def test_transpose(perm: list[int] | None) -> None:
    attrs = {} if perm is None else {"perm": perm}
    check(one_node("Transpose", {"x": ("float32", [2, 3, 4])}, ["y"], **attrs),
          {"x": rand(2, 3, 4)})


@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 3]])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(axes: list[int] | None, opset: int) -> None:
    if opset >= 13 and axes is not None:
        m = one_node("Squeeze", {"x": ("float32", [1, 3, 2, 1])}, ["y"],
                     {"axes": np.array(axes, I64)}, opset=opset)
    else:
        attrs = {} if axes is None else {"axes": axes}
        m = one_node("Squeeze", {"x": ("float32", [1, 3, 2, 1])}, ["y"], opset=opset, **attrs)
    check(m, {"x": rand(1, 3, 2, 1)})


def test_squeeze_non_unit_axis() -> None:
    m = one_node("Squeeze", {"x": ("float32", [1, 3])}, ["y"], {"axes": np.array([1], I64)})
    with pytest.raises(ModelError, match="cannot squeeze axis 1 of shape \\[1, 3\\]"):
        from_onnx(m)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1]])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(axes: list[int], opset: int) -> None:
    if opset >= 13:
        m = one_node("Unsqueeze", {"x": ("float32", [3, 2])}, ["y"],
                     {"axes": np.array(axes, I64)}, opset=opset)
    else:
        m = one_node("Unsqueeze", {"x": ("float32", [3, 2])}, ["y"], opset=opset, axes=axes)
    check(m, {"x": rand(3, 2)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis: int) -> None:
    shapes = {0: ([2, 3], [1, 3], [4, 3]), 1: ([2, 3], [2, 1], [2, 2]),
              -1: ([2, 3], [2, 1], [2, 2])}[axis]
    inputs = {"a": ("float32", shapes[0]), "b": ("float32", shapes[1])}
    m = one_node("Concat", inputs, ["y"], {"c": rand(*shapes[2], seed=3)}, axis=axis)
    check(m, {"a": rand(*shapes[0]), "b": rand(*shapes[1], seed=1)})


def test_concat_with_empty_and_single() -> None:
    nodes = [helper.make_node("Concat", ["a", "e", "b"], ["y"], axis=0),
             helper.make_node("Concat", ["a"], ["z"], axis=0)]
    m = make_model(nodes, {"a": ("float32", [2, 3]), "e": ("float32", [0, 3]),
                           "b": ("float32", [1, 3])}, ["y", "z"])
    check(m, {"a": rand(2, 3), "e": np.zeros((0, 3), np.float32), "b": rand(1, 3, seed=1)})


@pytest.mark.parametrize("opset,split,n", [(11, None, 3), (11, [1, 4, 1], 3),
                                           (13, [2, 4], 2), (13, None, 2), (18, None, 4)])
def test_split(opset: int, split: list[int] | None, n: int) -> None:
    outs = [f"y{i}" for i in range(n)]
    attrs: dict[str, object] = {"axis": 1}
    inputs = ["x"]
    inits = {}
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        inputs.append("split")
        inits["split"] = np.array(split, I64)
    if opset >= 18:
        attrs["num_outputs"] = n
    node = helper.make_node("Split", inputs, outs, name="s", **attrs)
    m = make_model([node], {"x": ("float32", [2, 6, 3])}, outs, inits, opset=opset)
    graph = check(m, {"x": rand(2, 6, 3)})
    if opset >= 18:  # 6 into 4: chunks of 2, 2, 2, 0
        assert [v.shape[1] for v in graph.outputs] == [2, 2, 2, 0]


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [1], None), ([0, 1], [-1, BIG], None, None), ([-3], [-1], [-1], None),
    ([3], [0], [1], [-1]), ([BIG], [-BIG], [2], [-1]), ([-1], [-BIG], [0], [-2]),
    ([0, 0], [10, 10], [2, 1], [2, 3]), ([5], [1], [1], [1]), ([1], [100], [-2], [2]),
])
def test_slice(starts: list[int], ends: list[int], axes: list[int] | None,
               steps: list[int] | None) -> None:
    inits = {"starts": np.array(starts, I64), "ends": np.array(ends, I64)}
    if axes is not None:
        inits["axes"] = np.array(axes, I64)
    if steps is not None:
        if axes is None:
            inits["axes"] = np.arange(len(starts), dtype=I64)
        inits["steps"] = np.array(steps, I64)
    m = one_node("Slice", {"x": ("float32", [3, 4, 5])}, ["y"], inits)
    check(m, {"x": rand(3, 4, 5)})


def test_slice_opset9_attributes() -> None:
    m = one_node("Slice", {"x": ("float32", [3, 4])}, ["y"], opset=9, starts=[1, -3],
                 ends=[1000, -1], axes=[0, 1])
    check(m, {"x": rand(3, 4)})


@pytest.mark.parametrize("indices", [1, -1, [0, 2, 2], [[0, 1], [-1, 0]]])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_constant_indices(indices: object, axis: int) -> None:
    m = one_node("Gather", {"x": ("float32", [3, 3, 2])}, ["y"],
                 {"i": np.array(indices, I64)}, axis=axis)
    check(m, {"x": rand(3, 3, 2)})


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_gather_embedding_lookup(dtype: str) -> None:
    """A weight gathered by token ids known at run time (BERT's embeddings)."""
    node = helper.make_node("Gather", ["W", "ids"], ["y"], name="embed")
    m = make_model([node], {"ids": (dtype, [2, 3])}, ["y"], {"W": rand(10, 4)})
    check(m, {"ids": np.array([[0, 9, 3], [-1, 2, 2]], dtype)})


def test_gather_out_of_range_constant() -> None:
    m = one_node("Gather", {"x": ("float32", [3, 2])}, ["y"], {"i": np.array([3], I64)})
    with pytest.raises(ModelError, match=r"indices \[3\] are out of range for axis 0 of size 3"):
        from_onnx(m)


@pytest.mark.parametrize("shape,target", [([3, 1], [2, 3, 4]), ([1, 4], [3, 1]),
                                          ([2, 3], [2, 3]), ([3], [2, 1, 1])])
def test_expand(shape: list[int], target: list[int]) -> None:
    m = one_node("Expand", {"x": ("float32", shape)}, ["y"], {"s": np.array(target, I64)})
    check(m, {"x": rand(*shape)})


@pytest.mark.parametrize("repeats", [[2, 1], [1, 3], [2, 3], [1, 1]])
def test_tile(repeats: list[int]) -> None:
    m = one_node("Tile", {"x": ("float32", [2, 3])}, ["y"], {"r": np.array(repeats, I64)})
    check(m, {"x": rand(2, 3)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 1, 0, 2], [1, 0, 2, 1], [0, 0, 0, 0], [1, -1, 0, 2]])
def test_pad(mode: str, pads: list[int]) -> None:
    m = one_node("Pad", {"x": ("float32", [3, 4])}, ["y"],
                 {"pads": np.array(pads, I64), "v": np.float32(1.5)}, mode=mode)
    check(m, {"x": rand(3, 4)})


def test_pad_opset18_axes_and_opset19_wrap() -> None:
    nodes = [helper.make_node("Pad", ["x", "pads", "", "axes"], ["a"], mode="constant"),
             helper.make_node("Pad", ["x", "pads", "", "axes"], ["b"], mode="wrap")]
    m = make_model(nodes, {"x": ("float32", [2, 3, 4])}, ["a", "b"],
                   {"pads": np.array([2, 1, 3, 5], I64), "axes": np.array([-1, 1], I64)},
                   opset=19)
    check(m, {"x": rand(2, 3, 4)})


def test_pad_opset7_attributes() -> None:
    m = one_node("Pad", {"x": ("float32", [2, 3])}, ["y"], opset=7, pads=[1, 0, 0, 2],
                 value=-1.0)
    check(m, {"x": rand(2, 3)})


def test_pad_int() -> None:
    m = one_node("Pad", {"x": ("int64", [2, 3])}, {"y": "int64"},
                 {"pads": np.array([1, 1, 1, 1], I64), "v": np.int64(7)})
    check(m, {"x": rand(2, 3, dtype="int64")})


@pytest.mark.parametrize("opset,attrs", [(13, {}), (15, {"start": 1}), (15, {"end": -1}),
                                         (15, {"start": -2, "end": 10})])
def test_shape(opset: int, attrs: dict[str, int]) -> None:
    m = one_node("Shape", {"x": ("float32", [2, 3, 4])}, {"y": "int64"}, opset=opset, **attrs)
    check(m, {"x": rand(2, 3, 4)})


def test_size() -> None:
    check(one_node("Size", {"x": ("float32", [2, 3, 4])}, {"y": "int64"}), {"x": rand(2, 3, 4)})


def test_dynamic_batch_reshape_chain() -> None:
    """torch's Shape -> Gather -> Unsqueeze -> Concat -> Reshape for x.view(x.size(0), -1),
    plus ConstantOfShape/Range/Expand as emitted for position ids."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Gather", ["shp", "two"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["pos1"]),
        helper.make_node("Expand", ["pos1", "bs"], ["pos2"]),
        helper.make_node("Slice", ["shp", "ax0", "one_1d"], ["b1d"]),
        helper.make_node("Concat", ["b1d", "seq1"], ["bs"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "ax0"], ["seq1"]),
        helper.make_node("ConstantOfShape", ["bs"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], I64))),
        helper.make_node("Mul", ["pos2", "ones"], ["ids"]),
        helper.make_node("Div", ["seq", "two"], ["half"]),
        helper.make_node("Cast", ["half"], ["halff"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["flat", "halff"], ["y"]),
    ]
    # topological order: seq1 and bs are used after they are produced
    order = [0, 1, 2, 3, 4, 5, 6, 7, 11, 9, 10, 8, 12, 13, 14, 15, 16]
    m = make_model([nodes[i] for i in order], {"x": ("float32", ["N", 3, 4])},
                   {"y": "float32", "ids": "int64"},
                   {"zero": np.array(0, I64), "two": np.array(2, I64), "one": np.array(1, I64),
                    "ax0": np.array([0], I64), "minus1": np.array([-1], I64),
                    "one_1d": np.array([1], I64)}, opset=13)
    graph = check(m, {"x": rand(5, 3, 4)}, shape={"x": (5, 3, 4)})
    assert [n.op for n in graph.nodes] == ["reshape", "mul"]  # everything else folded
    assert graph.outputs[1].is_constant and graph.outputs[1].name == "ids"


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode: str) -> None:
    m = one_node("DepthToSpace", {"x": ("float32", [1, 8, 2, 3])}, ["y"], blocksize=2,
                 mode=mode)
    check(m, {"x": rand(1, 8, 2, 3)})


def test_space_to_depth() -> None:
    m = one_node("SpaceToDepth", {"x": ("float32", [1, 2, 4, 6])}, ["y"], blocksize=2)
    check(m, {"x": rand(1, 2, 4, 6)})


@pytest.mark.parametrize("attr,value", [("value", numpy_helper.from_array(
    np.arange(6, dtype=np.float32).reshape(2, 3))), ("value_float", 2.5),
    ("value_floats", [1.0, 2.0, 3.0]), ("value_int", 3), ("value_ints", [1, 2, 3])])
def test_constant(attr: str, value: object) -> None:
    dtype = "int64" if "int" in attr else "float32"
    nodes = [helper.make_node("Constant", [], ["c"], **{attr: value}),
             helper.make_node("Add", ["x", "c"], ["y"])]
    shape = [2, 3] if attr == "value" else [3] if attr.endswith("s") else []
    m = make_model(nodes, {"x": (dtype, shape)}, {"y": dtype})
    check(m, {"x": rand(*shape, dtype=dtype)})


def test_constant_as_graph_output() -> None:
    node = helper.make_node("Constant", [], ["c"], value_ints=[4, 5])
    m = make_model([node], {}, {"c": "int64"})
    graph = check(m, {})
    assert graph.outputs[0].name == "c"


def test_range_float_and_nonzero() -> None:
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"]),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Add", ["x", "r"], ["y"])]
    m = make_model(nodes, {"x": ("float32", [4])}, {"y": "float32", "nz": "int64"},
                   {"s": np.float32(1), "l": np.float32(3), "d": np.float32(0.5),
                    "mask": np.array([[1, 0], [0, 3]], np.int64)})
    check(m, {"x": rand(4)})


@pytest.mark.parametrize("upper,k", [(1, None), (0, None), (1, 1), (0, -1)])
def test_trilu(upper: int, k: int | None) -> None:
    inits = {} if k is None else {"k": np.array(k, I64)}
    m = one_node("Trilu", {"x": ("float32", [2, 3, 4])}, ["y"], inits, upper=upper)
    check(m, {"x": rand(2, 3, 4)})


def test_identity_outputs_are_named() -> None:
    """A graph output that is a renamed input or another output gets a copy of its name."""
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["b"])]
    m = make_model(nodes, {"x": ("float32", [3])}, ["a", "r", "b"])
    graph = check(m, {"x": rand(3)})
    assert [v.name for v in graph.outputs] == ["a", "r", "b"]
    assert graph.inputs[0].name == "x"


def test_input_returned_as_output() -> None:
    m = make_model([helper.make_node("Relu", ["x"], ["r"])], {"x": ("float32", [3])},
                   ["x", "r"])
    graph = check(m, {"x": rand(3)})
    assert graph.outputs[0] is graph.inputs[0]


@pytest.mark.parametrize("k,dtype", [(0, None), (1, TensorProto.INT64), (-2, None)])
def test_eye_like(k: int, dtype: int | None) -> None:
    attrs = {"k": k} | ({} if dtype is None else {"dtype": dtype})
    m = one_node("EyeLike", {"x": ("float32", [3, 4])},
                 {"y": "int64" if dtype else "float32"}, **attrs)
    check(m, {"x": rand(3, 4)})


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("runtime_values", [False, True])
def test_one_hot(axis: int, runtime_values: bool) -> None:
    inputs = {"i": ("int64", [2, 3])}
    inits = {"depth": np.array(4, I64)}
    values = np.array([-1.0, 3.0], np.float32)
    if runtime_values:
        inputs["v"] = ("float32", [2])
    else:
        inits["v"] = values
    node = helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=axis)
    m = make_model([node], inputs, ["y"], inits, opset=11)
    feeds = {"i": np.array([[0, 3, -1], [5, 1, -4]], I64)}
    if runtime_values:
        feeds["v"] = values
    check(m, feeds)
