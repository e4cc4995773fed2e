"""The graph's text form: readable, and parsed back by :func:`parse_graph`."""

from __future__ import annotations

import json
import re

import numpy as np

from .graph import Check, CountedSize, Graph, Value
from .host_sizes import ComputedSize
from .symbolic import Assumption, Dim, parse_dim, shape_text


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
    # computed sizes before the nodes whose shapes use them
    lines += [f"  size {c.name} = {c.expr} {json.dumps(c.reason)}" for c in g.computed]
    for n in g.nodes:
        outs = ", ".join(f"{_ref(v)}: {_type(v)}" for v in n.outputs)
        args = ", ".join(_ref(v) for v in n.inputs)
        attrs = json.dumps(n.attrs, sort_keys=True, default=_jsonable) if n.attrs else ""
        lines.append(f"  {outs} = {n.op}({args}){' ' + attrs if attrs else ''}  # {n.name}")
        # a counted size right after the node whose output counts it, before its users
        lines += [f"  counted {c.name} = {_ref(c.count)} + 1 <= {c.bound} {json.dumps(c.reason)}"
                  for c in g.counted if c.count.producer is n]
    lines += [f"  assume {a.lhs} == {a.rhs} {json.dumps(a.reason)}" for a in g.assumptions]
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


_TYPE_HEAD = re.compile(r"%(\S+?): (\w+)\[")


def _types(text: str) -> list[tuple[str, str, str]]:
    """(name, dtype, dims text) of each ``%name: dtype[dims]`` in ``text``. A dim is an
    int or a symbolic expression (symbolic.py), whose parentheses nest as deep as the
    model's arithmetic does (each stride-2 layer of a symbolic image adds a level), so
    the closing bracket is found by scanning, not by a regular expression."""
    found, at = [], 0
    while (head := _TYPE_HEAD.search(text, at)) is not None:
        depth, end = 0, head.end()
        while end < len(text) and (text[end] != "]" or depth):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        found.append((head.group(1), head.group(2), text[head.end():end]))
        at = end + 1
    return found


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
    for name, dtype_text, dims in _types(header.group(2)):
        shape, dtype = _parse_type(dtype_text, dims)
        env[name] = b.input(name, shape, dtype)
    outputs: list[Value] = []
    checks: list[Check] = []
    assumptions: list[Assumption] = []
    for ln in lines[1:]:
        if ln == "}" or not ln:
            continue
        if ln.startswith("size "):
            definition, _, reason = ln[len("size "):].partition(' "')
            name, _, expr = definition.partition(" = ")
            b.computed.append(ComputedSize(name, expr, json.loads('"' + reason)))
            continue
        if ln.startswith("counted "):
            definition, _, reason = ln[len("counted "):].partition(' "')
            name, _, rest = definition.partition(" = %")
            ref, _, bound = rest.partition(" + 1 <= ")
            b.counted.append(CountedSize(name, env[ref], parse_dim(bound),
                                         json.loads('"' + reason)))
            continue
        if ln.startswith("assume "):
            equality, _, reason = ln[len("assume "):].partition(' "')
            lhs, _, rhs = equality.partition(" == ")
            assumptions.append(Assumption(parse_dim(lhs), parse_dim(rhs),
                                          json.loads('"' + reason)))
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
            (name, dtype_text, dims), = _types(lhs)
            shape, dtype = _parse_type(dtype_text, dims)
            payload = rhs[len("const "):]
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
        out_names = [name for name, _, _ in _types(lhs)]
        outs = b.add(op, ins, json.loads(attrs) if attrs else {}, name=comment.strip(),
                     out_names=out_names)
        for name, v in zip(out_names, outs):
            v.name = name
            env[name] = v
    graph = b.finish(outputs)
    graph.checks = checks
    graph.assumptions = assumptions  # (as printed: re-inference may assume them again)
    return graph
