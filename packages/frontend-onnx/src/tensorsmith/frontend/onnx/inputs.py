"""Graph inputs: their dtypes, and their shapes, symbolic where the model leaves sizes open.

A symbolic dimension of the model stays symbolic: a named one (``N``, ``batch``,
``sequence``) becomes the symbol of that name (made an identifier, since shape
expressions are printed and parsed back), an unnamed one (``?``) a symbol named after its
input and axis (``input_ids_d1``). Inputs that share a name share the symbol, which is
how BERT's ``input_ids`` and ``attention_mask`` keep agreeing on ``batch`` and ``seq``.

The user may still fix sizes: a whole shape for an input (``shapes=``,
``--input-shape``), which also fixes every named symbol it contains for all inputs, or
single symbols by name (``dims=``, ``--dim``). A caller that needs static shapes (a target
whose kernels take no run-time sizes) passes ``static=True`` and gets one error listing
every input still lacking sizes, whose fix can be pasted as is; it is built by
:func:`missing_shapes_message`, which callers that check later use as well.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence

import onnx

from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.symbolic import Dim, free_symbols, is_static, symbol

from .dtypes import to_numpy_dtype

OnnxDim = int | str  # a declared size, or a symbolic name ("?" when the model names none)


def onnx_dims(vi: onnx.ValueInfoProto) -> list[OnnxDim] | None:
    """The declared dims of an input, or None when it has no shape at all."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims: list[OnnxDim] = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or "?")
    return dims


def symbol_name(text: str) -> str:
    """An identifier for a dim_param (``sequence length`` -> ``sequence_length``).

    Shapes are printed and parsed back as Python-like expressions, so a symbol's name
    must be an identifier that is not a keyword (``None``, ``if``)."""
    name = re.sub(r"\W", "_", text.strip()) or "d"
    if name[0].isdigit():
        name = f"d_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def resolve(inputs: Sequence[onnx.ValueInfoProto], given: Mapping[str, Sequence[int]] | None,
            source: str, dims: Mapping[str, int] | None = None, static: bool = False
            ) -> list[tuple[str, tuple[Dim, ...], str]]:
    """(name, shape, dtype) of each graph input, in order; symbolic sizes not fixed by
    ``given`` (shapes by input) or ``dims`` (sizes by symbol) stay symbolic, unless
    ``static`` demands them all."""
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
    fixed = {n: _check_given(n, declared[n], s, source) for n, s in given.items()}
    symbols = _symbol_names(declared)
    sizes = _bind_symbols(declared, symbols, fixed, source)
    _bind_dims(dims or {}, declared, symbols, sizes, source)
    result: list[tuple[str, tuple[Dim, ...], str]] = []
    no_shape: list[tuple[str, Sequence[OnnxDim | Dim] | None]] = []
    for vi in inputs:
        dtype = to_numpy_dtype(vi.type.tensor_type.elem_type, f"{source}: input '{vi.name}'")
        if vi.name in fixed:
            shape: tuple[Dim, ...] = fixed[vi.name]
        elif declared[vi.name] is None:
            no_shape.append((vi.name, None))
            continue
        else:
            shape = tuple(d if name is None else sizes.get(name, symbol(name))  # type: ignore[misc]
                          for d, name in zip(declared[vi.name] or [], symbols[vi.name]))
        result.append((vi.name, shape, dtype))
    if no_shape:
        raise ModelError(missing_shapes_message(no_shape, source))
    if static:
        open_ = [(name, [s if isinstance(s, int) else d
                         for s, d in zip(shape, declared[name] or [])])
                 for name, shape, _ in result if not is_static(shape)]
        if open_:
            raise ModelError(missing_shapes_message(open_, source))
    return result


def require_static(graph: Graph, source: str, because: str = "") -> None:
    """Raise the missing-shapes error when an input of ``graph`` has symbolic sizes: for
    callers that import first and learn later (``because``) that their target needs
    static shapes."""
    open_ = [(v.name, v.shape) for v in graph.inputs if not v.is_static]
    if open_:
        message = missing_shapes_message(open_, source)
        raise ModelError(f"{message} ({because})" if because else message)


def _symbol_names(declared: Mapping[str, list[OnnxDim] | None]) -> dict[str, list[str | None]]:
    """For each input, the symbol of each axis (None where the size is declared).

    A dim_param is made an identifier; should two dim_params become the same identifier
    (``a b`` and ``a_b``), the later one gets a suffix, as does the name made for an
    unnamed dim that a dim_param already took."""
    taken: dict[str, str] = {}  # identifier -> the dim_param it stands for
    named: dict[str, str] = {}  # dim_param -> identifier
    for dims in declared.values():
        for d in dims or []:
            if isinstance(d, str) and d != "?" and d not in named:
                named[d] = _fresh(symbol_name(d), taken)
                taken[named[d]] = d
    out: dict[str, list[str | None]] = {}
    for input_name, dims in declared.items():
        axes: list[str | None] = []
        for axis, d in enumerate(dims or []):
            if isinstance(d, int):
                axes.append(None)
            elif d != "?":
                axes.append(named[d])
            else:
                name = _fresh(symbol_name(f"{input_name}_d{axis}"), taken)
                taken[name] = "?"
                axes.append(name)
        out[input_name] = axes
    return out


def _fresh(name: str, taken: Mapping[str, str]) -> str:
    base, n = name, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _bind_symbols(declared: Mapping[str, list[OnnxDim] | None],
                  symbols: Mapping[str, list[str | None]],
                  fixed: Mapping[str, tuple[int, ...]], source: str) -> dict[str, int]:
    """Sizes of the symbols, from the shapes given; conflicts are errors."""
    sizes: dict[str, int] = {}
    origin: dict[str, str] = {}
    for name, shape in fixed.items():
        for d, sym, size in zip(declared[name] or [], symbols[name], shape):
            if sym is None:
                continue
            if sym in sizes and sizes[sym] != size:
                raise ModelError(f"{source}: dimension '{d}' is {sizes[sym]} in the shape given "
                                 f"for input '{origin[sym]}' but {size} in the one for '{name}'")
            sizes[sym], origin[sym] = size, name
    return sizes


def _bind_dims(dims: Mapping[str, int], declared: Mapping[str, list[OnnxDim] | None],
               symbols: Mapping[str, list[str | None]], sizes: dict[str, int],
               source: str) -> None:
    """Add the sizes given by symbol name (the model's dim_param, or the symbol's name)
    to ``sizes``; a name no input has, or a size the given shapes contradict, is an error."""
    by_name: dict[str, str] = {}
    for input_name, axes in symbols.items():
        for d, sym in zip(declared[input_name] or [], axes):
            if sym is not None:
                by_name[sym] = sym
                if d != "?":
                    by_name.setdefault(str(d), sym)
    for key, value in dims.items():
        if key not in by_name:
            known = ", ".join(sorted(by_name)) or "none: all its input shapes are static"
            raise ModelError(f"{source}: size given for dimension '{key}', which no input of "
                             f"the model has (its symbolic dimensions: {known})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelError(f"{source}: the size given for dimension '{key}' must be an int "
                             f">= 0, got {value!r}")
        sym = by_name[key]
        if sym in sizes and sizes[sym] != value:
            raise ModelError(f"{source}: dimension '{key}' is given as {value}, but the shapes "
                             f"given make it {sizes[sym]}")
        sizes[sym] = int(value)


def _check_given(name: str, dims: list[OnnxDim] | None, shape: Sequence[int], source: str
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


def missing_shapes_message(missing: Sequence[tuple[str, Sequence[OnnxDim | Dim] | None]],
                           source: str) -> str:
    """What to give for ``missing`` (input name, its dims, None for no shape at all) so that
    every input has a static shape, as Python arguments and as command-line options.

    Dims are the model's (``?`` for an unnamed one) or an imported graph's (symbols)."""
    lines = []
    named: list[str] = []
    for name, dims in missing:
        if dims is None:
            lines.append(f"input '{name}' has no shape in the model")
            continue
        open_dims = [str(d) for d in dims if not isinstance(d, int)]
        lines.append(f"input '{name}' has shape {_fmt(dims)} with symbolic dimension(s) "
                     f"{', '.join(open_dims)}")
        for d in dims:
            if isinstance(d, str) and d != "?":
                named.append(d)
            elif not isinstance(d, (int, str)):
                named += sorted(free_symbols(d))
    examples = {name: _example(dims) for name, dims in missing}
    api = "{" + ", ".join(f"'{n}': {_tuple(e)}" for n, e in examples.items()) + "}"
    cli = " ".join(f"--input-shape {n}:{_csv(e)}" for n, e in examples.items())
    text = (f"{source}: {'; '.join(lines)}. The compiler needs static shapes here: pass "
            f"shape={api} or {cli} (with your sizes)")
    named = list(dict.fromkeys(named))
    if named:
        text += ("; named sizes can also be fixed alone, with dims={" +
                 ", ".join(f"'{n}': 1" for n in named) + "} or " +
                 " ".join(f"--dim {n}=1" for n in named))
    return text


def _fmt(dims: Sequence[OnnxDim | Dim]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _example(dims: Sequence[OnnxDim | Dim] | None) -> tuple[int, ...] | None:
    return None if dims is None else tuple(d if isinstance(d, int) else 1 for d in dims)


def _tuple(e: tuple[int, ...] | None) -> str:
    if e is None:
        return "(...)"
    return f"({e[0]},)" if len(e) == 1 else str(e)


def _csv(e: tuple[int, ...] | None) -> str:
    return "..." if e is None else ",".join(str(d) for d in e)
