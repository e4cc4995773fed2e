"""Graph inputs: their dtypes, and static shapes from the model or from the user.

The graph IR has static shapes, so every symbolic dimension (``N``, ``batch``,
``sequence``) needs a size. A size given for one input names its symbols for all of them
(BERT's ``input_ids`` and ``attention_mask`` share ``batch`` and ``sequence``, so one
shape is enough). Every input still lacking sizes is reported in one error whose fix can
be pasted as is, for the Python API and for the command line alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from tensorsmith.ir.errors import ModelError

from .dtypes import to_numpy_dtype

Dim = int | str  # a size, or a symbolic name ("?" when the model names none)


def onnx_dims(vi: onnx.ValueInfoProto) -> list[Dim] | None:
    """The declared dims of an input, or None when it has no shape at all."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims: list[Dim] = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or "?")
    return dims


def _fmt(dims: Sequence[Dim]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _example(dims: list[Dim] | None) -> tuple[int, ...] | None:
    return None if dims is None else tuple(d if isinstance(d, int) else 1 for d in dims)


def resolve(inputs: Sequence[onnx.ValueInfoProto], given: Mapping[str, Sequence[int]] | None,
            source: str) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, static shape, dtype) of each graph input, in order."""
    given = dict(given or {})
    names = [vi.name for vi in inputs]
    unknown = [k for k in given if k not in names]
    if unknown:
        listed = ", ".join(f"'{n}'" for n in names) or "none"
        raise ModelError(f"{source}: shape given for {', '.join(repr(k) for k in unknown)}, "
                         f"which {'is' if len(unknown) == 1 else 'are'} not an input of the "
                         f"model (its inputs: {listed})")
    for vi in inputs:
        if not vi.type.HasField("tensor_type"):
            raise ModelError(f"{source}: input '{vi.name}' is not a tensor "
                             f"({vi.type.WhichOneof('value')}); only tensor inputs are supported")
    declared = {vi.name: onnx_dims(vi) for vi in inputs}
    static = {n: _check_given(n, declared[n], s, source) for n, s in given.items()}
    symbols = _bind_symbols(declared, static, source)
    result: list[tuple[str, tuple[int, ...], str]] = []
    missing: list[tuple[str, list[Dim] | None]] = []
    for vi in inputs:
        dtype = to_numpy_dtype(vi.type.tensor_type.elem_type, f"{source}: input '{vi.name}'")
        dims = declared[vi.name]
        if vi.name in static:
            shape = static[vi.name]
        else:
            sized = None if dims is None else [symbols.get(d, d) if isinstance(d, str) and d != "?"
                                               else d for d in dims]
            if sized is None or not all(isinstance(d, int) for d in sized):
                missing.append((vi.name, dims))
                continue
            shape = tuple(int(d) for d in sized)
        result.append((vi.name, shape, dtype))
    if missing:
        raise ModelError(_missing_message(missing, source))
    return result


def _bind_symbols(declared: Mapping[str, list[Dim] | None],
                  static: Mapping[str, tuple[int, ...]], source: str) -> dict[str, int]:
    """Sizes of the named symbolic dims, from the shapes given; conflicts are errors."""
    symbols: dict[str, int] = {}
    origin: dict[str, str] = {}
    for name, shape in static.items():
        for d, size in zip(declared[name] or [], shape):
            if not isinstance(d, str) or d == "?":
                continue
            if d in symbols and symbols[d] != size:
                raise ModelError(f"{source}: dimension '{d}' is {symbols[d]} in the shape given "
                                 f"for input '{origin[d]}' but {size} in the one for '{name}'")
            symbols[d], origin[d] = size, name
    return symbols


def _check_given(name: str, dims: list[Dim] | None, shape: Sequence[int], source: str
                 ) -> tuple[int, ...]:
    try:
        static = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ModelError(f"{source}: the shape given for input '{name}' must be a tuple of "
                         f"ints, got {shape!r}") from None
    if any(d < 0 for d in static):
        raise ModelError(f"{source}: the shape given for input '{name}', {static}, has a "
                         "negative dimension")
    if dims is None:
        return static
    if len(static) != len(dims):
        raise ModelError(f"{source}: input '{name}' has rank {len(dims)} {_fmt(dims)} in the "
                         f"model, but the shape given, {static}, has rank {len(static)}")
    for axis, (d, s) in enumerate(zip(dims, static)):
        if isinstance(d, int) and d != s:
            raise ModelError(f"{source}: input '{name}' has shape {_fmt(dims)} in the model; "
                             f"the shape given, {static}, has {s} at axis {axis}, expected {d}")
    return static


def _missing_message(missing: list[tuple[str, list[Dim] | None]], source: str) -> str:
    lines = []
    for name, dims in missing:
        if dims is None:
            lines.append(f"input '{name}' has no shape in the model")
        else:
            symbols = ", ".join(str(d) for d in dims if not isinstance(d, int))
            lines.append(f"input '{name}' has shape {_fmt(dims)} with symbolic dimension(s) "
                         f"{symbols}")
    examples = {name: _example(dims) for name, dims in missing}
    api = "{" + ", ".join(f"'{n}': {_tuple(e)}" for n, e in examples.items()) + "}"
    cli = " ".join(f"--input-shape {n}:{_csv(e)}" for n, e in examples.items())
    return (f"{source}: {'; '.join(lines)}. The compiler needs static shapes: pass "
            f"shape={api} or {cli} (with your sizes)")


def _tuple(e: tuple[int, ...] | None) -> str:
    if e is None:
        return "(...)"
    return f"({e[0]},)" if len(e) == 1 else str(e)


def _csv(e: tuple[int, ...] | None) -> str:
    return "..." if e is None else ",".join(str(d) for d in e)
