"""The NumPy interpreter: runs any graph with each op's reference implementation.

It is the reference every pass and every backend is tested against. A graph with
symbolic dims (symbolic.py) runs on arrays of any sizes its inputs allow: each symbol
takes its value from the input arrays' shapes, and dims inside the nodes' attributes (a
reshape's target ``[batch, seq, 4, 16]``) are evaluated with those values before the
op's reference sees them. Sizes that break an equality shape inference assumed
(``Graph.assumptions``) are refused, as the runtime refuses them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import ModelError
from .graph import CountedSize, Graph, Value
from .op_registry import get_op
from .symbolic import Sym, evaluate, parse_dim, shape_text


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray], keep_all: bool = False
              ) -> list[np.ndarray] | dict[str, np.ndarray]:
    """Evaluate ``graph``; with ``keep_all`` return every value by name (for debugging)."""
    for v in graph.inputs:
        if v.name not in inputs:
            raise ModelError(f"interpreter: input '{v.name}' not given")
    arrays = {v.uid: np.asarray(inputs[v.name], dtype=v.dtype) for v in graph.inputs}
    sizes = _bind_symbols(graph.inputs, arrays)
    if graph.computed:
        sizes = _compute_sizes(graph, arrays, sizes)
    env: dict[int, np.ndarray] = {}
    for v in graph.inputs:
        env[v.uid] = _input_array(v, arrays[v.uid], sizes)
    _check_assumptions(graph, sizes)
    named: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        args = [v.data if v.data is not None else env[v.uid] for v in node.inputs]
        attrs = _concrete_attrs(node.attrs, sizes) if sizes else node.attrs
        with np.errstate(all="ignore"):
            results = get_op(node.op).reference(args, attrs)
        for v, r in zip(node.outputs, results):
            env[v.uid] = np.asarray(r)
            named[v.name] = env[v.uid]
        for c in graph.counted:
            if c.count.producer is node:
                sizes = _count(c, env[c.count.uid], sizes)
    if keep_all:
        return named
    return [v.data if v.is_constant else env[v.uid] for v in graph.outputs]  # type: ignore[misc]


def _bind_symbols(inputs: list[Value], arrays: Mapping[int, np.ndarray]) -> dict[str, int]:
    """Each symbol's value: the size of the first input axis that is that symbol alone.
    Inputs that disagree on one are refused, naming both."""
    sizes: dict[str, int] = {}
    seen: dict[str, str] = {}
    for v in inputs:
        array = arrays[v.uid]
        if v.is_static or array.ndim != len(v.shape):
            continue  # (a wrong rank is reported by _input_array)
        for d, n in zip(v.shape, array.shape):
            name = str(d)
            if not isinstance(d, Sym) or not name.isidentifier():
                continue  # an int, or an expression: checked once all are bound
            if sizes.setdefault(name, n) != n:
                raise ModelError(f"interpreter: input '{v.name}' has {name} = {n}, but input "
                                 f"'{seen[name]}' has {name} = {sizes[name]}")
            seen.setdefault(name, v.name)
    return sizes


def _compute_sizes(graph: Graph, arrays: Mapping[int, np.ndarray],
                   sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` and the graph's computed sizes, from the inputs' values (host_sizes.py),
    each refused below 1 as the runtime refuses it."""
    from tensorsmith.runtime.shapes import host_expr

    by_name = {v.name: arrays[v.uid].reshape(-1) for v in graph.inputs}

    def read(name: str, k: int) -> int | float:
        return by_name[name][k].item()

    env = dict(sizes)
    for c in graph.computed:
        try:
            value = host_expr(c.expr)(env, read)
        except (ZeroDivisionError, IndexError, KeyError, OverflowError, ValueError) as e:
            raise ModelError(f"interpreter: {c.reason}: the size '{c.name}' = {c.expr} cannot "
                             f"be computed from these inputs ({type(e).__name__}: {e})") from None
        if value != int(value) or value < 1:
            raise ModelError(f"interpreter: {c.reason}: the size '{c.name}' = {c.expr} "
                             f"computed from these inputs is {value}, but it must be at least "
                             "1")
        env[c.name] = int(value)
    return env


def _count(c: CountedSize, count: np.ndarray, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` and counted size ``c``'s symbol (the count plus one), the count checked
    against its bound as the executors check it."""
    bound = evaluate(c.bound, sizes)
    value = int(count.reshape(-1)[0]) + 1
    if not 1 <= value <= bound:
        raise ModelError(f"interpreter: {c.reason}: the count '{c.name} - 1' is {value - 1}, "
                         f"outside 0..{bound - 1}")
    return {**sizes, c.name: value}


def _input_array(v: Value, array: np.ndarray, sizes: Mapping[str, int]) -> np.ndarray:
    """``array`` as input ``v``: reshaped to a static shape (as always), or, for a shape
    with symbols, checked against it with the symbols' values."""
    if v.is_static:
        return array.reshape(v.shape)
    want = f"{v.dtype}{shape_text(v.shape)}"
    try:
        actual = tuple(evaluate(d, sizes) for d in v.shape)
    except KeyError as e:
        raise ModelError(f"interpreter: input '{v.name}' ({want}) needs the size {e}, which "
                         "no input axis gives") from None
    if actual != array.shape:
        raise ModelError(f"interpreter: input '{v.name}' is {want}, {list(actual)} here, "
                         f"given an array of shape {list(array.shape)}")
    return array


def _check_assumptions(graph: Graph, sizes: Mapping[str, int]) -> None:
    """Refuse sizes that break an equality shape inference assumed (symbolic.Assumption),
    as the runtime does: the inferred shapes hold only under them."""
    for a in graph.assumptions:
        try:
            lhs, rhs = evaluate(a.lhs, sizes), evaluate(a.rhs, sizes)
        except KeyError:
            continue  # a size no input axis gives: the runtime's to check
        if lhs != rhs:
            raise ModelError(f"interpreter: {a.reason}, but here {a.lhs} is {lhs} and "
                             f"{a.rhs} is {rhs}")


def _concrete_attrs(attrs: dict[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    """``attrs`` with each symbolic dim evaluated: a Sym, or a list of dims some of which
    are symbolic (as Syms or, after the text form, their text). A list that is not of
    dims, or a string that is no dim of known sizes ("linear"), stays as it is."""
    out = dict(attrs)
    for key, value in attrs.items():
        if isinstance(value, Sym):  # (a size counted by this very node is not known yet)
            with contextlib.suppress(KeyError):
                out[key] = evaluate(value, sizes)
        elif isinstance(value, str):  # a dim as the text form writes it, else a word
            with contextlib.suppress(ValueError, KeyError):
                out[key] = evaluate(parse_dim(value), sizes)
        elif isinstance(value, (list, tuple)) and any(isinstance(x, (Sym, str)) for x in value):
            with contextlib.suppress(ValueError, KeyError):
                out[key] = [evaluate(parse_dim(x) if isinstance(x, str) else x, sizes)
                            if isinstance(x, (Sym, str)) else x for x in value]
    return out
