"""Symbolic dimensions in the graph IR: the algebra of symbolic.py, every op's shape
inference over sizes known only at run time, the graph passes on such graphs, and the
clear errors where a size must be known when the model is compiled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, ModelError, ShapeError, parse_graph, run_graph
from tensorsmith.ir.graph import Graph, Value
from tensorsmith.ir.ops.broadcast import broadcast_shapes
from tensorsmith.ir.passes import (
    concat_views,
    default_pipeline,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    fuse_ops,
    simplify_graph,
)
from tensorsmith.ir.passes.blocked_layout import block_layouts
from tensorsmith.ir.passes.index_checks import add_index_checks
from tensorsmith.ir.symbolic import (
    Sym,
    SymbolicDimError,
    dim_max,
    dim_min,
    evaluate,
    fold,
    free_symbols,
    math_prod,
    parse_dim,
    shape_text,
    static_dim,
    symbol,
)

B, S, H, W = symbol("batch"), symbol("seq"), symbol("h"), symbol("w")
rng = np.random.default_rng(7)


# -- symbolic.py ---------------------------------------------------------------------------
def test_equal_expressions_have_one_canonical_form() -> None:
    a, b = B * S * 768, (S * 768) * B
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert str(a) == "768*batch*seq" and repr(a) == "Sym(768*batch*seq)"
    assert (B + 1) * (B - 1) == B * B - 1
    assert str(2 * B * B - S + 1) == "2*batch*batch - seq + 1"
    assert B + 1 != B and B != S and B != 1 and B != "batch"


def test_expressions_that_fold_to_a_constant_are_ints() -> None:
    for d, value in [(B - B, 0), (B + S - B - S + 3, 3), ((B * 4) % 2, 0), (S // S, 1)]:
        assert type(d) is int and d == value
    assert B + S - B == S and isinstance(B + S - B, Sym)


def test_exact_division_folds_and_the_rest_stays_an_atom() -> None:
    assert (B * 4) // 2 == 2 * B and B * S // S == B
    assert str((S + 1) // 2) == "(seq + 1)//2" and str((B * S) % 3) == "(batch*seq)%3"
    assert str((S - 1) // 2 + 1) == "(seq - 1)//2 + 1"
    assert str(dim_max(B, S)) == "max(batch, seq)" and str(dim_min(S, 5)) == "min(5, seq)"
    assert dim_max(B, 1) == B and dim_max(1, B) == B and dim_min(S, S) == S
    assert dim_max(3, 5) == 5 and dim_min(3, 5) == 3


def test_comparisons_that_hold_for_every_size_are_answered() -> None:
    assert B >= 1 and B > 0 and 2 * S > 1 and B + 1 > B and S * B >= 1
    assert not B < 1 and not (B + 1 <= B)
    assert bool(B) and bool(S + 1) and (S - 1) // 2 + 1 >= 1


@pytest.mark.parametrize("question", [
    lambda: int(B), lambda: B < 5, lambda: B > S, lambda: bool(B - S), lambda: range(S),
    lambda: float(B), lambda: S - 2 >= 0, lambda: static_dim(B, "the block size"),
], ids=["int", "lt", "gt", "bool", "range", "float", "ge", "static_dim"])
def test_questions_only_run_time_sizes_answer_raise(question: Callable[[], object]) -> None:
    with pytest.raises(SymbolicDimError) as e:
        question()
    assert isinstance(e.value, ShapeError) and "run time" in str(e.value)


def test_static_dim_names_what_needed_the_size() -> None:
    assert static_dim(4, "x") == 4
    with pytest.raises(SymbolicDimError, match=r"the block size must be known when the model "
                                               r"is compiled, but it is 'batch\*seq'"):
        static_dim(B * S, "the block size")


@pytest.mark.parametrize("d", [
    B, B * S * 768, (S + 1) // 2, (B * S) % 3, dim_max(B, S), dim_min(S, 5), -B + 3,
    2 * B * B - S + 1, (S - 1) // 2 + 1, dim_max(0, S - 2), (H + 2 - 3) // 2 + 1, 7,
])
def test_parse_dim_reads_back_what_str_prints(d: Any) -> None:
    assert parse_dim(str(d)) == d


@pytest.mark.parametrize("text", ["batch / 2", "f(batch)", "1.5", "max(a)", "batch +"])
def test_parse_dim_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="is not a dimension"):
        parse_dim(text)


def test_evaluate_and_fold_rebuild_an_expression() -> None:
    assert evaluate((S + 1) // 2, {"seq": 7}) == 4
    assert evaluate(dim_max(B, S) * 2 + dim_min(B, 1), {"batch": 3, "seq": 5}) == 11
    assert evaluate(12, {}) == 12
    with pytest.raises(KeyError, match="seq"):
        evaluate(B * S, {"batch": 2})
    ops = {"add": lambda a, b: f"({a} + {b})", "mul": lambda a, b: f"{a}*{b}",
           "floordiv": lambda a, b: f"div({a}, {b})", "mod": lambda a, b: f"mod({a}, {b})",
           "max": lambda a, b: f"max({a}, {b})", "min": lambda a, b: f"min({a}, {b})"}
    assert fold(2 * B * S + 3, str, lambda n: n.upper(), ops) == "(2*BATCH*SEQ + 3)"
    assert fold((S + 1) // 2, str, lambda n: n, ops) == "div((seq + 1), 2)"


def test_shape_helpers() -> None:
    assert free_symbols([B, (S + 1) // 2, 3]) == {"batch", "seq"}
    assert math_prod([B, S, 4]) == 4 * B * S and math_prod([2, 3]) == 6
    assert shape_text([B, S * 2, 3]) == "[batch, 2*seq, 3]" and shape_text([1, 2]) == "[1, 2]"


# -- shape inference, op by op ---------------------------------------------------------------
F = "float32"
INFER = [
    ("relu", [((B, S, 4), F)], {}, "float32[batch, seq, 4]"),
    ("sin", [((B, S), F)], {}, "float32[batch, seq]"),
    ("add", [((B, S, 4), F), ((4,), F)], {}, "float32[batch, seq, 4]"),
    ("mul", [((B, 1, 4), F), ((1, S, 4), F)], {}, "float32[batch, seq, 4]"),
    ("lt", [((B, S), F), ((B, S), F)], {}, "bool[batch, seq]"),
    ("where", [((B, 1), "bool"), ((B, 4), F), ((4,), F)], {}, "float32[batch, 4]"),
    ("cast", [((B, 4), F)], {"dtype": "int32"}, "int32[batch, 4]"),
    ("bitcast", [((B, 4), F)], {"dtype": "int32"}, "int32[batch, 4]"),
    ("expand", [((1, 4), F)], {"shape": [B, 4]}, "float32[batch, 4]"),
    ("expand", [((B, 1), F)], {"shape": ["batch", "seq"]}, "float32[batch, seq]"),
    ("reshape", [((B, S, 64), F)], {"shape": [-1, 64]}, "float32[batch*seq, 64]"),
    ("reshape", [((B, S, 64), F)], {"shape": [0, 0, 4, -1], "allowzero": 0},
     "float32[batch, seq, 4, 16]"),
    ("reshape", [((B * S, 64), F)], {"shape": [B, -1, 64]}, "float32[batch, seq, 64]"),
    ("reshape", [((B, S, 64), F)], {"shape": ["batch", "seq", 4, 16]},
     "float32[batch, seq, 4, 16]"),
    ("transpose", [((B, S, 64), F)], {"perm": [2, 0, 1]}, "float32[64, batch, seq]"),
    ("copy", [((B, S), F)], {}, "float32[batch, seq]"),
    ("concat", [((B, S, 4), F), ((B, 1, 4), F)], {"axis": 1}, "float32[batch, seq + 1, 4]"),
    ("concat", [((B, S, 4), F), ((B, S, 4), F)], {"axis": 1}, "float32[batch, 2*seq, 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 0, 0], "end": [B, 5, 4], "step": [1, 1, 1]},
     "float32[batch, min(5, seq), 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 0, 0], "end": [B, 2**63 - 1, 4],
                                 "step": [1, 1, 1]}, "float32[batch, seq, 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 2, 0], "end": [B, 2**63 - 1, 4],
                                 "step": [1, 1, 1]}, "float32[batch, max(0, seq - 2), 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 1, 0], "end": [B, S, 4], "step": [1, 2, 1]},
     "float32[batch, seq//2, 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, "seq - 1", 0], "end": ["batch", -1, 4],
                                 "step": [1, -1, 1]}, "float32[batch, seq, 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 0, 1], "end": [B, 1, 3], "step": [1, 1, 1]},
     "float32[batch, 1, 2]"),
    # bounds an importer clamped already stay as they are
    ("slice", [((B, S, 4), F)], {"begin": [0, 0, 0], "end": [B, dim_min(5, S), 4],
                                 "step": [1, 1, 1]}, "float32[batch, min(5, seq), 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, dim_min(2, S), 0], "end": [B, S, 4],
                                 "step": [1, 1, 1]}, "float32[batch, -min(2, seq) + seq, 4]"),
    ("slice", [((B, S, 4), F)], {"begin": [0, 1, 0], "end": [B, "min(5, seq)", 4],
                                 "step": [1, 2, 1]}, "float32[batch, min(5, seq)//2, 4]"),
    ("pad", [((B, S, 4), F)], {"before": [0, 1, 0], "after": [0, 2, 0]},
     "float32[batch, seq + 3, 4]"),
    ("pad", [((B, S, 4), F)], {"before": [0, 1, 0], "after": [0, 0, 0], "mode": "edge"},
     "float32[batch, seq + 1, 4]"),
    ("reduce_sum", [((B, S, 4), F)], {"axes": [-1]}, "float32[batch, seq, 1]"),
    ("reduce_mean", [((B, S, 4), F)], {"axes": [1], "keepdims": False}, "float32[batch, 4]"),
    ("reduce_max", [((B, S, 4), F)], {}, "float32[1, 1, 1]"),
    ("reduce_min", [((B, S, 4), F)], {"axes": [0, 2]}, "float32[1, seq, 1]"),
    ("reduce_prod", [((B, S, 4), F)], {"axes": [0], "keepdims": False}, "float32[seq, 4]"),
    ("argmax", [((B, S, 4), F)], {"axis": 1}, "int64[batch, 1, 4]"),
    ("argmin", [((B, S, 4), F)], {"axis": 1, "keepdims": False}, "int64[batch, 4]"),
    ("matmul", [((B, S, 64), F), ((64, 32), F)], {}, "float32[batch, seq, 32]"),
    ("matmul", [((B, 4, S, 16), F), ((B, 4, 16, S), F)], {}, "float32[batch, 4, seq, seq]"),
    ("matmul", [((S, 64), F), ((B, 64, 8), F)], {}, "float32[batch, seq, 8]"),
    ("softmax", [((B, 4, S, S), F)], {"axis": -1}, "float32[batch, 4, seq, seq]"),
    ("conv2d", [((B, 3, H, W), F), ((8, 3, 3, 3), F)], {"pads": [1, 1, 1, 1]},
     "float32[batch, 8, h, w]"),
    ("conv2d", [((B, 3, H, W), F), ((8, 3, 3, 3), F)], {"pads": [1, 1, 1, 1],
                                                        "strides": [2, 2]},
     "float32[batch, 8, (h - 1)//2 + 1, (w - 1)//2 + 1]"),
    ("conv2d", [((B, 3, 32, 32), F), ((8, 3, 3, 3), F)], {"pads": [1, 1, 1, 1], "block": 8},
     "float32[batch, 1, 32, 32, 8]"),
    ("qconv2d", [((B, 8, H, W), "uint8"), ((16, 2, 3, 3, 4), "int8")],
     {"pads": [1, 1, 1, 1], "strides": [2, 2], "zero_point": 3},
     "int32[batch, 16, (h - 1)//2 + 1, (w - 1)//2 + 1]"),
    ("qconv2d", [((B, 2, H, W, 4), "uint8"), ((16, 2, 1, 1, 4), "int8")], {"block": 8},
     "int32[batch, 2, h, w, 8]"),
    ("qmatmul", [((B, S, 64), "uint8"), ((16, 32, 4), "int8")], {}, "int32[batch, seq, 32]"),
    ("pool2d", [((B, 3, H, W), F)], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                      "mode": "max"},
     "float32[batch, 3, (h - 1)//2 + 1, (w - 1)//2 + 1]"),
    ("pool2d", [((B, 3, H, W), F)], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                      "mode": "avg", "ceil_mode": True},
     "float32[batch, 3, h//2 + 1, w//2 + 1]"),
    ("pool2d", [((B, 3, 8, 8), F)], {"kernel": [2, 2], "strides": [2, 2], "mode": "max"},
     "float32[batch, 3, 4, 4]"),
    ("gather", [((30000, 64), F), ((B, S), "int64")], {"axis": 0}, "float32[batch, seq, 64]"),
    ("gather", [((B, S, 64), F), ((3,), "int64")], {"axis": 1}, "float32[batch, 3, 64]"),
    ("gather_elements", [((B, S, 4), F), ((B, S, 2), "int64")], {"axis": 2},
     "float32[batch, seq, 2]"),
    ("gather_nd", [((B, S, 4), F), ((B, 5, 1), "int64")], {"batch_dims": 1},
     "float32[batch, 5, 4]"),
    ("scatter_elements", [((B, S, 4), F), ((B, S, 2), "int64"), ((B, S, 2), F)], {"axis": 2},
     "float32[batch, seq, 4]"),
    ("scatter_nd", [((S, 4), F), ((B, 1), "int64"), ((B, 4), F)], {}, "float32[seq, 4]"),
    ("einsum", [((B, S, 4), F), ((4, 8), F)], {"equation": "bsi,ij->bsj"},
     "float32[batch, seq, 8]"),
    ("grid_sample", [((B, 3, H, W), F), ((B, S, S, 2), F)], {}, "float32[batch, 3, seq, seq]"),
    ("topk", [((B, S), F)], {"k": 1}, "float32[batch, 1], int64[batch, 1]"),
    ("topk", [((S, 50), F)], {"k": 5}, "float32[seq, 5], int64[seq, 5]"),
    ("topk", [((B, S), F)], {"k": "seq"}, "float32[batch, seq], int64[batch, seq]"),
    ("cumsum", [((B, S), F)], {"axis": 1}, "float32[batch, seq]"),
    ("cumprod", [((B, S), F)], {"axis": 0, "reverse": 1}, "float32[batch, seq]"),
    ("non_max_suppression", [((B, S, 4), F), ((B, 3, S), F), ((), F), ((1,), F)],
     {"max_output": 10}, "int64[3*batch*min(10, seq), 3], int64[]"),
    ("nonzero", [((B, S), "bool")], {}, "int64[batch*seq, 2], int64[]"),
    ("unique", [((B, S), F)], {"sorted": 0},
     "float32[batch, seq], int64[batch], int64[batch], int64[batch], int64[]"),
]


def _infer_text(op: str, inputs: list[tuple[tuple[Any, ...], str]], attrs: dict[str, Any]
                ) -> str:
    b = GraphBuilder()
    values = [b.input(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(inputs)]
    return ", ".join(f"{v.dtype}{shape_text(v.shape)}" for v in b.add(op, values, attrs, "n"))


@pytest.mark.parametrize("op,inputs,attrs,expected", INFER,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(INFER)])
def test_inferred_types(op: str, inputs: list[tuple[tuple[Any, ...], str]],
                        attrs: dict[str, Any], expected: str) -> None:
    assert _infer_text(op, inputs, attrs) == expected


def test_every_registered_op_is_inferred_above_or_elementwise() -> None:
    from tensorsmith.ir.op_registry import REGISTRY, Pattern, get_op

    get_op("add")
    listed = {c[0] for c in INFER}
    for name, op in REGISTRY.items():
        if name in listed:
            continue
        assert op.pattern in (Pattern.ELEMWISE, Pattern.BROADCAST), \
            f"{name}: add a case with symbolic dims to INFER"
        n = op.num_inputs[0]
        dtype = "int32" if name in ("bitand", "bitor", "bitxor", "shl", "shr", "bitnot") \
            else "bool" if name in ("and", "or") else F
        attrs = {"min": 0.0, "max": 1.0, "alpha": 0.1}
        shapes = [((B, S), dtype), ((S,), dtype)][:n]
        assert _infer_text(name, shapes, attrs).endswith("[batch, seq]"), name


@pytest.mark.parametrize("attrs", [
    {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "mode": "max"},
    {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "mode": "avg", "ceil_mode": 1},
    {"kernel": [2, 2], "strides": [3, 3], "pads": [1, 0, 1, 0], "mode": "max", "ceil_mode": 1},
    {"kernel": [3, 3], "strides": [2, 2], "pads": [2, 2, 2, 2], "mode": "max",
     "dilations": [2, 2], "ceil_mode": 1},
])
def test_window_sizes_evaluate_to_the_static_ones(attrs: dict[str, Any]) -> None:
    symbolic = GraphBuilder().add1("pool2d", [GraphBuilder().input("x", (B, 3, H, W), F)], attrs)
    for h in range(2, 14):
        static = GraphBuilder().add1("pool2d", [GraphBuilder().input("x", (2, 3, h, h + 1), F)],
                                     attrs)
        sizes = {"batch": 2, "h": h, "w": h + 1}
        assert tuple(evaluate(d, sizes) for d in symbolic.shape) == static.shape, (h, symbolic)


def test_deeply_nested_sizes_print_and_parse_back() -> None:
    b = GraphBuilder()
    y = b.input("x", (S, 8), F)
    for _ in range(3):  # each clamped, strided slice nests the size once more
        y = b.add1("slice", [y], {"begin": [3, 0], "end": [7, 8], "step": [2, 1]})
    g = b.finish([y])
    text = str(g)
    depth = max(text[:i].count("(") - text[:i].count(")") for i in range(len(text)))
    assert depth >= 4, text
    _round_trips(g)


@pytest.mark.parametrize("begin,end,step", [
    (0, 5, 1), (2, 2**63 - 1, 1), (1, "seq", 2), ("seq - 1", -1, -1), (3, 7, 2),
    ("min(2, seq)", "seq", 1), (6, -1, -2),
])
def test_slices_of_a_symbolic_axis_clamp_as_onnx_runtime_does(begin: Any, end: Any,
                                                               step: int) -> None:
    b = GraphBuilder()
    x = b.input("x", (S,), F)
    g = b.finish([b.add1("slice", [x], {"begin": [begin], "end": [end], "step": [step]})])
    _round_trips(g)
    out = g.outputs[0]
    for seq in range(1, 10):
        data = np.arange(seq, dtype=F)
        got = run_graph(g, {"x": data})[0]
        b_, e_ = (parse_dim(v) if isinstance(v, str) else v for v in (begin, end))
        b_, e_ = evaluate(b_, {"seq": seq}), evaluate(e_, {"seq": seq})
        want = data[slice(b_, e_ if e_ >= 0 else None, step)]  # Python's clamps are ORT's
        np.testing.assert_array_equal(got, want)
        assert evaluate(out.shape[0], {"seq": seq}) == len(want), (seq, out)


# -- errors where a size must be known, or where only run-time sizes could tell ----------------
ERRORS = [
    ("reshape", [((B, S, 64), F)], {"shape": [-1, 128]},
     r"the -1 would be 64\*batch\*seq / 128, a whole number only for some sizes"),
    ("reshape", [((B, S, 64), F)], {"shape": [symbol("n"), 64]},
     r"cannot reshape \[batch, seq, 64\] \(64\*batch\*seq elements\) to \[n, 64\]"),
    ("matmul", [((B, S, 64), F), ((S, 32), F)], {},
     r"matmul inner dimensions differ: \[batch, seq, 64\] x \[seq, 32\]"),
    ("conv2d", [((B, 3, H, W), F), ((8, 3, 3, 3), F)], {},
     r"the 3x3 kernel may be larger than the padded input \(h - 2 by w - 2 output\)"),
    ("conv2d", [((B, 3, 32, 32), F), ((S, 3, 3, 3), F)], {},
     r"the conv2d weight's O dim \(of \[seq, 3, 3, 3\]\) must be known"),
    ("conv2d", [((B, S, 32, 32), F), ((8, 3, 3, 3), F)], {"pads": [1, 1, 1, 1]},
     r"input has seq channels but weight expects 3 x 1 groups"),
    ("pool2d", [((B, 3, H, W), F)], {"kernel": [2, 2], "strides": [2, 2], "mode": "max"},
     r"the 2x2 window may be larger than the padded input"),
    ("pad", [((B, S, 4), F)], {"before": [0, 2, 0], "after": [0, 2, 0], "mode": "reflect"},
     r"reflect padding 2 on axis 1 needs the axis longer than it, it has seq"),
    ("pad", [((B, S, 4), F)], {"before": [0, "seq - 2", 0], "after": [0, 0, 0]},
     r"pad's amount before axis 1 must be known when the model is compiled"),
    ("topk", [((B, S), F)], {"k": 5}, r"topk k=5 for an axis of seq: whether 5 <= seq"),
    ("topk", [((B, S), F)], {"k": "batch"},
     r"topk k=batch for an axis of seq: whether batch <= seq"),
    ("gather_nd", [((B, S, 4), F), ((B, 5, S), "int64")], {"batch_dims": 1},
     r"gather_nd's index depth \(the indices' last dim\) must be known"),
    ("gather_elements", [((B, S, 4), F), ((B, 3, 2), "int64")], {"axis": 2},
     r"indices \[batch, 3, 2\] exceed the data \[batch, seq, 4\]: whether 3 <= seq"),
    ("argmax", [((B, S - 1), F)], {"axis": 1}, r"arg-reduce over the empty axis 1"),
    ("slice", [((B, S), F)], {"begin": [0, 0], "end": [B, 4], "step": [1, "seq"]},
     r"the slice step of axis 1 must be known"),
]


@pytest.mark.parametrize("op,inputs,attrs,message", ERRORS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ERRORS)])
def test_undecidable_shapes_are_symbolic_dim_errors(
        op: str, inputs: list[tuple[tuple[Any, ...], str]], attrs: dict[str, Any],
        message: str) -> None:
    with pytest.raises(SymbolicDimError, match=message):
        _infer_text(op, inputs, attrs)


def test_broadcasting_sizes_that_may_differ_assumes_them_equal() -> None:
    with pytest.raises(SymbolicDimError, match=r"shapes \[batch, 4\] and \[seq, 4\] "
                                               r"broadcast at axis 0 only if batch == seq"):
        broadcast_shapes((B, 4), (S, 4))  # outside graph construction: nothing records it
    b = GraphBuilder()
    x, y = b.input("x", (B, 4), F), b.input("y", (S, 1, 4), F)
    g = b.finish([b.add1("add", [x, y], name="n")])
    assert "%n_0: float32[seq, batch, 4] = add(%x, %y)" in str(g)
    assert g.assumptions == []  # different axes: no equality needed
    b = GraphBuilder()
    x, y = b.input("x", (B, 4), F), b.input("y", (S, 4), F)
    g = b.finish([b.add1("add", [x, y], name="n")])
    assert ('  assume batch == seq "node \'n\' (add): shapes [batch, 4] and [seq, 4] '
            'broadcast at axis 0 only if batch == seq"\n') in str(g)
    _round_trips(g)
    ones = np.ones((3, 4), F)
    np.testing.assert_array_equal(run_graph(g, {"x": ones, "y": ones})[0], ones * 2)
    with pytest.raises(ModelError, match=r"only if batch == seq, but here batch is 3 and seq "
                                         r"is 1"):
        run_graph(g, {"x": ones, "y": np.ones((1, 4), F)})


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("concat", [((B, S, 4), F), ((S, 1, 4), F)], {"axis": 1},
     r"concat inputs \[\[batch, seq, 4\], \[seq, 1, 4\]\] differ outside axis 1"),
    ("slice", [((B, S), F)], {"begin": [0, -1], "end": [B, S], "step": [1, 1]},
     r"slice axis 1 of size seq: range\(-1, seq, 1\) is not normalised"),
    ("expand", [((B, 3), F)], {"shape": [B, S]}, r"cannot expand \[batch, 3\] to \[batch, seq\]"),
    ("matmul", [((B, S + 1), F), ((S, 2), F)], {}, r"inner dimensions differ"),
])
def test_shapes_that_never_fit_are_shape_errors(
        op: str, inputs: list[tuple[tuple[Any, ...], str]], attrs: dict[str, Any],
        message: str) -> None:
    with pytest.raises(ShapeError, match=message) as e:
        _infer_text(op, inputs, attrs)
    assert not isinstance(e.value, SymbolicDimError)


# -- graphs through the passes ---------------------------------------------------------------
def _round_trips(g: Graph) -> None:
    text = str(g)
    again = parse_graph(text, {c.name: c.data for c in g.constants()})
    assert str(again) == text


def _dense(b: GraphBuilder, x: Value, k: int, n: int, name: str) -> Value:
    w = b.constant(f"{name}_w", (rng.standard_normal((k, n)) * 0.2).astype(F))
    bias = b.constant(f"{name}_b", rng.standard_normal(n).astype(F))
    return b.add1("add", [b.add1("matmul", [x, w], name=name), bias], name=f"{name}_bias")


def mlp(batch: Any) -> Graph:
    b = GraphBuilder("mlp")
    x = b.input("x", (batch, 16), F)
    h = b.add1("relu", [_dense(b, x, 16, 32, "fc1")], name="act")
    y = b.add1("softmax", [_dense(b, h, 32, 8, "fc2")], {"axis": -1}, name="probs")
    return b.finish([y])


def bert_block(batch: Any, seq: Any, hidden: int = 64, heads: int = 4) -> Graph:
    """Self-attention and a feed-forward layer as an exporter writes them out: three
    projections, heads split by reshape and transpose, batched products, softmax, a
    LayerNorm of reductions, and residual adds."""
    b = GraphBuilder("bert")
    x = b.input("x", (batch, seq, hidden), F)
    mask = b.input("mask", (batch, 1, 1, seq), F)

    def split(h: Value, name: str, perm: list[int]) -> Value:
        r = b.add1("reshape", [h], {"shape": [0, 0, heads, -1], "allowzero": 0},
                   name=f"{name}_split")
        return b.add1("transpose", [r], {"perm": perm}, name=f"{name}_heads")

    q = split(_dense(b, x, hidden, hidden, "q"), "q", [0, 2, 1, 3])
    k = split(_dense(b, x, hidden, hidden, "k"), "k", [0, 2, 3, 1])
    v = split(_dense(b, x, hidden, hidden, "v"), "v", [0, 2, 1, 3])
    s = b.add1("matmul", [q, k], name="scores")
    s = b.add1("mul", [s, b.constant("scale", np.float32(0.25))], name="scaled")
    p = b.add1("softmax", [b.add1("add", [s, mask], name="masked")], {"axis": -1}, name="probs")
    c = b.add1("transpose", [b.add1("matmul", [p, v], name="context")], {"perm": [0, 2, 1, 3]},
               name="merge_heads")
    c = b.add1("reshape", [c], {"shape": [batch, seq, hidden]}, name="merge")
    h = b.add1("add", [_dense(b, c, hidden, hidden, "attn_out"), x], name="residual")
    mean = b.add1("reduce_mean", [h], {"axes": [-1]}, name="mean")
    d = b.add1("sub", [h, mean], name="centered")
    sq = b.add1("pow", [d, b.constant("two", np.float32(2))], name="square")
    var = b.add1("reduce_mean", [sq], {"axes": [-1]}, name="var")
    std = b.add1("sqrt", [b.add1("add", [var, b.constant("eps", np.float32(1e-5))],
                                 name="var_eps")], name="std")
    y = b.add1("div", [d, std], name="normed")
    f = b.add1("relu", [_dense(b, y, hidden, 2 * hidden, "ffn1")], name="ffn_act")
    out = b.add1("add", [_dense(b, f, 2 * hidden, hidden, "ffn2"), y], name="out")
    return b.finish([out])


def test_an_mlp_over_a_symbolic_batch_runs_the_pipeline() -> None:
    g = mlp(B)
    assert "%x: float32[batch, 16]" in str(g) and "float32[batch, 8] = softmax" in str(g)
    _round_trips(g)
    optimized = default_pipeline().run(g.copy())
    _round_trips(optimized)
    groups = fuse_ops(optimized)
    assert [[n.op for n in grp.nodes] for grp in groups] == [
        ["matmul", "add", "relu"], ["matmul", "add"], ["softmax"]]
    for batch in (1, 3):
        x = rng.standard_normal((batch, 16)).astype(F)
        want = run_graph(g, {"x": x})[0]
        assert want.shape == (batch, 8)
        np.testing.assert_allclose(run_graph(optimized, {"x": x})[0], want, rtol=1e-6)


def test_a_bert_block_over_batch_and_seq_runs_the_pipeline_and_fuses() -> None:
    g = bert_block(B, S)
    text = str(g)
    assert "%scores_0: float32[batch, 4, seq, seq] = matmul(%q_heads_0, %k_heads_0)" in text
    assert '%q_split_0: float32[batch, seq, 4, 16] = reshape(%q_bias_0) {"allowzero": 0, ' \
           '"shape": [0, 0, 4, -1]}' in text
    assert '%merge_0: float32[batch, seq, 64] = reshape(%merge_heads_0) {"shape": ' \
           '["batch", "seq", 64]}' in text
    _round_trips(g)
    optimized = default_pipeline().run(g.copy())
    after = str(optimized)
    # the three projections are one product, sliced along its last axis
    assert "%q/merged: float32[batch, seq, 192] = matmul(%x, %q/merged_weight)" in after
    assert '"end": ["batch", "seq", 128]' in after and "pow" not in after
    _round_trips(optimized)
    groups = fuse_ops(optimized)
    assert sum(len(grp.nodes) for grp in groups) == len(optimized.nodes)
    assert ["slice", "reshape", "transpose"] in [[n.op for n in grp.nodes] for grp in groups]
    assert concat_views(optimized).views == {}
    for batch, seq in ((2, 5), (1, 3)):
        feeds = {"x": rng.standard_normal((batch, seq, 64)).astype(F),
                 "mask": np.where(rng.random((batch, 1, 1, seq)) < 0.2, -1e4, 0).astype(F)}
        want = run_graph(g, feeds)[0]
        assert want.shape == (batch, seq, 64)
        np.testing.assert_allclose(run_graph(optimized, feeds)[0], want, rtol=1e-5, atol=1e-5)


def test_the_symbolic_graph_computes_what_a_static_one_does() -> None:
    state = rng.bit_generator.state
    symbolic = bert_block(B, S)
    rng.bit_generator.state = state
    static = bert_block(2, 5)
    assert "batch" not in str(static)
    feeds = {"x": rng.standard_normal((2, 5, 64)).astype(F),
             "mask": np.zeros((2, 1, 1, 5), F)}
    np.testing.assert_array_equal(run_graph(symbolic, feeds)[0], run_graph(static, feeds)[0])


def test_simplify_merges_reshapes_whose_zeros_copy_the_dropped_input() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S, 64), F)
    rows = b.add1("reshape", [x], {"shape": [-1, 64]}, name="rows")
    heads = b.add1("reshape", [rows], {"shape": [0, 4, 16], "allowzero": 0}, name="heads")
    g = b.finish([b.add1("relu", [heads], name="act")])
    feeds = {"x": rng.standard_normal((2, 3, 64)).astype(F)}
    want = run_graph(g, feeds)[0]
    simplified = eliminate_dead_code(simplify_graph(g.copy()))
    assert [n.op for n in simplified.nodes] == ["reshape", "relu"]
    assert ('%heads_0: float32[batch*seq, 4, 16] = reshape(%x) {"shape": ["batch*seq", 4, 16]}'
            in str(simplified))
    _round_trips(simplified)
    np.testing.assert_array_equal(run_graph(simplified, feeds)[0], want)


def test_simplify_drops_a_reshape_to_the_same_symbolic_shape() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S), F)
    same = b.add1("reshape", [x], {"shape": [0, -1], "allowzero": 0}, name="same")
    g = b.finish([b.add1("exp", [same], name="e")])
    assert [n.op for n in simplify_graph(g).nodes] == ["exp"]


def test_cse_merges_nodes_with_equal_symbolic_attributes() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S, 8), F)
    one = b.add1("reshape", [x], {"shape": [B * S, 8]}, name="one")
    two = b.add1("reshape", [x], {"shape": [S * B, 8]}, name="two")
    g = eliminate_common_subexpressions(b.finish([b.add1("add", [one, two], name="sum")]))
    assert [n.op for n in g.nodes] == ["reshape", "add"]


def test_constants_are_not_folded_into_symbolic_shapes() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, 4), F)
    bias = b.add1("expand", [b.constant("c", np.ones((1, 4), F))], {"shape": [B, 4]},
                  name="bias")
    twice = b.add1("mul", [b.constant("k", np.ones(4, F)), b.constant("k2", np.ones(4, F))],
                   name="twice")
    g = b.finish([b.add1("add", [b.add1("add", [x, bias], name="a"), twice], name="b")])
    folded = fold_constants(g)
    assert [n.op for n in folded.nodes] == ["expand", "add", "add"]
    x_data = np.zeros((3, 4), F)
    np.testing.assert_array_equal(run_graph(folded, {"x": x_data})[0], np.full((3, 4), 2, F))


def _conv_graph(batch: Any) -> Graph:
    b = GraphBuilder("convs")
    x = b.input("x", (batch, 8, 16, 16), F)
    w = b.constant("w", rng.standard_normal((16, 8, 3, 3)).astype(F))
    y = b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="conv")
    y = b.add1("relu", [y], name="act")
    y = b.add1("pool2d", [y], {"kernel": [2, 2], "strides": [2, 2], "mode": "max"}, name="pool")
    return b.finish([y])


def test_blocked_layout_blocks_a_symbolic_batch_and_leaves_symbolic_channels() -> None:
    """The blocked layout reorders channels only: a symbolic batch (or image) is blocked
    as a static one is; channels known only at run time (a Concat with an input of
    ``c`` channels) cannot be, and the value is converted back to NCHW before them."""
    blocked = str(block_layouts(_conv_graph(B), 8))
    assert '"block": 8' in blocked and "float32[batch, 2, 16, 16, 8]" in blocked
    assert "float32[batch, 2, 8, 8, 8] = pool2d" in blocked
    one, static = block_layouts(_conv_graph(B), 8), block_layouts(_conv_graph(1), 8)
    assert [(n.op, [evaluate(d, {"batch": 1}) for d in n.outputs[0].shape])
            for n in one.nodes] == [(n.op, list(n.outputs[0].shape)) for n in static.nodes]
    b = GraphBuilder("concat")
    x = b.input("x", (B, 8, 16, 16), F)
    extra = b.input("extra", (B, symbol("c"), 16, 16), F)
    w = b.constant("w", rng.standard_normal((16, 8, 3, 3)).astype(F))
    y = b.add1("relu", [b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="conv")],
               name="act")
    g = block_layouts(b.finish([b.add1("concat", [y, extra], {"axis": 1}, name="cat")]), 8)
    text = str(g)
    assert "float32[batch, 2, 16, 16, 8] = relu" in text
    assert "float32[batch, c + 16, 16, 16] = concat" in text
    assert [n.op for n in g.nodes][-3:] == ["transpose", "reshape", "concat"]


def test_concat_views_leave_symbolic_concats_to_copy() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, B, 4), F)
    y = b.input("y", (1, 3, 4), F)
    parts = [b.add1("relu", [x], name="rx"), b.add1("exp", [y], name="ey")]
    g = b.finish([b.add1("exp", [b.add1("concat", parts, {"axis": 1}, name="cat")], name="o")])
    assert "float32[1, batch + 3, 4] = concat" in str(g)
    found = concat_views(g)
    assert found.views == {} and found.nodes == set()


def test_index_checks_skip_axes_of_symbolic_extent() -> None:
    b = GraphBuilder()
    data = b.input("data", (B, S, 4), F)
    ids = b.input("ids", (B, 2), "int64")
    picked = b.add1("gather", [data, ids], {"axis": 1}, name="pick")  # along seq: unchecked
    g = b.finish([picked])
    before = str(g)
    assert str(add_index_checks(g)) == before and g.checks == []

    b = GraphBuilder()
    table = b.input("table", (S, 10, 4), F)
    coords = b.input("coords", (B, 2), "int32")
    g = b.finish([b.add1("gather_nd", [table, coords], {}, name="nd")])
    checked = add_index_checks(g)
    assert len(checked.checks) == 1
    assert "ONNX allows [-seq, seq - 1] for axis 0, [-10, 9] for axis 1 of 'table' " \
           "float32[seq, 10, 4]" in checked.checks[0].message
    _round_trips(checked)
    # the flag alone (the gather's reference cannot run out-of-range indices)
    flag_only = Graph(checked.inputs, [n for n in checked.nodes if n.op != "gather_nd"],
                      [checked.checks[0].flag])
    table_data = np.zeros((5, 10, 4), F)

    def flagged(rows: list[list[int]]) -> int:
        coords_data = np.asarray(rows, np.int32)
        return int(run_graph(flag_only, {"table": table_data, "coords": coords_data})[0])

    assert flagged([[0, 3], [4, -10]]) == 0
    assert flagged([[0, 10]]) == 1  # the static axis is checked
    assert flagged([[7, 3]]) == 0  # the symbolic one is not (its kernel clamps)


def test_constant_indices_are_checked_only_along_static_axes() -> None:
    b = GraphBuilder()
    data = b.input("data", (B, 6), F)
    ids = b.constant("ids", np.asarray([[0, 9]], np.int64))
    g = b.finish([b.add1("gather_nd", [data, ids], {}, name="nd")])
    with pytest.raises(ModelError, match="an index in 'ids' is out of range"):
        add_index_checks(g.copy())
    ids.data = np.asarray([[900, 1]], np.int64)
    assert add_index_checks(g).checks == []


def test_the_interpreter_binds_symbols_from_the_inputs() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S), F)
    y = b.input("y", (S, B), F)
    g = b.finish([b.add1("add", [x, b.add1("transpose", [y], {"perm": [1, 0]}, name="t")],
                         name="sum")])
    out = run_graph(g, {"x": np.ones((2, 3), F), "y": np.ones((3, 2), F)})[0]
    assert out.shape == (2, 3)
    with pytest.raises(ModelError, match=r"input 'y' has seq = 2, but input 'x' has seq = 3"):
        run_graph(g, {"x": np.ones((2, 3), F), "y": np.ones((2, 2), F)})
    with pytest.raises(ModelError, match=r"input 'x' is float32\[batch, seq\]"):
        run_graph(g, {"x": np.ones(6, F), "y": np.ones((3, 2), F)})
