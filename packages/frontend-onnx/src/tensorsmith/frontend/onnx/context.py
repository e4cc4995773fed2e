"""What a converter sees: the node it converts, and a builder that names things well.

:class:`ImportState` is the model-wide state (builder, ONNX name -> Value map, the set of
names already taken). :class:`NodeContext` wraps one node: typed attribute access,
inputs as Values, constant inputs as arrays, and :meth:`NodeContext.add`, which appends
a canonical op with a fresh name and this node's place in every error message.

``add`` folds ops whose inputs are all small constants right away. Exported models
compute shapes at run time (``Shape -> Gather -> Concat -> Reshape``); with static shapes
those chains are constants, and folding them here is what lets ``Reshape`` see the
target shape it needs as a plain list. Float initializers are never folded into new
constants here: ``build(params=...)`` may rebind them by name, so arithmetic on weights
(a transposed Gemm weight, BatchNorm's scale) stays in the graph for the folding pass,
which runs after the binding.

With symbolic sizes the same chains hold symbols: ``Shape(x)`` of an ``x`` of shape
``[batch, seq, 64]`` is the *shape value* ``[batch, seq, 64]``, kept at compile time only
(see :mod:`.shape_values`), and ``add`` folds the shape arithmetic on it the same way, so
that converters read targets as dims with :meth:`NodeContext.dims`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from tensorsmith.ir.builder import GraphBuilder
from tensorsmith.ir.errors import ModelError, ShapeError
from tensorsmith.ir.graph import Node, Value
from tensorsmith.ir.host_sizes import HostExpr, RunTimeValueError, where
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.symbolic import Dim, Sym, SymbolicDimError, is_static, shape_text

from . import run_time_values, shape_values
from .dtypes import check_numpy_dtype

FOLD_LIMIT = 4096
"""Ops whose inputs and outputs are constants of at most this many elements are folded at
import; larger constant work (transposing a weight) is left to the folding pass."""

MAX_CONSTANT_BYTES = 2**31
"""The most bytes of one constant the importer computes (ConstantOfShape, Range, EyeLike,
Resize's weights): 2 GiB, the most a whole ONNX protobuf holds, so no exporter writes a
larger constant into a graph. A larger one comes from a wrong or hostile shape, and
building it would exhaust memory long before code generation could refuse it."""


class ConstantRequiredError(ModelError):
    """A converter needs a value at import time (a Reshape's shape, a Slice's bounds) that
    the model computes at run time; ``value_name`` is the ONNX name of that value, so a
    caller that knows it (ONNX's backend tests feed such operands as graph inputs) can
    freeze it into the model and import again."""

    def __init__(self, message: str, value_name: str) -> None:
        super().__init__(message)
        self.value_name = value_name


def constant_value(name: str, data: np.ndarray) -> Value:
    """A constant Value holding ``data`` itself when it is C-contiguous.

    Not ``Graph.constant``: its ``np.ascontiguousarray`` turns 0-d arrays (ONNX scalars:
    Gather indices, Clip bounds, shape arithmetic) into shape (1,).
    """
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    return Value(name, tuple(int(d) for d in data.shape), str(data.dtype), data=data)


class ImportState:
    """Model-wide: the builder, the values bound to ONNX names, names in use."""

    def __init__(self, graph_name: str, reserved: set[str]) -> None:
        self.builder = GraphBuilder(graph_name or "main")
        self.env: dict[str, Value] = {}
        self.reserved = set(reserved)  # every ONNX value name: never given to our values
        self.used: set[str] = set(reserved)
        self.weights: set[int] = set()  # uids of initializers (build may rebind them)
        # uid -> the entries (object array of dims) of each shape value: a small int
        # tensor computed from symbolic sizes, with no data and no producer
        self.shape_values: dict[int, np.ndarray] = {}
        # uid -> the entries of a small tensor known only at run time (a graph input, or
        # shape arithmetic on one) as host expressions (run_time_values.py); the Value
        # itself is ordinary run-time data
        self.run_time: dict[int, np.ndarray] = {}
        # uid of a QuantizeLinear's result -> (its rounded x / scale in float, its scale,
        # its zero point as an int, its integer dtype): a DequantizeLinear of it with the
        # same parameters is then a clip of that (converters/quantize.py)
        self.quantized: dict[int, tuple[Value, Value, int, str]] = {}
        # ONNX names already given to a value: a subgraph converted more than once (an
        # unrolled Scan's body) produces the same ONNX names again, and its later values
        # keep their fresh names
        self.named: set[str] = set()
        # converts a subgraph (an If branch, a Scan step) in place, with values for its
        # inputs by name, and returns its outputs; the importer sets it
        self.inline: Callable[..., list[Value]] | None = None

    def fresh(self, base: str) -> str:
        """A name taken by no ONNX value and no value made so far."""
        base = base or "v"
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


class NodeContext:
    """One ONNX node during conversion."""

    def __init__(self, state: ImportState, node: onnx.NodeProto, index: int, opset: int,
                 attrs: dict[str, Any]) -> None:
        self.state = state
        self.node = node
        self.op_type = node.op_type
        self.opset = opset
        self.attrs = attrs
        self.name = node.name or f"{node.op_type}_{index}"
        first_out = next((o for o in node.output if o), "")
        self.where = (f"node '{node.name}' ({node.op_type}, opset {opset})" if node.name else
                      f"node #{index} ({node.op_type}, opset {opset}, output '{first_out}')")
        self.inputs: list[Value | None] = [state.env[n] if n else None for n in node.input]
        self.created: dict[int, Value] = {}  # uid -> values made by this node's converter
        self.nodes: list[Node] = []
        self._base = first_out or self.name

    # -- attributes and inputs --------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def required_attr(self, name: str) -> Any:
        if name not in self.attrs:
            raise self.error(f"attribute '{name}' is required")
        return self.attrs[name]

    def input(self, i: int) -> Value:
        v = self.inputs[i] if i < len(self.inputs) else None
        if v is None:
            raise self.error(f"input {i} is required")
        return v

    def optional_input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def constant(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as an array: it must be known at import time (``what`` names it)."""
        v = self.input(i)
        values = self.state.shape_values.get(v.uid)
        if values is not None:
            raise SymbolicDimError(
                f"{self.where}: input {i} ({what}) must be known when the model is compiled, "
                f"but '{self.node.input[i]}' is {entries_text(values)}, computed from sizes "
                f"known only at run time; {FIX_SIZES}")
        if v.data is None:
            raise ConstantRequiredError(
                f"{self.where}: input {i} ({what}) must be known when the model is compiled "
                f"(an initializer, a Constant, or computed from shapes), but "
                f"'{self.node.input[i]}' {self._runtime_origin(v)}", self.node.input[i])
        return v.data

    def run_time_values(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s entries (an object array): ints and floats where it is a constant,
        sizes for a shape value, and host expressions (host_sizes.HostExpr) where the run
        gives them in a small input; a ConstantRequiredError, as :meth:`constant`, else.
        For converters that turn such values into sizes with :meth:`size`."""
        v = self.input(i)
        entries = self.state.run_time.get(v.uid)
        if entries is None:
            entries = self.state.shape_values.get(v.uid)
        if entries is not None:
            return entries
        return np.asarray(self.constant(i, what)).astype(object)

    def size(self, value: Any, hint: str) -> Dim:
        """``value`` (an int, a size, or a host expression) as a dim: a host expression
        becomes a size computed before each run, named after ``hint``."""
        if isinstance(value, np.generic):
            value = value.item()
        return self.state.builder.size(value, f"{self._base}_{hint}", self.where)

    def counted_symbol(self, hint: str) -> Sym:
        """A symbol for a size a kernel of this node will count (the boxes
        NonMaxSuppression keeps): put ``symbol - 1`` in the counting op's attrs, then name
        the count with :meth:`counted`."""
        return self.state.builder.counted_symbol(f"{self._base}_{hint}")

    def counted(self, counted: Sym, count: Value, bound: Dim) -> Dim:
        """``counted`` is learned from ``count`` (an int64 scalar this node's kernel
        writes) once it has run, at most ``bound`` (builder.counted_size); the size it
        gives, ``counted - 1``."""
        return self.state.builder.counted_size(counted, count, bound, self.where)

    def require(self, condition: Any, why: str) -> None:
        """Refuse the run where ``condition`` (a host expression of 0 or 1) is 0, with
        ``why`` after this node's name (an axis the run gives must be in range); checked
        now where it is a Python bool."""
        if not isinstance(condition, HostExpr):
            if not condition:
                raise self.error(why)
            return
        self.state.builder.size(where(condition, 1, 0), f"{self._base}_valid",
                                f"{self.where}: {why}")

    def dims(self, i: int, what: str) -> list[Dim]:
        """Input ``i`` as a list of dims (a target shape, slice bounds): a constant, or a
        shape value whose entries may be symbolic sizes."""
        v = self.input(i)
        values = self.state.shape_values.get(v.uid)
        if values is None:
            return [int(d) for d in np.asarray(self.constant(i, what)).reshape(-1)]
        if not all(isinstance(d, int | Sym) and not isinstance(d, bool)
                   for d in values.reshape(-1)):
            raise self.error(f"input {i} ({what}) must hold integers, got "
                             f"{entries_text(values)}")
        return list(values.reshape(-1))

    def optional_dims(self, i: int, what: str) -> list[Dim] | None:
        return None if self.optional_input(i) is None else self.dims(i, what)

    def _runtime_origin(self, v: Value) -> str:
        """Why ``v`` is known only at run time: the graph inputs whose values it is
        computed from, found by walking its producers."""
        graph_inputs = {x.uid: x.name for x in self.state.builder.inputs}
        if v.uid in graph_inputs:
            return "is a graph input, whose values are known only at run time"
        found: dict[int, str] = {}
        seen: set[int] = set()
        todo = [v]
        while todo:
            x = todo.pop()
            if x.uid in seen:
                continue
            seen.add(x.uid)
            if x.uid in graph_inputs:
                found[x.uid] = graph_inputs[x.uid]
            elif x.producer is not None:
                todo += x.producer.inputs
        if not found:
            return "is only known at run time"
        names = sorted(found.values())
        listed = ", ".join(f"'{n}'" for n in names)
        return (f"is computed at run time from the values of graph input"
                f"{'s' if len(names) > 1 else ''} {listed}")

    def optional_constant(self, i: int, what: str) -> np.ndarray | None:
        return None if self.optional_input(i) is None else self.constant(i, what)

    def output_wanted(self, i: int) -> bool:
        return i < len(self.node.output) and bool(self.node.output[i])

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    # -- building -------------------------------------------------------------------
    def error(self, message: str) -> ModelError:
        """A ModelError naming this node; ``raise ctx.error(...)``."""
        return ModelError(f"{self.where}: {message}")

    def check_constant(self, shape: Sequence[Dim], dtype: str, what: str) -> None:
        """Refuse, before it is built, a constant over :data:`MAX_CONSTANT_BYTES`."""
        size = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
        if size > MAX_CONSTANT_BYTES:
            raise self.error(f"{what} would be a {dtype}{[int(d) for d in shape]} constant of "
                             f"{size} bytes, over the import limit of {MAX_CONSTANT_BYTES} "
                             "bytes (2 GiB)")

    def const(self, data: Any, dtype: str | None = None, hint: str = "const") -> Value:
        """A new constant value (a scalar broadcasts against any tensor)."""
        array = np.asarray(data, dtype=dtype)
        check_numpy_dtype(str(array.dtype), f"{self.where}: constant")
        self.check_constant(array.shape, str(array.dtype), "the result")
        v = constant_value(self.state.fresh(f"{self._base}_{hint}"), array)
        self.created[v.uid] = v
        return v

    def scalar(self, value: float | int | bool, like: Value) -> Value:
        """A 0-d constant of ``like``'s dtype."""
        return self.const(np.asarray(value).astype(like.dtype), hint="scalar")

    def add(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None
            ) -> Value:
        return self.add_multi(op, inputs, attrs)[0]

    def add_multi(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None
                  ) -> list[Value]:
        """Append canonical ``op``; folded to constants when every input is a small constant."""
        attrs = dict(attrs or {})
        if inputs and all(v.data is not None and v.data.size <= FOLD_LIMIT for v in inputs):
            folded = self._fold(op, inputs, attrs)
            if folded is not None:
                return folded
        if any(v.uid in self.state.shape_values for v in inputs):
            return self._fold_shape_values(op, inputs, attrs)
        outs = self.state.builder.add(
            op, inputs, attrs, name=f"{self.name}/{op}",
            out_names=[self.state.fresh(f"{self._base}_{op}")], where=self.where)
        node = self.state.builder.nodes[-1]
        self.nodes.append(node)
        for v in outs:
            self.created[v.uid] = v
        if any(v.uid in self.state.run_time for v in inputs):
            self._follow_run_time(op, inputs, attrs, outs)
        return outs

    def _follow_run_time(self, op: str, inputs: list[Value], attrs: dict[str, Any],
                         outs: list[Value]) -> None:
        """Record the entries of ``outs`` as host expressions where ``op`` can be followed
        on its inputs' (run_time_values.py)."""
        entries = [self.state.run_time.get(v.uid) if v.uid in self.state.run_time
                   else self._entries(v) for v in inputs]
        if any(e is None for e in entries) or not all(is_static(v.shape) for v in outs):
            return
        results = run_time_values.evaluate(
            op, entries, attrs, [TensorType(v.shape, v.dtype) for v in outs])  # type: ignore[arg-type]
        for v, r in zip(outs, results or []):
            self.state.run_time[v.uid] = r

    def _fold(self, op: str, inputs: list[Value], attrs: dict[str, Any]) -> list[Value] | None:
        if any(v.uid in self.state.weights and not v.dtype.startswith(("int", "uint", "bool"))
               for v in inputs):
            return None
        opdef = get_op(op)
        types = self._infer(op, inputs, attrs)
        if any(not is_static(t.shape) or math.prod(t.shape) > FOLD_LIMIT for t in types):
            return None  # large, or of a symbolic size (an expand to a run-time shape)
        with np.errstate(all="ignore"):
            results = opdef.reference([v.data for v in inputs], attrs)  # type: ignore[misc]
        return [self.const(np.asarray(r).astype(t.dtype, copy=False).reshape(t.shape),
                           hint=op) for r, t in zip(results, types)]

    def _fold_shape_values(self, op: str, inputs: list[Value], attrs: dict[str, Any]
                           ) -> list[Value]:
        """Fold ``op`` on shape values and small constants (:mod:`.shape_values`); an
        output without symbols becomes a plain constant again. A shape value cannot
        become run-time data (no graph op reads a size), so anything else is an error."""
        shape_value = next(v for v in inputs if v.uid in self.state.shape_values)
        entries = [self._entries(v) for v in inputs]
        types = self._infer(op, inputs, attrs)
        results = None
        if all(e is not None for e in entries):
            try:
                results = shape_values.evaluate(op, entries, attrs, types)  # type: ignore[arg-type]
            except TypeError as e:  # arithmetic a size does not take (a float factor)
                raise SymbolicDimError(
                    f"{self.where}: {op} of {self._shape_value_text(shape_value)} cannot be "
                    f"computed when the model is compiled ({e}); {FIX_SIZES}") from None
            except SymbolicDimError as e:
                raise SymbolicDimError(f"{self.where}: {e}; {FIX_SIZES}") from None
        if results is None:
            run_time = [self.state.run_time[v.uid] for v in inputs if v.uid in self.state.run_time]
            if run_time:  # the backend may then specialize on those inputs' values
                names = frozenset().union(*(e.inputs for r in run_time for e in r.reshape(-1)
                                            if isinstance(e, HostExpr)))
                raise RunTimeValueError(
                    f"{self.where}: {op} of {self._shape_value_text(shape_value)} and values "
                    "known only at run time is not computed on the host", names)
            raise SymbolicDimError(
                f"{self.where}: {self._shape_value_text(shape_value)} is used as run-time "
                f"data of {op}; sizes known only at run time enter only the shape "
                f"arithmetic done when the model is compiled "
                f"({', '.join(shape_values.FOLDED_OPS)}), since no graph op reads a size at "
                f"run time; {FIX_SIZES}")
        return [self.shape_value(r, t.dtype, hint=op) for r, t in zip(results, types)]

    def shape_value(self, entries: np.ndarray, dtype: str, hint: str = "dims") -> Value:
        """A value of ``entries`` (an object array of ints, bools, floats and dims): a
        plain constant when no entry is symbolic, else a shape value."""
        if not shape_values.has_symbols(entries):
            return self.const(entries.astype(dtype), hint=hint)
        v = Value(self.state.fresh(f"{self._base}_{hint}"),
                  tuple(int(d) for d in entries.shape), dtype)
        self.state.shape_values[v.uid] = entries
        self.created[v.uid] = v
        return v

    def _entries(self, v: Value) -> np.ndarray | None:
        values = self.state.shape_values.get(v.uid)
        if values is not None:
            return values
        if v.data is not None and v.data.size <= FOLD_LIMIT:
            return v.data.astype(object)
        return None

    def _shape_value_text(self, v: Value) -> str:
        onnx_name = next((n for n, x in zip(self.node.input, self.inputs)
                          if x is not None and x.uid == v.uid), v.name)
        return (f"'{onnx_name}' ({entries_text(self.state.shape_values[v.uid])}, "
                "computed from sizes known only at run time)")

    def _infer(self, op: str, inputs: list[Value], attrs: dict[str, Any]) -> list[TensorType]:
        try:
            return get_op(op).infer([TensorType(v.shape, v.dtype) for v in inputs], attrs)
        except ShapeError as e:  # the same class: a SymbolicDimError stays one
            shapes = ", ".join(f"{v.dtype}{shape_text(v.shape)}" for v in inputs)
            raise type(e)(f"{self.where}: {e} (inputs {shapes})") from None

    # -- after the converter ----------------------------------------------------------
    def finish_names(self, outputs: Sequence[Value | None]) -> None:
        """Give this node's ONNX output names to the values made for them.

        Values the converter passed through (Identity returns its input) keep their names;
        the ONNX name then refers to them in the importer's environment only.
        """
        producers: dict[int, Node] = {}
        for n in self.nodes:
            for v in n.outputs:
                producers[v.uid] = n
        for i, out in enumerate(outputs):
            name = self.node.output[i] if i < len(self.node.output) else ""
            if out is None or not name or out.uid not in self.created:
                continue
            if out.name in self.state.reserved:  # already named for an earlier output
                continue
            if name in self.state.named:  # a subgraph converted again: keep the fresh name
                continue
            self.state.named.add(name)
            out.name = name
            if out.uid in producers:
                producers[out.uid].name = self.name if len(outputs) == 1 else f"{self.name}:{i}"


FIX_SIZES = ("fix the sizes with --input-shape or --dim (from_onnx(shapes=...) or "
             "from_onnx(dims=...))")


def entries_text(values: np.ndarray) -> str:
    """A shape value as text: ``[batch, seq*4]``, or ``batch`` for a 0-d one."""
    if values.ndim == 0:
        return str(values.item())
    return shape_text(list(values.reshape(-1)))
