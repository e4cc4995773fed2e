"""Symbolic dimensions through the importer: inputs keep their dim_params, the shape
arithmetic of exported models folds on symbols, and each imported graph runs, for
several sizes, like onnxruntime runs the model."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import make_model, ort_run
from onnx import helper, numpy_helper

from tensorsmith.frontend.onnx import from_onnx, require_static
from tensorsmith.frontend.onnx.inputs import resolve
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.symbolic import SymbolicDimError, free_symbols, parse_dim, symbol

I64 = onnx.TensorProto.INT64


def runs_like_onnxruntime(graph: Graph, model: onnx.ModelProto,
                          feeds: Sequence[Mapping[str, np.ndarray]], atol: float = 1e-5) -> None:
    """One graph, each set of ``feeds`` (of different sizes): outputs as onnxruntime's."""
    for feed in feeds:
        got = run_graph(graph, feed)
        want = ort_run(model, feed)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=0, atol=atol)


def values(graph: Graph) -> list:
    return [*graph.inputs, *(v for n in graph.nodes for v in n.outputs)]


def ints(name: str, data: Sequence[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(data, np.int64), name)


# -- (a) a CNN with a symbolic batch ------------------------------------------------------

def cnn(batch: int | str = "N") -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "b": rng.standard_normal(4).astype(np.float32),
             "fw": rng.standard_normal((5, 4)).astype(np.float32),
             "fb": rng.standard_normal(5).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)]
    return make_model(nodes, {"x": ("float32", [batch, 3, 8, 8])}, ["y"], inits)


def test_cnn_keeps_the_batch_symbol() -> None:
    graph, _ = from_onnx(cnn())
    text = str(graph)
    assert "%x: float32[N, 3, 8, 8]" in text
    assert "float32[N, 4, 8, 8] = conv2d(%x, %w)" in text
    assert "float32[N, 4, 1, 1] = reduce_mean" in text
    assert re.search(r"%f: float32\[N, 4\] = reshape", text)
    assert re.search(r"%y: float32\[N, 5\] = add", text)
    symbolic = {v.name: v.shape for v in values(graph) if not v.is_static}
    assert {"x", "c", "r", "p", "f", "y"} <= set(symbolic)
    assert all(shape[0] == symbol("N") for shape in symbolic.values())
    rng = np.random.default_rng(1)
    runs_like_onnxruntime(graph, cnn(), [{"x": rng.standard_normal((n, 3, 8, 8), np.float32)}
                                         for n in (1, 3)])


# -- (b) Shape -> Gather -> Unsqueeze -> Concat -> Reshape ----------------------------------

def split_heads() -> onnx.ModelProto:
    """[batch, seq, 64] -> [batch, seq, 4, 16], the target computed from Shape(x)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i0"], ["b"], name="g0", axis=0),
             helper.make_node("Gather", ["s", "i1"], ["q"], name="g1", axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["bu"], name="u0"),
             helper.make_node("Unsqueeze", ["q", "ax"], ["qu"], name="u1"),
             helper.make_node("Concat", ["bu", "qu", "tail"], ["t"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="reshape")]
    inits = {"i0": np.int64(0), "i1": np.int64(1), "ax": np.array([0], np.int64),
             "tail": np.array([4, 16], np.int64)}
    return make_model(nodes, {"x": ("float32", ["batch", "seq", 64])}, ["y"], inits)


def test_reshape_to_a_shape_computed_from_symbols() -> None:
    graph, _ = from_onnx(split_heads())
    assert [n.op for n in graph.nodes] == ["reshape"]
    assert "%y: float32[batch, seq, 4, 16] = reshape(%x)" in str(graph)
    rng = np.random.default_rng(2)
    runs_like_onnxruntime(graph, split_heads(), [
        {"x": rng.standard_normal((b, s, 64), np.float32)} for b, s in ((1, 3), (2, 7))])


# -- the shape computations of exported models, one at a time ------------------------------

def test_shape_arithmetic_folds_on_symbols() -> None:
    """Shape -> Cast -> Mul/Div, Size, Slice of a shape: [2*seq//2 ..] reshapes exactly."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Cast", ["s"], ["sf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Cast", ["sf"], ["si"], to=I64),
             helper.make_node("Slice", ["si", "one", "two"], ["seq"]),
             helper.make_node("Mul", ["seq", "two"], ["seq2"]),
             helper.make_node("Div", ["seq2", "two"], ["seq_again"]),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Div", ["n", "seq_again"], ["rest"]),
             helper.make_node("Concat", ["rest", "seq_again"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="r")]
    m = make_model(nodes, {"x": ("float32", ["batch", "seq", 6])}, ["y"],
                   {"one": np.array([1], np.int64), "two": np.array([2], np.int64)})
    graph, _ = from_onnx(m)
    assert "%y: float32[6*batch, seq] = reshape(%x)" in str(graph)
    rng = np.random.default_rng(3)
    runs_like_onnxruntime(graph, m, [{"x": rng.standard_normal((b, s, 6), np.float32)}
                                     for b, s in ((1, 2), (3, 5))])


def test_expand_constant_of_shape_and_masks_from_shapes() -> None:
    """ConstantOfShape(Shape(x)), Expand(x, Shape(y)), and torch's Equal/Where rewrite of
    -1 in an expand's target."""
    nodes = [helper.make_node("Shape", ["y"], ["sy"]),
             helper.make_node("Expand", ["x", "sy"], ["xe"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("ConstantOfShape", ["sx"], ["ones"],
                              value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("Equal", ["minus", "neg1"], ["is_free"]),
             helper.make_node("Where", ["is_free", "sy", "minus"], ["target"]),
             helper.make_node("Expand", ["ones", "target"], ["oe"]),
             helper.make_node("Add", ["xe", "oe"], ["out"])]
    m = make_model(nodes, {"x": ("float32", [1, "seq"]), "y": ("float32", ["batch", "seq"])},
                   ["out"], {"minus": np.array([-1, -1], np.int64),
                             "neg1": np.array(-1, np.int64)})
    graph, _ = from_onnx(m)
    assert sorted(n.op for n in graph.nodes) == ["add", "expand", "expand", "expand"]
    assert "%out: float32[batch, seq]" in str(graph)
    rng = np.random.default_rng(4)
    runs_like_onnxruntime(graph, m, [
        {"x": rng.standard_normal((1, s), np.float32),
         "y": rng.standard_normal((b, s), np.float32)} for b, s in ((1, 1), (2, 5))])


def test_range_and_slice_bounds_from_shapes() -> None:
    """Range(0, Gather(Shape(x), 1), 1): positions computed at run time; Slice with ends
    from Shape and INT64_MAX, and with a negative start, on symbolic axes (``x[:, -2:]``
    keeps min(2, seq) columns, clamped as ONNX clamps)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "one"], ["positions"]),
             helper.make_node("Cast", ["positions"], ["pf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Add", ["x", "pf"], ["shifted"]),
             helper.make_node("Slice", ["s", "from1", "big"], ["tail"]),
             helper.make_node("Slice", ["shifted", "start", "tail", "axes"], ["y"])]
    m = make_model(nodes, {"x": ("float32", ["batch", "seq"])}, ["y"],
                   {"zero": np.int64(0), "one": np.int64(1), "from1": np.array([1], np.int64),
                    "big": np.array([np.iinfo(np.int64).max], np.int64),
                    "start": np.array([-2], np.int64), "axes": np.array([1], np.int64)})
    graph, _ = from_onnx(m)
    batch, kept = graph.outputs[0].shape
    assert batch == symbol("batch") and kept == symbol("seq") - parse_dim(
        "min(max(0, seq - 2), seq)")
    assert "cumsum" in {n.op for n in graph.nodes}
    rng = np.random.default_rng(5)
    runs_like_onnxruntime(graph, m, [{"x": rng.standard_normal((b, s), np.float32)}
                                     for b, s in ((1, 1), (2, 6))])


def test_last_token_of_a_symbolic_sequence() -> None:
    """Gather(x, -1, axis=1) on a symbolic axis is a slice at seq - 1."""
    m = make_model([helper.make_node("Gather", ["x", "last"], ["y"], axis=1)],
                   {"x": ("float32", ["batch", "seq", 4])}, ["y"],
                   {"last": np.int64(-1)})
    graph, _ = from_onnx(m)
    assert "%y: float32[batch, 4]" in str(graph)
    rng = np.random.default_rng(6)
    runs_like_onnxruntime(graph, m, [{"x": rng.standard_normal((b, s, 4), np.float32)}
                                     for b, s in ((1, 1), (2, 5))])


def test_causal_mask_over_symbolic_lengths() -> None:
    """Trilu of a [seq, seq] matrix: the mask is computed at run time."""
    nodes = [helper.make_node("Trilu", ["x"], ["y"], upper=0)]
    m = make_model(nodes, {"x": ("float32", ["seq", "seq"])}, ["y"])
    graph, _ = from_onnx(m)
    assert "%y: float32[seq, seq]" in str(graph)
    rng = np.random.default_rng(7)
    runs_like_onnxruntime(graph, m, [{"x": rng.standard_normal((s, s), np.float32)}
                                     for s in (1, 4)])


# -- (c) exported transformers -------------------------------------------------------------

DATA = Path(__file__).resolve().parent / "data"


def exported(name: str) -> onnx.ModelProto:
    """A PyTorch export with dynamic axes, made by data/export_torch_models.py."""
    return onnx.load(DATA / f"{name}.onnx")


def test_torch_encoder_layer() -> None:
    """The export of torch's encoder layer takes a symbolic batch. Its attention reshapes
    keys to ``k.shape[0]``, which the tracer records as the example's 5: the model then
    runs for that sequence length only (onnxruntime's Reshape fails for others), and the
    importer, which cannot make ``seq`` equal 5, names that node. With ``seq`` fixed the
    rest stays symbolic in ``batch``."""
    m = exported("torch_encoder_layer")
    rng = np.random.default_rng(8)
    try:
        ort_run(m, {"x": rng.standard_normal((2, 7, 32), np.float32)})
        seq_is_baked = False
    except Exception:  # onnxruntime's own error: the reshape to the example's length
        seq_is_baked = True
    if seq_is_baked:
        with pytest.raises(SymbolicDimError, match=r"node '/layer/self_attn/Reshape_\d+' "
                                                   r"\(Reshape, opset 17\): .*seq"):
            from_onnx(m)
        graph, _ = from_onnx(m, dims={"seq": 5})
        lengths = [5]
    else:
        graph, _ = from_onnx(m)
        lengths = [3, 7]
    assert graph.outputs[0].shape[0] == symbol("batch")
    runs_like_onnxruntime(graph, m, [{"x": rng.standard_normal((b, s, 32), np.float32)}
                                     for b in (1, 3) for s in lengths], atol=1e-4)


def test_torch_bert_like_layer() -> None:
    m = exported("torch_tiny_bert")
    ops = {n.op_type for n in m.graph.node}
    assert {"Shape", "Range", "ConstantOfShape", "Equal", "Where", "Expand"} <= ops
    graph, _ = from_onnx(m)
    assert str(graph).startswith("graph main_graph(%ids: int64[batch, seq], "
                                 "%mask: int64[batch, seq])")
    assert graph.outputs[0].shape == (symbol("batch"), symbol("seq"), 32)
    assert all(free_symbols(v.shape) <= {"batch", "seq"} for v in values(graph))
    rng = np.random.default_rng(9)
    runs_like_onnxruntime(graph, m, [
        {"ids": rng.integers(0, 50, (b, s)).astype(np.int64),
         "mask": (rng.random((b, s)) > 0.3).astype(np.int64)} for b, s in ((1, 1), (3, 9))],
        atol=1e-4)


# -- (d) fixing symbols --------------------------------------------------------------------

def test_dims_and_shapes_fix_symbols_as_before() -> None:
    by_dim, _ = from_onnx(cnn(), dims={"N": 2})
    by_shape, _ = from_onnx(cnn(), shapes={"x": (2, 3, 8, 8)})
    static, _ = from_onnx(cnn(2))
    assert all(v.is_static for v in values(by_dim))
    assert str(by_dim) == str(by_shape) == str(static)
    assert by_dim.inputs[0].shape == (2, 3, 8, 8)


def test_a_shape_fixes_the_symbols_it_names_for_every_input() -> None:
    node = helper.make_node("Add", ["ids", "mask"], ["y"], name="add")
    m = make_model([node], {"ids": ("int64", ["batch", "seq"]),
                            "mask": ("int64", ["batch", "seq"])}, {"y": "int64"})
    graph, _ = from_onnx(m, {"ids": (2, 7)})
    assert [v.shape for v in graph.inputs] == [(2, 7), (2, 7)]
    graph, _ = from_onnx(m, dims={"seq": 7})
    assert [v.shape for v in graph.inputs] == [(symbol("batch"), 7)] * 2


def test_symbol_names() -> None:
    """dim_params become identifiers; unnamed dims are named after input and axis."""
    nodes = [helper.make_node("Relu", ["input ids"], ["y"]),
             helper.make_node("Relu", ["b"], ["z"])]
    m = make_model(nodes, {"input ids": ("float32", ["batch size", None]),
                           "b": ("float32", [None, 3])}, ["y", "z"])
    graph, _ = from_onnx(m)
    assert [v.shape for v in graph.inputs] == [
        (symbol("batch_size"), symbol("input_ids_d1")), (symbol("b_d0"), 3)]
    fixed, _ = from_onnx(m, dims={"batch size": 2, "input_ids_d1": 3, "b_d0": 2})
    assert [v.shape for v in fixed.inputs] == [(2, 3), (2, 3)]


def test_dims_errors() -> None:
    with pytest.raises(ModelError, match=r"size given for dimension 'M', which no input of "
                                         r"the model has \(its symbolic dimensions: N\)"):
        from_onnx(cnn(), dims={"M": 2})
    with pytest.raises(ModelError, match=r"dimension 'N' is given as 3, but the shapes given "
                                         r"make it 2"):
        from_onnx(cnn(), {"x": (2, 3, 8, 8)}, dims={"N": 3})
    with pytest.raises(ModelError, match=r"must be an int >= 0, got 2.5"):
        from_onnx(cnn(), dims={"N": 2.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="takes the input shapes once"):
        from_onnx(cnn(), {"x": (2, 3, 8, 8)}, shapes={"x": (2, 3, 8, 8)})


def test_static_demands_every_size() -> None:
    graph, _ = from_onnx(cnn(), dims={"N": 1}, static=True)
    assert graph.inputs[0].shape == (1, 3, 8, 8)
    with pytest.raises(ModelError, match=r"input 'x' has shape \[N, 3, 8, 8\] with symbolic "
                                         r"dimension\(s\) N\. The compiler needs static "
                                         r"shapes here: pass shape=\{'x': \(1, 3, 8, 8\)\} or "
                                         r"--input-shape x:1,3,8,8"):
        from_onnx(cnn(), static=True)
    symbolic, _ = from_onnx(cnn())
    with pytest.raises(ModelError, match=r"m\.onnx: input 'x' has shape \[N, 3, 8, 8\] .* "
                                         r"--dim N=1 \(for target t: why\)"):
        require_static(symbolic, "m.onnx", because="for target t: why")
    require_static(graph, "m.onnx")


def test_an_input_without_a_shape_still_needs_one() -> None:
    """onnx's checker refuses such a model first; the inputs' own check stays."""
    vi = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)
    with pytest.raises(ModelError, match=r"m: input 'x' has no shape in the model\. .*"
                                         r"shape=\{'x': \(\.\.\.\)\}"):
        resolve([vi], None, "m")
    assert resolve([vi], {"x": (2, 3)}, "m") == [("x", (2, 3), "float32")]


# -- (e) what must be known at compile time ------------------------------------------------

def test_reshape_to_a_graph_inputs_values_names_the_node() -> None:
    nodes = [helper.make_node("Add", ["s", "zero"], ["t"], name="plus"),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="r")]
    m = make_model(nodes, {"x": ("float32", ["batch", 6]), "s": ("int64", ["n"])}, ["y"],
                   {"zero": np.array([0], np.int64)})
    with pytest.raises(ModelError, match=r"node 'r' \(Reshape, opset 17\): input 1 \(shape\) "
                                         r"must be known when the model is compiled .* but "
                                         r"'t' is computed at run time from the values of "
                                         r"graph input 's'"):
        from_onnx(m)


def test_sizes_used_as_run_time_data_are_refused() -> None:
    """No graph op reads a size at run time: x * seq is an error naming the node."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Cast", ["seq"], ["seqf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "seqf"], ["y"], name="scale")]
    m = make_model(nodes, {"x": ("float32", ["batch", "seq"])}, ["y"], {"one": np.int64(1)})
    with pytest.raises(SymbolicDimError, match=r"node 'scale' \(Mul, opset 17\): 'seqf' "
                                               r"\(seq, computed from sizes known only at run "
                                               r"time\) is used as run-time data of mul"):
        from_onnx(m)
    assert from_onnx(m, dims={"seq": 4})[0].outputs[0].shape == (symbol("batch"), 4)


def test_comparisons_only_the_sizes_decide_are_refused() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Equal", ["s", "five"], ["is_five"], name="eq"),
             helper.make_node("Where", ["is_five", "s", "minus"], ["t"]),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    m = make_model(nodes, {"x": ("float32", ["seq"])}, ["y"],
                   {"five": np.array([5], np.int64), "minus": np.array([-1], np.int64)})
    with pytest.raises(SymbolicDimError, match=r"node 'eq' \(Equal, opset 17\): whether seq "
                                               r"== 5 depends on sizes known only at run time"):
        from_onnx(m)
    assert from_onnx(m, dims={"seq": 5})[0].outputs[0].shape == (5,)


def test_a_graph_output_of_sizes_is_refused() -> None:
    m = make_model([helper.make_node("Shape", ["x"], ["y"])],
                   {"x": ("float32", ["batch", 3])}, {"y": "int64"})
    with pytest.raises(SymbolicDimError, match=r"graph output 'y' is \[batch, 3\], computed "
                                               r"from sizes known only at run time"):
        from_onnx(m)
    graph, _ = from_onnx(m, dims={"batch": 2})
    assert run_graph(graph, {"x": np.zeros((2, 3), np.float32)})[0].tolist() == [2, 3]


def test_a_converter_that_needs_a_fixed_size_names_the_node() -> None:
    m = make_model([helper.make_node("RNN", ["x", "w", "r"], ["y"], name="rnn", hidden_size=2)],
                   {"x": ("float32", ["seq", 1, 3])}, ["y"],
                   {"w": np.ones((1, 2, 3), np.float32), "r": np.ones((1, 2, 2), np.float32)})
    with pytest.raises(SymbolicDimError, match=r"node 'rnn' \(RNN, opset 17\): the sequence "
                                               r"length .* must be known when the model is "
                                               r"compiled, but it is 'seq'"):
        from_onnx(m)
