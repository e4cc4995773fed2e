"""Reduced-precision compute: a float32 graph rewritten to store and move its tensors
as float16 or bfloat16 (``build(..., precision="fp16" | "bf16")``).

What runs in the 16-bit type, and why:

* convolutions and matrix products (:data:`PRODUCTS`) read 16-bit inputs and weights;
  their kernels widen each operand as they load it and sum in float32
  (``dtypes.accumulator``), rounding once at the end. That is where a model's time and
  bytes go: half the bytes of every weight and activation they read.
* ops that only move or pick values (:data:`EXACT`: reshapes, slices, max pooling,
  ReLU...) are exact in any float type, and single roundings of well-conditioned
  arithmetic (:data:`ROUNDED`: a bias add, a residual add, a scale by a constant) lose
  at most half an ulp of the 16-bit type. Both run reduced only where every tensor they
  read that is not a weight already is: a residual add of a float32 value stays float32
  rather than rounding it.
* everything else keeps float32: reductions (mean, sum: LayerNorm's statistics),
  softmax, exp/log/pow/sqrt/erf/tanh, division by a tensor or a small constant, and any
  op not named here. Their 16-bit inputs are widened first.

Weights read in the 16-bit type are converted here, at build time, so the artifact
stores them at half the size. The graph's inputs and outputs keep their float32 type:
a cast after each input that a 16-bit op reads, a cast back before each output.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import REDUCED_FLOATS
from ..errors import OptionError
from ..graph import Graph, Node, Value
from .rewrite import fresh_names

#: ``precision`` option values -> the dtype tensors are stored in (None: as they are)
PRECISIONS: dict[str, str | None] = {"fp32": None, "fp16": "float16", "bf16": "bfloat16"}

#: Ops whose kernels read 16-bit operands and accumulate in float32 (ops/conv.py, nn.py,
#: einsum.py): always reduced.
PRODUCTS = frozenset({"conv2d", "matmul", "einsum"})
#: Ops that move, pick or compare values without rounding them.
EXACT = frozenset({"reshape", "transpose", "slice", "concat", "copy", "pad", "expand",
                   "gather", "gather_elements", "gather_nd", "where", "relu", "max", "min",
                   "neg", "abs", "reduce_max", "reduce_min"})
#: One well-conditioned rounding per element.
ROUNDED = frozenset({"add", "sub", "mul", "clip", "leaky_relu"})
#: A divisor of at least this magnitude (a constant) makes a division a safe scaling.
MIN_DIVISOR = 1.0


def precision_dtype(precision: str) -> str | None:
    """The dtype of ``precision`` (``fp32``, ``fp16``, ``bf16``); None for float32."""
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise OptionError(f"precision {precision!r} is not one the compiler takes "
                          f"(choose one of {', '.join(PRECISIONS)})") from None


def reduce_precision(graph: Graph, dtype: str) -> Graph:
    """Rewrite ``graph`` (in place) to compute in ``dtype`` where it is safe (see the
    module docstring); float64 and non-float tensors are left alone."""
    return _Rewrite(graph, dtype).run()


def widen_inputs_first(graph: Graph) -> Graph:
    """Mark (attribute ``widen_input``) the convolutions and matrix products whose
    activation is a 16-bit float, so that their kernel converts it to float32 once, by a
    stage of its own, rather than at every read (ops/conv.py, ops/nn.py). For CPUs
    (build adds this for the ``cpu`` family): their register tiles broadcast each
    element of the activation to a row of multiply-adds, and converting it there ran
    at half their rate. A GPU's products read 16-bit operands directly (cooperative
    matrices take them as they are), so GPU kernels get no such stage."""
    for node in graph.nodes:
        if node.op in ("conv2d", "matmul") and node.inputs[0].dtype in REDUCED_FLOATS:
            node.attrs = {**node.attrs, "widen_input": True}
    return graph


def runs_reduced(node: Node, reduced: str) -> bool:
    """Whether ``node`` runs in the 16-bit type, given its inputs' current dtypes."""
    if node.op in PRODUCTS:
        return True
    if node.op == "pool2d":
        safe = node.attrs.get("mode") == "max"
    elif node.op == "div":
        d = node.inputs[1]
        safe = (d.is_constant and d.data is not None and d.data.size > 0
                and bool(np.all(np.abs(d.data.astype(np.float64)) >= MIN_DIVISOR)))
        return safe and _floats_reduced(node.inputs[:1], reduced)
    else:
        safe = node.op in EXACT or node.op in ROUNDED
    if not safe:
        return False
    return _floats_reduced(node.inputs, reduced, constants_only=node.op not in ROUNDED)


def _floats_reduced(inputs: list[Value], reduced: str, constants_only: bool = True) -> bool:
    """Every non-constant float input already in the 16-bit type; inputs that are all
    constants count as reduced where ``constants_only`` (an embedding table gathered)."""
    live = [v for v in inputs if v.dtype in ("float32", reduced) and not v.is_constant]
    if not live:
        return constants_only and any(v.dtype == "float32" for v in inputs)
    return all(v.dtype == reduced for v in live)


class _Rewrite:
    """One walk over the nodes in order, deciding each node's type from its inputs'
    (already decided) and building the new node list with the casts it needs."""

    def __init__(self, graph: Graph, dtype: str) -> None:
        self.graph, self.dtype = graph, dtype
        self.fresh = fresh_names(graph)
        self.converted: dict[tuple[int, str], Value] = {}
        self.nodes: list[Node] = []
        #: values this rewrite made 16-bit (a model's own float16 tensors stay as they are)
        self.lowered: set[int] = set()

    def run(self) -> Graph:
        g, low = self.graph, self.dtype
        for node in g.nodes:
            if node.op == "cast":
                pass  # a model's own conversion reads a 16-bit value as exactly as a widened one
            elif runs_reduced(node, low):
                node.inputs = [self.as_dtype(v, low) if v.dtype == "float32" else v
                               for v in node.inputs]
                for v in node.outputs:
                    if v.dtype == "float32":
                        v.dtype = low
                        self.lowered.add(v.uid)
            else:
                node.inputs = [self.as_dtype(v, "float32") if v.uid in self.lowered else v
                               for v in node.inputs]
            self.nodes.append(node)
        outputs = []
        for v in g.outputs:
            if v.uid in self.lowered:
                # the output keeps its name (the artifact's API) and float32 type
                inner_name, v.name = v.name, self.fresh(f"{v.name}_{_short(low)}")
                out = Value(inner_name, v.shape, "float32")
                self.emit_cast(v, out)
                outputs.append(out)
            else:
                outputs.append(v)
        g.nodes, g.outputs = self.nodes, outputs
        g.verify()
        return g

    def as_dtype(self, v: Value, dtype: str) -> Value:
        """``v`` in ``dtype``: a converted copy of a weight, or a cast node's output, made
        once per value and dtype."""
        key = (v.uid, dtype)
        got = self.converted.get(key)
        if got is None:
            name = self.fresh(f"{v.name}_{_short(dtype)}")
            if v.is_constant:
                assert v.data is not None
                got = Graph.constant(name, v.data.astype(dtype))
            else:
                got = Value(name, v.shape, dtype)
                self.emit_cast(v, got)
            if dtype == self.dtype:
                self.lowered.add(got.uid)
            self.converted[key] = got
        return got

    def emit_cast(self, src: Value, out: Value) -> None:
        node = Node("cast", [src], [out], {"dtype": out.dtype}, self.fresh(f"cast_{out.name}"))
        out.producer = node
        self.nodes.append(node)


def _short(dtype: str) -> str:
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[dtype]
