"""Helpers for the frontend tests: tiny ONNX models, the ORT comparison, and a NumPy
evaluator of tensor expressions that checks each op's compute against its reference.

Every converter test goes through :func:`check`: import the model, run the graph with the
interpreter, run the model with onnxruntime, compare; then evaluate every node's compute
definition on the node's actual inputs and compare it with the reference. The second step
checks the lowering side of the ops the importer emits, without a code generator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import te
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Reduce, Select, Var

NP_TO_ONNX = {np.dtype(k): v for k, v in {
    "float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16,
    "float64": onnx.TensorProto.DOUBLE, "int64": onnx.TensorProto.INT64,
    "int32": onnx.TensorProto.INT32, "int8": onnx.TensorProto.INT8,
    "uint8": onnx.TensorProto.UINT8, "uint16": onnx.TensorProto.UINT16,
    "uint32": onnx.TensorProto.UINT32, "uint64": onnx.TensorProto.UINT64,
    "bool": onnx.TensorProto.BOOL}.items()}

Spec = tuple[str, Sequence[int | str] | None]  # (dtype, shape)


def make_model(nodes: list[onnx.NodeProto], inputs: Mapping[str, Spec],
               outputs: Mapping[str, str] | Sequence[str],
               inits: Mapping[str, np.ndarray] | None = None, opset: int = 17,
               extra_opsets: Mapping[str, int] | None = None) -> onnx.ModelProto:
    """A model; ``outputs`` maps names to dtypes (a plain list means all float32)."""
    if not isinstance(outputs, Mapping):
        outputs = {name: "float32" for name in outputs}
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(d)], s)
         for n, (d, s) in inputs.items()],
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(d)], None)
         for n, d in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()])
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = min(max(helper.find_min_ir_version_for(opsets[:1], True), 4), 10)
    # graph outputs need a shape to pass the checker: let ONNX's inference fill them in
    inferred = onnx.shape_inference.infer_shapes(m, data_prop=True)
    for out, inf in zip(m.graph.output, inferred.graph.output):
        out.CopyFrom(inf)
        if not out.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.dim.add().dim_param = "unknown"
    return m


def one_node(op: str, inputs: Mapping[str, Spec], outputs: Mapping[str, str] | Sequence[str],
             inits: Mapping[str, np.ndarray] | None = None, opset: int = 17,
             **attrs: Any) -> onnx.ModelProto:
    """A model of a single node named 'n' reading ``inputs`` (then ``inits``) in order."""
    names = [*inputs, *(inits or {})]
    outs = list(outputs)
    node = helper.make_node(op, names, outs, name="n", **attrs)
    return make_model([node], inputs, outputs, inits, opset)


def rand(*shape: int, dtype: str = "float32", seed: int = 0, low: float = -2.0,
         high: float = 2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(int(low) - 3, int(high) + 4, shape).astype(dtype)


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {k: np.asarray(v) for k, v in feeds.items()})


def check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
          shape: Mapping[str, Sequence[int]] | None = None, atol: float = 1e-5,
          computes: bool = True) -> Graph:
    """Import ``model``; its interpreter results must match onnxruntime's."""
    graph, params = from_onnx(model, shape)
    assert [v.name for v in graph.outputs] == [o.name for o in model.graph.output]
    assert [v.name for v in graph.inputs] == [
        i.name for i in model.graph.input if i.name not in params]
    got = run_graph(graph, feeds)
    want = ort_run(model, feeds)
    assert len(got) == len(want)
    for name, g, w in zip([o.name for o in model.graph.output], got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype}, onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"{name}: shape {g.shape}, onnxruntime {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=0, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    if computes:
        check_computes(graph, feeds)
    return graph


# -- tensor-expression evaluation ------------------------------------------------------

def check_computes(graph: Graph, feeds: Mapping[str, np.ndarray], atol: float = 1e-5) -> None:
    """Every node's compute, evaluated with NumPy, equals its reference output."""
    values = run_graph(graph, feeds, keep_all=True)
    env = {v.name: np.asarray(feeds[v.name], dtype=v.dtype).reshape(v.shape)
           for v in graph.inputs}
    env.update(values)  # type: ignore[arg-type]
    for node in graph.nodes:
        args = [v.data if v.is_constant else env[v.name] for v in node.inputs]
        opdef = get_op(node.op)
        assert opdef.compute is not None, f"{node.op} has no compute"
        holders = [te.placeholder(v.shape, v.dtype, f"in{i}") for i, v in enumerate(node.inputs)]
        types = [TensorType(v.shape, v.dtype) for v in node.outputs]
        outs = opdef.compute(holders, node.attrs, types, "out")
        for t, v in zip(outs, node.outputs):
            got = evaluate(t, {h.uid: a for h, a in zip(holders, args)})
            want = np.asarray(env[v.name])
            assert got.shape == want.shape, f"{node}: compute shape {got.shape} vs {want.shape}"
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got.astype(want.dtype), want, rtol=1e-5, atol=atol,
                                           err_msg=f"compute of {node}")
            else:
                np.testing.assert_array_equal(got.astype(want.dtype), want,
                                              err_msg=f"compute of {node}")


_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
    "min": np.minimum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and,
    "or": np.logical_or, "pow": np.power, "floordiv": np.floor_divide, "floormod": np.mod,
    "fmod": np.fmod, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
    "bitxor": np.bitwise_xor, "shl": np.left_shift, "shr": np.right_shift,
}
_CALLS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
    "iabs": np.abs, "floor": np.floor, "ceil": np.ceil, "sin": np.sin, "cos": np.cos,
    "erf": np.vectorize(math.erf, otypes=[np.float64]), "round": np.round, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def evaluate(t: te.Tensor, placeholders: dict[int, np.ndarray],
             cache: dict[int, np.ndarray] | None = None) -> np.ndarray:
    """The whole tensor ``t`` at once: every index variable is a broadcast ``arange``."""
    cache = {} if cache is None else cache
    if t.op is None:
        return placeholders[t.uid]
    if t.uid in cache:
        return cache[t.uid]
    body = t.op.body
    axes = list(t.op.axes) + list(body.axes if isinstance(body, Reduce) else ())
    ndim = len(axes)
    grid = {id(a.var): np.arange(a.extent, dtype=np.int64).reshape(
        [a.extent if j == i else 1 for j in range(ndim)]) for i, a in enumerate(axes)}
    inner = body.body if isinstance(body, Reduce) else body
    with np.errstate(all="ignore"):
        value = _expr(inner, grid, placeholders, cache)
        value = np.broadcast_to(value, [a.extent for a in axes])
        if isinstance(body, Reduce):
            n = len(t.op.axes)
            value = _REDUCE[body.combiner](value, axis=tuple(range(n, ndim)))
    result = np.asarray(value).astype(t.dtype)
    cache[t.uid] = result
    return result


def _expr(e: Expr, grid: dict[int, np.ndarray], ph: dict[int, np.ndarray],
          cache: dict[int, np.ndarray]) -> np.ndarray:
    def ev(x: Expr) -> np.ndarray:
        return _expr(x, grid, ph, cache)

    if isinstance(e, Const):
        return np.asarray(e.value, dtype=e.dtype)
    if isinstance(e, Var):
        return grid[id(e)]
    if isinstance(e, Binary):
        a, b = ev(e.a), ev(e.b)
        if e.op == "div":
            r = np.true_divide(a, b) if e.dtype.startswith("float") else np.floor_divide(a, b)
        else:
            r = _BINARY[e.op](a, b)
        return np.asarray(r).astype(e.dtype)
    if isinstance(e, Call):
        args = [ev(a) for a in e.args]
        if e.fn == "bitcast":
            return np.ascontiguousarray(args[0]).view(e.dtype)
        return np.asarray(_CALLS[e.fn](*args)).astype(e.dtype)
    if isinstance(e, Cast):
        return ev(e.value).astype(e.dtype)
    if isinstance(e, Select):
        return np.where(ev(e.cond), ev(e.a), ev(e.b)).astype(e.dtype)
    if isinstance(e, Load):
        assert isinstance(e.buffer, te.Tensor)
        data = evaluate(e.buffer, ph, cache)
        idx = np.broadcast_arrays(*[ev(i) for i in e.indices])
        for d, (i, n) in enumerate(zip(idx, data.shape)):
            # loads must stay in bounds even where a select discards them
            assert i.size == 0 or (i.min() >= 0 and i.max() < n), (
                f"load of {e.buffer.name} axis {d} (size {n}) at [{i.min()}, {i.max()}]")
        return data[tuple(idx)] if idx else data[()]
    raise TypeError(f"cannot evaluate {type(e).__name__}")
