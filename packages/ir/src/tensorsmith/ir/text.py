"""The graph's text form: readable, and parsed back by :func:`parse_graph`."""

from __future__ import annotations

import json
import re

import numpy as np

from .graph import Check, Graph, Value
from .symbolic import Dim, parse_dim, shape_text


def _type(v: Value) -> str:
    return f"{v.dtype}{shape_text(v.shape)}"


def _ref(v: Value) -> str:
    return f"%{v.name}"


def print_graph(g: Graph) -> str:
    """Text form. Constants print as ``const`` lines; large ones print their shape only,
    with ``data=<elided>``, so such text parses back only with the constants supplied."""
    lines = [f"graph {g.name}({', '.join(f'{_ref(v)}: {_type(v)}' for v in g.inputs)}) {{"]
    for c in g.constants():
        assert c.data is not None
        data = json.dumps(c.data.tolist()) if c.data.size <= 16 else "<elided>"
        lines.append(f"  {_ref(c)}: {_type(c)} = const {data}")
    for n in g.nodes:
        outs = ", ".join(f"{_ref(v)}: {_type(v)}" for v in n.outputs)
        args = ", ".join(_ref(v) for v in n.inputs)
        attrs = json.dumps(n.attrs, sort_keys=True, default=_jsonable) if n.attrs else ""
        lines.append(f"  {outs} = {n.op}({args}){' ' + attrs if attrs else ''}  # {n.name}")
    lines += [f"  check {_ref(c.flag)} {json.dumps(c.message)}" for c in g.checks]
    lines.append(f"  return {', '.join(_ref(v) for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _jsonable(x: object) -> object:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


# a dim is an int or a symbolic expression (symbolic.py), which may hold parentheses
_TYPE = re.compile(r"%(\S+?): (\w+)\[((?:[^\[\]()]|\([^()]*(?:\([^()]*\)[^()]*)*\))*)\]")


def _parse_type(dtype: str, dims: str) -> tuple[tuple[Dim, ...], str]:
    return tuple(parse_dim(d) for d in _split_dims(dims)), dtype


def _split_dims(text: str) -> list[str]:
    """The dims of ``a, max(b, c), 3``: split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_graph(text: str, constants: dict[str, np.ndarray] | None = None) -> Graph:
    """Parse :func:`print_graph` output back into a graph (node types are re-inferred)."""
    from .builder import GraphBuilder

    lines = [ln.strip() for ln in text.strip().splitlines()]
    header = re.match(r"graph (\S+)\((.*)\) \{$", lines[0])
    if not header:
        raise ValueError("text does not start with 'graph NAME(...) {'")
    b = GraphBuilder(header.group(1))
    env: dict[str, Value] = {}
    for m in _TYPE.finditer(header.group(2)):
        shape, dtype = _parse_type(m.group(2), m.group(3))
        env[m.group(1)] = b.input(m.group(1), shape, dtype)
    outputs: list[Value] = []
    checks: list[Check] = []
    for ln in lines[1:]:
        if ln == "}" or not ln:
            continue
        if ln.startswith("check %"):
            ref, _, message = ln[len("check %"):].partition(" ")
            checks.append(Check(env[ref], json.loads(message)))
            continue
        if ln.startswith("return"):
            outputs = [env[r.strip()[1:]] for r in ln[len("return"):].split(",") if r.strip()]
            continue
        lhs, rhs = ln.split(" = ", 1)
        if rhs.startswith("const "):
            const_match = _TYPE.match(lhs)
            assert const_match
            shape, dtype = _parse_type(const_match.group(2), const_match.group(3))
            payload = rhs[len("const "):]
            name = const_match.group(1)
            if payload == "<elided>":
                if not constants or name not in constants:
                    raise ValueError(f"constant %{name} is elided; pass it in `constants`")
                data = np.asarray(constants[name], dtype=dtype).reshape(shape)
            else:
                data = np.asarray(json.loads(payload), dtype=dtype).reshape(shape)
            env[name] = Graph.constant(name, data)
            continue
        call, _, comment = rhs.partition("  # ")
        call_match = re.match(r"(\w+)\(([^)]*)\)\s*(.*)$", call)
        assert call_match, ln
        op, args, attrs = call_match.group(1), call_match.group(2), call_match.group(3)
        ins = [env[a.strip()[1:]] for a in args.split(",") if a.strip()]
        out_names = [t.group(1) for t in _TYPE.finditer(lhs)]
        outs = b.add(op, ins, json.loads(attrs) if attrs else {}, name=comment.strip(),
                     out_names=out_names)
        for name, v in zip(out_names, outs):
            v.name = name
            env[name] = v
    graph = b.finish(outputs)
    graph.checks = checks
    return graph
