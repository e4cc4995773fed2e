"""``from_onnx``: an ONNX model in, a graph-IR :class:`Graph` and its params out.

The order of checks is the order a user wants to learn things in: the file is not
there or not ONNX; the checker rejects it; its opset is out of range; which operators
are missing (all of them at once); which input shapes to give; then conversion, where
any error names the ONNX node, its op type and opset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from tensorsmith.ir.errors import ModelError, UnsupportedOpError
from tensorsmith.ir.graph import Graph, Value
from tensorsmith.ir.symbolic import SymbolicDimError
from tensorsmith.runtime.errors import TensorsmithError

from . import inputs as input_shapes
from . import loader, run_time_values
from .attributes import node_attributes
from .context import FIX_SIZES, ImportState, NodeContext, constant_value, entries_text
from .dtypes import NUMPY_TO_ONNX, ONNX_TO_NUMPY, check_numpy_dtype, onnx_type_name
from .registry import canonical_domain, lookup, qualified


def from_onnx(model: onnx.ModelProto | str | os.PathLike[str],
              shape: Mapping[str, Sequence[int]] | None = None, *,
              shapes: Mapping[str, Sequence[int]] | None = None,
              dims: Mapping[str, int] | None = None, static: bool = False
              ) -> tuple[Graph, dict[str, np.ndarray]]:
    """Import ``model``. Its symbolic dimensions stay symbolic (see :mod:`.inputs`) unless
    fixed: ``shape`` (or ``shapes``, the same) gives whole shapes by input name, ``dims``
    sizes by dimension name (``{"batch": 8}``). ``static=True`` refuses, in one error that
    says what to give, to leave any input size symbolic: for callers whose targets need
    static shapes.

    Returns the graph and ``params``: the initializers by name, the very arrays the
    graph's constants hold.
    """
    if shape is not None and shapes is not None:
        raise TypeError("from_onnx() takes the input shapes once: as shape or as shapes")
    proto, source = loader.load(model)
    loader.check(proto, source)
    check_graph(proto.graph, source)
    opsets = loader.opsets(proto, source)
    check_supported(proto.graph, opsets, source)
    given = shape if shape is not None else shapes
    return _GraphImporter(proto.graph, opsets, source).run(given, dims, static)


def check_graph(graph: onnx.GraphProto, source: str) -> None:
    """Refuse a graph that computes nothing, and names no artifact can carry.

    The checker takes a graph without nodes or outputs, names with a NUL character,
    which the C strings of artifacts and kernels would cut short, and names that are not
    UTF-8 (which protobuf returns as bytes)."""
    if not len(graph.output):
        raise ModelError(f"{source}: the graph has no outputs, so there is nothing to compute")
    if not len(graph.node):
        raise ModelError(f"{source}: the graph has no nodes, so there is nothing to compile")
    for kind, name in _all_names(graph):
        if isinstance(name, bytes):  # protobuf hands back a name that is not UTF-8 as bytes
            raise ModelError(f"{source}: {kind} {name!r} is not valid UTF-8 text; rename it")
        if "\0" in name:
            raise ModelError(f"{source}: {kind} {name!r} contains a NUL character; rename it")


def _all_names(graph: onnx.GraphProto) -> list[tuple[str, str]]:
    """(kind, name) of the graph, its values and nodes, and those of its subgraphs."""
    names = [("graph", graph.name)]
    names += [("input", vi.name) for vi in graph.input]
    names += [("output", vi.name) for vi in graph.output]
    names += [("initializer", t.name) for t in graph.initializer]
    for node in graph.node:
        names.append(("node", node.name))
        names += [(f"tensor of node {node.name!r}", n) for n in (*node.input, *node.output)]
        for attr in node.attribute:
            names += [n for g in _subgraphs(attr) for n in _all_names(g)]
    return names


def _subgraphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    return list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []


def check_supported(graph: onnx.GraphProto, opsets: Mapping[str, int], source: str) -> None:
    """Raise one UnsupportedOpError naming every op type without a converter."""
    missing: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for i, node in enumerate(graph.node):
        domain = canonical_domain(node.domain)
        opset = opsets.get(domain, 1)
        if lookup(node.op_type, domain, opset) is not None:
            continue
        key = qualified(node.op_type, domain)
        missing.setdefault(key, []).append(f"'{node.name}'" if node.name else
                                           f"#{i} (unnamed)")
        versions[key] = f"opset {opset}" if not domain else f"{domain} opset {opset}"
    if not missing:
        return
    lines = []
    for op, nodes in missing.items():
        shown = ", ".join(nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10
                                          else "")
        lines.append(f"  {op} ({versions[op]}): node{'s' if len(nodes) > 1 else ''} {shown}")
    raise UnsupportedOpError(
        f"{source}: {len(missing)} unsupported operator{'s' if len(missing) > 1 else ''} "
        f"({', '.join(missing)}):\n" + "\n".join(lines))


class _GraphImporter:
    def __init__(self, graph: onnx.GraphProto, opsets: Mapping[str, int], source: str) -> None:
        self.graph = graph
        self.opsets = opsets
        self.source = source
        self.state = ImportState(graph.name, _names(graph))
        self.state.inline = self._inline

    def run(self, shape: Mapping[str, Sequence[int]] | None, dims: Mapping[str, int] | None,
            static: bool) -> tuple[Graph, dict[str, np.ndarray]]:
        params = self._initializers()
        runtime_inputs = [vi for vi in self.graph.input if vi.name not in params]
        for name, dims_of, dtype in input_shapes.resolve(runtime_inputs, shape, self.source,
                                                         dims, static):
            v = self.state.env[name] = self.state.builder.input(name, dims_of, dtype)
            entries = run_time_values.input_entries(v.name, v.shape, v.dtype)
            if entries is not None:
                self.state.run_time[v.uid] = entries
        for index, node in enumerate(self.graph.node):
            self._convert(index, node)
        outputs = [self._output(vi) for vi in self.graph.output]
        return self.state.builder.finish(outputs), params

    def _initializers(self) -> dict[str, np.ndarray]:
        if len(self.graph.sparse_initializer):
            raise ModelError(f"{self.source}: sparse initializers are not supported "
                             f"('{self.graph.sparse_initializer[0].values.name}')")
        params: dict[str, np.ndarray] = {}
        for t in self.graph.initializer:
            try:
                array = numpy_helper.to_array(t)
            except Exception as e:
                raise ModelError(f"{self.source}: initializer '{t.name}' cannot be read "
                                 f"({e})") from None
            check_numpy_dtype(str(array.dtype), f"{self.source}: initializer '{t.name}'")
            value = constant_value(t.name, array)
            self.state.env[t.name] = value
            self.state.weights.add(value.uid)
            params[t.name] = value.data  # type: ignore[assignment]
        return params

    def _convert(self, index: int, node: onnx.NodeProto) -> None:
        domain = canonical_domain(node.domain)
        opset = self.opsets.get(domain, 1)
        conv = lookup(node.op_type, domain, opset)
        assert conv is not None  # check_supported ran first
        for name in node.input:
            if name and name not in self.state.env:
                raise ModelError(f"{self.source}: node '{node.name or index}' "
                                 f"({node.op_type}) reads '{name}', which nothing produces")
        ctx = NodeContext(self.state, node, index, opset, node_attributes(node))
        try:
            result = conv.fn(ctx)
        except SymbolicDimError as e:  # int(size) or a comparison deep in a converter
            if str(e).startswith(ctx.where):
                raise
            raise SymbolicDimError(f"{ctx.where}: {e}") from None
        except TensorsmithError:
            raise
        except Exception as e:  # a converter bug: still say which node it was
            raise ModelError(f"{ctx.where}: conversion failed: {type(e).__name__}: {e}") from e
        outputs: list[Value | None] = [result] if isinstance(result, Value) else list(result)
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(outputs) or outputs[i] is None:
                raise ctx.error(f"output {i} ('{name}') is not supported")
        ctx.finish_names(outputs)
        for name, v in zip(node.output, outputs):
            if name and v is not None:
                self.state.env[name] = v

    def _inline(self, graph: onnx.GraphProto, where: str,
                bindings: Mapping[str, Value] | None = None) -> list[Value]:
        """Convert a subgraph's nodes in place (an If branch chosen at import, one step of
        an unrolled Scan) and return its outputs; it reads outer values by name, as ONNX's
        scoping allows. ``bindings`` gives the subgraph's inputs their values.

        The names the subgraph binds are its own: afterwards they are bound as before, so
        that converting the same subgraph again (the next Scan step) sees no stale values
        and outer names are never shadowed."""
        if len(graph.initializer) or len(graph.sparse_initializer):
            raise ModelError(f"{where}: subgraphs with initializers are not supported")
        check_supported(graph, self.opsets, f"{where}: its subgraph")
        env = self.state.env
        scoped = _names(graph)
        saved = {name: env[name] for name in scoped if name in env}
        try:
            env.update(bindings or {})
            for index, node in enumerate(graph.node):
                self._convert(index, node)
            missing = [o.name for o in graph.output if o.name not in env]
            if missing:
                raise ModelError(f"{where}: the subgraph never produces {', '.join(missing)}")
            return [env[o.name] for o in graph.output]
        finally:
            for name in scoped:
                if name in saved:
                    env[name] = saved[name]
                else:
                    env.pop(name, None)

    def _output(self, vi: onnx.ValueInfoProto) -> Value:
        """The value of graph output ``vi``, named as it (a copy where aliased)."""
        name = vi.name
        v = self.state.env.get(name)
        if v is None:
            raise ModelError(f"{self.source}: graph output '{name}' is never produced")
        declared = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if declared and ONNX_TO_NUMPY.get(declared) != v.dtype:
            raise ModelError(f"{self.source}: graph output '{name}' is declared "
                             f"{onnx_type_name(declared)}, but the model computes it as "
                             f"{onnx_type_name(NUMPY_TO_ONNX[v.dtype])} ({v.dtype})")
        if v.uid in self.state.shape_values:
            raise SymbolicDimError(
                f"{self.source}: graph output '{name}' is "
                f"{entries_text(self.state.shape_values[v.uid])}, computed from sizes known "
                f"only at run time, which no graph op returns; {FIX_SIZES}")
        if v.name == name:  # includes an input returned as is: build copies those
            return v
        return self.state.builder.add("copy", [v], {}, name=name, out_names=[name],
                                      where=f"graph output '{name}'")[0]


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every value name of ``graph`` and its subgraphs (never given to new values)."""
    names = {vi.name for vi in (*graph.input, *graph.output)}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names.update(n for n in (*node.input, *node.output) if n)
        for attr in node.attribute:
            for g in _subgraphs(attr):
                names |= _names(g)
    return names
