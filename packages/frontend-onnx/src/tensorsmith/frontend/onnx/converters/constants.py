"""Ops that make tensors from attributes, constant inputs or static shapes: Constant,
ConstantOfShape, Range, EyeLike, and the masks of Trilu and OneHot.

ConstantOfShape and Range also take sizes known only at run time (a mask of
``[batch, seq]``, the positions ``0..seq-1``): those tensors are computed at run time from
a broadcast constant, since no constant of a symbolic shape can be stored.

Where the operand itself is given only when the model runs (a graph input: ONNX's node
tests feed ConstantOfShape's shape, Range's bounds, OneHot's depth and Trilu's k so), the
model still compiles once: what decides a shape becomes a size the host computes before
each run (``NodeContext.size``), and what only decides values (Trilu's k, Range's start
and delta, OneHot's depth for negative indices) is read by the kernels as data.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import HostExpr, ceil, floor, host_max
from tensorsmith.ir.symbolic import Dim, Sym, SymbolicDimError, is_static, shape_text

from ..context import FOLD_LIMIT, NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import filled, normalize_axis, positions, reshape, slice_axis


def at_run_time(ctx: NodeContext, i: int) -> bool:
    """Whether input ``i`` is given only when the model runs: neither a constant nor a
    shape value (whose sizes the old paths handle), so its values are run-time data."""
    v = ctx.optional_input(i)
    return v is not None and v.data is None and v.uid not in ctx.state.shape_values


def host_values(ctx: NodeContext, i: int, what: str) -> list[object]:
    """Input ``i``'s entries as numbers and host expressions, for sizes the host computes
    before each run; a ConstantRequiredError (so the backend freezes the input) where the
    values cannot be followed (run_time_values.py: an input of a dtype the host does not
    read, a float16 bound, is not)."""
    return list(ctx.run_time_values(i, what).reshape(-1))


@converter("Constant", since=1)
def convert_constant(ctx: NodeContext) -> Value:
    a = ctx.attrs
    if "value" in a:
        return ctx.const(a["value"], hint="value")
    if "value_float" in a:
        return ctx.const(np.float32(a["value_float"]), hint="value")
    if "value_floats" in a:
        return ctx.const(np.asarray(a["value_floats"], dtype=np.float32), hint="value")
    if "value_int" in a:
        return ctx.const(np.int64(a["value_int"]), hint="value")
    if "value_ints" in a:
        return ctx.const(np.asarray(a["value_ints"], dtype=np.int64), hint="value")
    kinds = ", ".join(sorted(a)) or "no value attribute"
    raise ctx.error(f"only tensor, float(s) and int(s) constants are supported, got {kinds}")


@converter("ConstantOfShape", since=9)
def convert_constant_of_shape(ctx: NodeContext) -> Value:
    """A constant; for a symbolic shape, the fill value expanded to it at run time."""
    shape = _run_time_shape(ctx) if at_run_time(ctx, 0) else ctx.dims(0, "shape")
    if any(isinstance(d, int) and d < 0 for d in shape):
        raise ctx.error(f"shape {shape_text(shape)} has a negative dimension")
    value = ctx.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if fill.size != 1:
        raise ctx.error(f"value must have one element, has {fill.size}")
    if is_static(shape):
        ctx.check_constant(shape, str(fill.dtype), "the output")
    return filled(ctx, shape, fill[0], str(fill.dtype))


def _run_time_shape(ctx: NodeContext) -> list[Dim]:
    """A shape the run gives, each entry ``n`` as ``m - 1``, where ``m = n + 1`` is a size
    the host computes before the run. A computed size is at least 1, but a dimension of
    0 is a fill's ordinary use (an empty cache of past keys, ONNX's own node test): the
    offset lets it be 0, while a negative entry is still refused by the run."""
    return [e if isinstance(e, int) else ctx.size(e + 1, f"d{k}_plus1") - 1
            for k, e in enumerate(host_values(ctx, 0, "shape"))]


@converter("Range", since=11)
def convert_range(ctx: NodeContext) -> Value:
    names = ("start", "limit", "delta")
    if any(v is not None and v.uid in ctx.state.shape_values for v in ctx.inputs):
        bounds = [ctx.dims(i, n) for i, n in enumerate(names)]
        if any(len(b) != 1 for b in bounds):
            raise ctx.error("start, limit and delta must be scalars")
        return _symbolic_range(ctx, *(b[0] for b in bounds))
    if any(at_run_time(ctx, i) for i in range(3)):
        return _run_time_range(ctx, names)
    start, limit, delta = (ctx.constant(i, n) for i, n in enumerate(names))
    s, l, d = (v.reshape(-1)[0] for v in (start, limit, delta))
    if d == 0:
        raise ctx.error("delta is 0")
    span = (float(l) - float(s)) / float(d)
    if not math.isfinite(span):
        raise ctx.error(f"start {s}, limit {l} and delta {d} give no finite element count")
    count = max(math.ceil(span), 0)
    ctx.check_constant((count,), str(start.dtype), "the output")
    values = s + np.arange(count, dtype=start.dtype) * d
    return ctx.const(values.astype(start.dtype), hint="range")


def _run_time_range(ctx: NodeContext, names: tuple[str, str, str]) -> Value:
    """Range over bounds the run gives: its length ``max(ceil((limit - start) / delta),
    0)`` is a size the host computes before each run (refused below 1: an empty range
    needs its bounds frozen), and the values ``start + i * delta`` are computed by
    kernels from the positions ``i`` and the start and delta tensors themselves."""
    bounds = [host_values(ctx, i, n) for i, n in enumerate(names)]
    if any(len(b) != 1 for b in bounds):
        raise ctx.error("start, limit and delta must be scalars")
    s, l, d = (b[0] for b in bounds)
    if not isinstance(d, HostExpr) and d == 0:
        raise ctx.error("delta is 0")
    count = ctx.size(host_max(ceil((l - s) / d), 0), "count")
    dtype = ctx.input(0).dtype
    i = positions(ctx, count)
    if dtype != "int64":
        i = ctx.add("cast", [i], {"dtype": dtype})
    start, delta = (reshape(ctx, ctx.input(k), ()) for k in (0, 2))
    return ctx.add("add", [ctx.add("mul", [i, delta]), start])


def _symbolic_range(ctx: NodeContext, start: Dim, limit: Dim, delta: Dim) -> Value:
    """Range over sizes known only at run time (``Range(0, seq, 1)``, the positions).

    With a static count the values are a shape value (``[seq, seq + 1]``); with a
    symbolic count they are computed at run time as ``start + delta * i``, where the
    positions ``i`` are the exclusive running sum of ones broadcast to the count."""
    dtype = ctx.input(0).dtype
    if not isinstance(delta, int) or delta == 0:
        raise SymbolicDimError(f"{ctx.where}: a range over sizes known only at run time "
                               f"needs a constant, nonzero delta, got {delta}")
    span = limit - start if delta > 0 else start - limit
    count = (span + abs(delta) - 1) // abs(delta)
    if not isinstance(count, int) and not _surely_nonnegative(count):
        raise SymbolicDimError(f"{ctx.where}: the range from {start} to {limit} may be empty "
                               "or not, depending on sizes known only at run time")
    if isinstance(count, int):
        count = max(count, 0)
        if count > FOLD_LIMIT:
            raise ctx.error(f"a range of {count} values over symbolic bounds is too long to "
                            "compute when the model is compiled")
        entries = np.empty(count, dtype=object)
        entries[:] = [start + i * delta for i in range(count)]
        return ctx.shape_value(entries, dtype, hint="range")
    if isinstance(start, Sym):
        raise SymbolicDimError(f"{ctx.where}: a range of {count} values starting at {start}, "
                               "both known only at run time, cannot be computed: no graph op "
                               "reads a size at run time")
    values = positions(ctx, count, dtype)
    if delta != 1:
        values = ctx.add("mul", [values, ctx.const(np.asarray(delta, dtype))])
    if start != 0:
        values = ctx.add("add", [values, ctx.const(np.asarray(start, dtype))])
    return values


def _surely_nonnegative(d: Dim) -> bool:
    try:
        return bool(d >= 0)
    except SymbolicDimError:
        return False


@converter("Trilu", since=14)
def convert_trilu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if len(x.shape) < 2:
        raise ctx.error(f"needs an input of rank >= 2, got {shape_text(x.shape)}")
    rows, cols = x.shape[-2:]
    upper = bool(int(ctx.attr("upper", 1)))
    if at_run_time(ctx, 1):
        return _trilu_run_time_k(ctx, x, upper)
    k_given = ctx.optional_constant(1, "k")
    k = 0 if k_given is None else int(k_given.reshape(-1)[0])
    zero = ctx.const(np.zeros((), dtype=x.dtype), hint="zero")
    if not is_static((rows, cols)):  # a causal mask over [seq, seq]
        offset = _diagonal_offsets(ctx, rows, cols)
        kept = ctx.add("ge" if upper else "le", [offset, ctx.const(np.int64(k), hint="k")])
        return ctx.add("where", [kept, x, zero])
    ctx.check_constant((rows, cols), "bool", "the mask")
    ones = np.ones((rows, cols), dtype=bool)
    mask = np.triu(ones, k) if upper else np.tril(ones, k)
    if mask.all():
        return x
    return ctx.add("where", [ctx.const(mask, hint="mask"), x, zero])


def _trilu_run_time_k(ctx: NodeContext, x: Value, upper: bool) -> Value:
    """Trilu with a k the run gives: k only moves the diagonal, never a shape, so the
    mask is the comparison of the offsets ``j - i`` (a constant for a static matrix)
    with k, read by the kernel as data."""
    if 0 in x.shape:
        return x  # nothing to mask
    rows, cols = x.shape[-2:]
    if is_static((rows, cols)):
        ctx.check_constant((rows, cols), "int64", "the offsets")
        offset = ctx.const(np.arange(cols, dtype=np.int64)[None, :]
                           - np.arange(rows, dtype=np.int64)[:, None], hint="offsets")
    else:
        offset = _diagonal_offsets(ctx, rows, cols)
    k = ctx.input(1)
    if k.shape != () and k.shape != (1,):
        raise ctx.error(f"k must be a scalar, got {shape_text(k.shape)}")
    k = reshape(ctx, k, ())
    if k.dtype != "int64":
        k = ctx.add("cast", [k], {"dtype": "int64"})
    kept = ctx.add("ge" if upper else "le", [offset, k])
    return ctx.add("where", [kept, x, ctx.const(np.zeros((), dtype=x.dtype), hint="zero")])


def _diagonal_offsets(ctx: NodeContext, rows: Dim, cols: Dim) -> Value:
    """``[rows, cols]`` int64, ``j - i`` at row i, column j, computed at run time: the
    masks of a matrix of symbolic sizes, which cannot be constants."""
    i = reshape(ctx, positions(ctx, rows), (rows, 1))
    j = reshape(ctx, positions(ctx, cols), (1, cols))
    return ctx.add("sub", [j, i])


@converter("EyeLike", since=9)
def convert_eye_like(ctx: NodeContext) -> Value:
    """Its input only lends a shape: the result is a constant, or for symbolic sizes a
    comparison of positions computed at run time."""
    x = ctx.input(0)
    if len(x.shape) != 2:
        raise ctx.error(f"needs a 2-D input, got {shape_text(x.shape)}")
    dtype = ctx.attr("dtype")
    np_dtype = x.dtype if dtype is None else to_numpy_dtype(int(dtype), f"{ctx.where}: dtype")
    k = int(ctx.attr("k", 0))
    if not is_static(x.shape):
        diagonal = ctx.add("eq", [_diagonal_offsets(ctx, *x.shape),
                                  ctx.const(np.int64(k), hint="k")])
        return ctx.add("cast", [diagonal], {"dtype": np_dtype})
    ctx.check_constant(x.shape, np_dtype, "the output")
    return ctx.const(np.eye(*x.shape, k=k, dtype=np_dtype), hint="eye")


@converter("OneHot", since=9)
def convert_one_hot(ctx: NodeContext) -> Value:
    """where(indices[..., None, ...] == arange(depth), on, off), the arange on ``axis``."""
    indices, values = ctx.input(0), ctx.input(2)
    if at_run_time(ctx, 1):
        if values.shape != (2,):
            raise ctx.error(f"needs two values [off, on], got values of shape "
                            f"{shape_text(values.shape)}")
        count, depth = _run_time_depth(ctx)
    else:
        count = int(np.asarray(ctx.constant(1, "depth")).reshape(-1)[0])
        if count <= 0 or values.shape != (2,):
            raise ctx.error(f"needs depth > 0 and two values [off, on], got depth {count} "
                            f"and values of shape {shape_text(values.shape)}")
        ctx.check_constant((count,), "int64", "the positions")
        depth = None
    rank = len(indices.shape) + 1
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    idx = indices if indices.dtype == "int64" else ctx.add("cast", [indices],
                                                            {"dtype": "int64"})
    negative = ctx.add("lt", [idx, ctx.scalar(0, idx)])
    if depth is None:
        depth = ctx.scalar(count, idx)
    idx = ctx.add("where", [negative, ctx.add("add", [idx, depth]), idx])
    idx = reshape(ctx, idx, (*indices.shape[:axis], 1, *indices.shape[axis:]))
    hot = ctx.add("eq", [idx, positions(ctx, count, "int64", axis, rank)])
    off = reshape(ctx, slice_axis(ctx, values, 0, 0, 1), ())
    on = reshape(ctx, slice_axis(ctx, values, 0, 1, 2), ())
    return ctx.add("where", [hot, on, off])


def _run_time_depth(ctx: NodeContext) -> tuple[Dim, Value]:
    """A depth the run gives: as the size of the new axis, computed by the host before
    each run (ONNX casts a float depth to an integer; a depth below 1 is refused by the
    run), and as int64 data, which moves negative indices up by it."""
    entries = host_values(ctx, 1, "depth")
    if len(entries) != 1:
        raise ctx.error(f"depth must have one element, has {len(entries)}")
    count = ctx.size(floor(entries[0]), "depth")
    depth = reshape(ctx, ctx.input(1), ())
    if depth.dtype != "int64":
        depth = ctx.add("cast", [depth], {"dtype": "int64"})
    return count, depth
