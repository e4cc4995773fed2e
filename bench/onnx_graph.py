"""A small helper to write ONNX graphs in code: nodes, seeded random weights, the model.

Used by :mod:`bench.models`. Names are generated (``conv_3``, ``W_12``...) so the model
builders read like the network they describe, not like bookkeeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["GraphBuilder", "ir_version_for"]

Shape = Sequence[int | str]


def ir_version_for(opset: int) -> int:
    """The IR version exporters pair with ``opset`` (readable by older onnxruntime too)."""
    return 7 if opset <= 12 else 8


class GraphBuilder:
    """Collects nodes and initializers of one ONNX graph.

    ``op`` adds a node and returns its output name(s); ``const`` and ``weight`` add
    initializers; ``model`` wraps everything in a checked ``ModelProto``.
    """

    def __init__(self, name: str, opset: int, seed: int = 0) -> None:
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.metadata: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._consts: dict[tuple[str, bytes, tuple[int, ...]], str] = {}

    # ---- names -----------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        """A new unique name ``prefix_N``."""
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}_{n}"

    # ---- graph inputs and outputs ----------------------------------------------------

    def input(self, name: str, shape: Shape, elem_type: int = TensorProto.FLOAT) -> str:
        """Declare a graph input."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(
        self, value: str, shape: Shape, elem_type: int = TensorProto.FLOAT, name: str | None = None
    ) -> str:
        """Declare ``value`` a graph output; ``name`` renames it (``value`` must then be the
        output of a node no other node reads yet, e.g. the last one added)."""
        if name is not None and name != value:
            for node in self.nodes:
                for i, out in enumerate(node.output):
                    if out == value:
                        node.output[i] = name
            value = name
        self.outputs.append(helper.make_tensor_value_info(value, elem_type, list(shape)))
        return value

    # ---- initializers ----------------------------------------------------------------

    def const(self, array: Any, name: str | None = None, dtype: Any = None) -> str:
        """An initializer holding ``array``; identical unnamed constants are shared."""
        a = np.asarray(array, dtype=dtype)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        if name is None:
            key = (a.dtype.str, a.tobytes(), a.shape)
            if key in self._consts:
                return self._consts[key]
            name = self.fresh("const")
            self._consts[key] = name
        self.initializers.append(numpy_helper.from_array(a, name))
        return name

    def int64s(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (shapes, axes, perms passed as inputs)."""
        return self.const(np.asarray(values, dtype=np.int64))

    def scalar(self, value: float) -> str:
        """A 0-d float32 constant."""
        return self.const(np.asarray(value, dtype=np.float32))

    def weight(self, shape: Sequence[int], std: float, prefix: str = "W") -> str:
        """A float32 initializer drawn from N(0, std²)."""
        return self.const(self.normal(shape, std), name=self.fresh(prefix))

    def normal(self, shape: Sequence[int], std: float, mean: float = 0.0) -> np.ndarray:
        """A float32 array drawn from N(mean, std²) (not added to the graph)."""
        return (mean + std * self.rng.standard_normal(tuple(shape))).astype(np.float32)

    def uniform(self, shape: Sequence[int], low: float, high: float) -> np.ndarray:
        """A float32 array drawn from U(low, high) (not added to the graph)."""
        return self.rng.uniform(low, high, tuple(shape)).astype(np.float32)

    # ---- nodes -----------------------------------------------------------------------

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> Any:
        """Add a node; return its output name, or a list of names when ``n_out > 1``."""
        prefix = op_type.lower()
        node_name = self.fresh(prefix)
        outs = [f"{node_name}_out{i}" if n_out > 1 else f"{node_name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=node_name, **attrs))
        return outs if n_out > 1 else outs[0]

    # ---- the model -------------------------------------------------------------------

    def model(self, doc: str = "") -> onnx.ModelProto:
        """The finished model (ONNX checker run, with full shape inference)."""
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, initializer=self.initializers
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            producer_name="tensorsmith-bench",
            ir_version=ir_version_for(self.opset),
            doc_string=doc,
        )
        helper.set_model_props(model, self.metadata)
        onnx.checker.check_model(model, full_check=True)
        return model
