"""Dynamic shapes for the executors written in Python (the GPU runtimes): learning the
symbols from the inputs' shapes, checking them, sizing and placing the buffers that
depend on them.

The CPU library does the same in C (tsm_runtime.c: ``check_input_shape``, ``bind``,
``place``); the rules and messages here are the same, so a shape refused on one device
is refused on every one, in the same words (docs/artifact.md, "Dynamic shapes"). What is
device-specific -- allocating memory, binding it, launching -- stays in each executor:
this module only computes.

A GPU kernel computes its indices in 32 bits where the compiler proves they fit, and
those that involve run-time sizes on the promise that every size the plan names fits in
int32 (codegen-spirv's ranges.py); :class:`Binder` keeps that promise with ``limit``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from tensorsmith.runtime.errors import ArtifactError, InputError, TensorsmithError
from tensorsmith.runtime.plan import Buffer, Plan, Tensor

__all__ = ["ITEMSIZE", "MAX_TENSOR_BYTES", "Binder", "Binding", "GridCounter", "SizeExpr",
           "grown_size", "input_shape_bytes", "nbytes", "place_by_lifetime", "size_expr",
           "symbol_buffers", "value_reads"]

#: Bytes of one tensor at most, as in the CPU library (TSM_MAX_TENSOR_BYTES).
MAX_TENSOR_BYTES = 2**48
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
             "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8,
             "float64": 8}

#: A size's expression, evaluated for the symbols' values.
SizeExpr = Callable[[Mapping[str, int]], int]
#: Element ``k`` of an input's values, by the input's name (for computed sizes).
ReadValue = Callable[[str, int], int | float]
#: A computed size's expression, evaluated for the symbols' values and the inputs' values.
HostFunction = Callable[[Mapping[str, int], ReadValue], int | float]

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Div: lambda a, b: a / b}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}
_CALLS: dict[str, Callable[..., Any]] = {"max": max, "min": min, "floor": math.floor,
                                         "ceil": math.ceil}


def host_expr(text: str) -> HostFunction:
    """A computed size's text (tensorsmith-ir's host_sizes.py: ints, floats, symbols,
    ``+ - * / // %``, comparisons, ``a if c else b``, ``max``, ``min``, ``floor``, ``ceil``
    and ``value("input", k)``) as a function of the symbols' and the inputs' values; a
    ValueError for any other text. Comparisons give 1 or 0, as the CPU library's C."""
    tree = ast.parse(text, mode="eval").body

    def build(node: ast.AST) -> HostFunction:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            value = node.value
            return lambda env, read: value
        if isinstance(node, ast.Name):
            name = node.id
            return lambda env, read: env[name]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = build(node.operand)
            return lambda env, read: -inner(env, read)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            fn, a, b = _BINARY[type(node.op)], build(node.left), build(node.right)
            return lambda env, read: fn(a(env, read), b(env, read))
        if (isinstance(node, ast.Compare) and len(node.ops) == 1
                and type(node.ops[0]) in _COMPARE):
            cmp, a, b = _COMPARE[type(node.ops[0])], build(node.left), build(node.comparators[0])
            return lambda env, read: int(cmp(a(env, read), b(env, read)))
        if isinstance(node, ast.IfExp):
            c, a, b = build(node.test), build(node.body), build(node.orelse)
            return lambda env, read: a(env, read) if c(env, read) else b(env, read)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            fn_name, args = node.func.id, node.args
            if (fn_name == "value" and len(args) == 2 and isinstance(args[0], ast.Constant)
                    and isinstance(args[0].value, str) and isinstance(args[1], ast.Constant)
                    and type(args[1].value) is int):
                source, k = args[0].value, args[1].value
                return lambda env, read: read(source, k)
            if fn_name in _CALLS and len(args) == (1 if fn_name in ("floor", "ceil") else 2):
                fn, parts = _CALLS[fn_name], [build(a) for a in args]
                return lambda env, read: fn(*(p(env, read) for p in parts))
        raise ValueError(f"{text!r} is not a size expression")

    return build(tree)


def _no_values(name: str, k: int) -> int:
    raise ValueError(f"a size reads value({name!r}, {k}), but sizes depend on symbols only")


def size_expr(text: str) -> SizeExpr:
    """The plan's text of a size (``"(seq + 1)//2"``: ints, symbols, ``+ - * // %``,
    ``max``, ``min``, parentheses) as a function of the symbols' values; a ValueError
    for any other text."""
    fn = host_expr(text)
    if any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "value"
           for n in ast.walk(ast.parse(text, mode="eval"))):
        raise ValueError(f"{text!r} is not a size expression")
    return lambda env: int(fn(env, _no_values))


@dataclass(frozen=True)
class Binding:
    """One run's symbols (``values``, in the plan's order), the shape of every input and
    output, and the bytes of every plan buffer whose size depends on them."""

    values: tuple[int, ...]
    symbols: dict[str, int]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    buffer_bytes: dict[int, int]

    def describe(self) -> str:
        """``batch = 2, seq = 9``: the symbols' values, for messages."""
        return ", ".join(f"{k} = {v}" for k, v in self.symbols.items())


@dataclass(frozen=True)
class _Axis:
    text: str
    size: SizeExpr


class Binder:
    """The symbolic sizes of a plan, read once; :meth:`check_input_shape` and
    :meth:`bind` are a run's checks. ``limit``: the largest size (bytes of a tensor,
    elements of an axis) a device takes; ``device`` names it in that refusal."""

    def __init__(self, path: Path, plan: Plan, limit: int = MAX_TENSOR_BYTES,
                 device: str = "") -> None:
        self.path, self.plan, self.limit, self.device = path, plan, limit, device
        self.symbols = plan.symbols
        try:
            self._inputs = [self._axes(t) for t in plan.inputs]
            self._outputs = [self._axes(t) for t in plan.outputs]
            self._buffers = {i: _Axis(b.symbolic_nbytes, size_expr(b.symbolic_nbytes))
                             for i, b in enumerate(plan.buffers) if b.symbolic_nbytes is not None}
            self._assumptions = [(a, size_expr(a.lhs), size_expr(a.rhs))
                                 for a in plan.assumptions]
        except (ValueError, SyntaxError) as e:
            raise ArtifactError(f"artifact '{path}' is inconsistent: a size of its plan is "
                                f"malformed ({e}); re-export it") from None
        # each symbol's first bare occurrence among the inputs' axes
        self._source: dict[str, tuple[int, int]] = {}
        for i, t in enumerate(plan.inputs):
            for d, dim in enumerate(t.shape):
                if isinstance(dim, str) and dim in self.symbols:
                    self._source.setdefault(dim, (i, d))
        try:
            self._computed = [(c, host_expr(c.expr)) for c in plan.computed]
        except (ValueError, SyntaxError) as e:
            raise ArtifactError(f"artifact '{path}' is inconsistent: a computed size of its "
                                f"plan is malformed ({e}); re-export it") from None
        try:
            self._counted = [(c, size_expr(c.bound)) for c in plan.counted]
        except (ValueError, SyntaxError) as e:
            raise ArtifactError(f"artifact '{path}' is inconsistent: a counted size of its "
                                f"plan is malformed ({e}); re-export it") from None
        #: the steps after which the run reads counts (plan.CountedSize): an executor
        #: waits for the device there and passes what it reads to :meth:`count`
        self.counting_steps = frozenset(c.step for c in plan.counted)
        names = [t.name for t in plan.inputs]
        #: the inputs whose values the computed sizes read: an executor keeps them on the
        #: host and passes them to :meth:`bind`
        self.value_inputs = sorted({names.index(n) for c in plan.computed
                                    for n in value_reads(c.expr) if n in names})
        computed = {c.name for c in (*plan.computed, *plan.counted)}
        missing = [s for s in self.symbols if s not in self._source and s not in computed]
        if missing:
            raise ArtifactError(f"artifact '{path}' is inconsistent: no input gives the "
                                f"size{'s' if len(missing) > 1 else ''} "
                                f"{', '.join(missing)}; re-export it")

    @staticmethod
    def _axes(t: Tensor) -> list[int | _Axis]:
        return [d if isinstance(d, int) else _Axis(d, size_expr(d)) for d in t.shape]

    def _fail(self, what: str) -> InputError:
        return InputError(f"artifact '{self.path}': {what}")

    # ---- one input's shape -------------------------------------------------------------

    def check_input_shape(self, index: int, shape: Sequence[int]) -> int:
        """Refuse ``shape`` for input ``index`` where its rank or an axis of static size
        differs or an axis that is a bare symbol is below 1; its bytes."""
        t, axes = self.plan.inputs[index], self._inputs[index]
        if len(shape) != len(axes):
            return self._raise(f"input '{t.name}' has {len(axes)} "
                               f"ax{'is' if len(axes) == 1 else 'es'}, got a shape of "
                               f"{len(shape)}")
        for d, (n, axis) in enumerate(zip(shape, axes)):
            if n < 0:
                self._raise(f"input '{t.name}' axis {d} is {n}, a negative size")
            if isinstance(axis, int) and n != axis:
                self._raise(f"input '{t.name}' axis {d} is {n}, but the model takes {axis}")
            if isinstance(axis, _Axis) and axis.text in self.symbols and n < 1:
                self._raise(f"input '{t.name}' axis {d} is {n}, but it is the size "
                            f"'{axis.text}', which is at least 1")
        nbytes = math.prod(shape) * ITEMSIZE.get(t.dtype, 1)
        if t.is_symbolic and nbytes > MAX_TENSOR_BYTES:
            self._raise(f"input '{t.name}' of that shape would take more than 2**48 bytes "
                        "(256 TiB)")
        return nbytes

    def _raise(self, what: str) -> int:
        raise self._fail(what)

    # ---- the whole binding -------------------------------------------------------------

    def bind(self, shapes: Sequence[Sequence[int]],
             values: Callable[[int], bytes | memoryview] | None = None,
             placeholder: bool = False) -> Binding:
        """Learn the symbols from the inputs' ``shapes`` (and the computed ones from the
        bytes ``values(i)`` of each input in :attr:`value_inputs`) and check every
        symbolic axis, the assumptions and the sizes against them (the CPU library's
        ``bind``). ``placeholder``: every computed size 1 (before any run)."""
        env: dict[str, int] = {}
        for name in self.symbols:
            if name not in self._source:
                continue  # computed below
            i, d = self._source[name]
            env[name] = int(shapes[i][d])
            if env[name] < 1:
                self._raise(f"'{name}' is {env[name]} from input "
                            f"'{self.plan.inputs[i].name}' axis {d}, but a size known only at "
                            "run time is at least 1")
        if placeholder:
            env.update((c.name, 1) for c, _ in self._computed)
        elif self._computed:
            self._compute(env, values)
        env.update((c.name, 1) for c, _ in self._counted)
        for c, bound in self._counted:  # placed for the bounds, in order
            env[c.name] = bound(env)
        values_ = tuple(env[s] for s in self.symbols)
        binding = Binding(values_, env, tuple(tuple(int(n) for n in s) for s in shapes), (), {})
        for i, axes in enumerate(self._inputs):
            for d, axis in enumerate(axes):
                if isinstance(axis, _Axis) and shapes[i][d] != axis.size(env):
                    self._refuse_axis(i, d, shapes[i][d], axis, env)
        for a, lhs, rhs in self._assumptions:
            if not placeholder and lhs(env) != rhs(env):
                self._raise(f"these input shapes break what the model assumes: {a.message}; "
                            f"with {binding.describe()}, {a.lhs} = {lhs(env)} but {a.rhs} = "
                            f"{rhs(env)}")
        buffer_bytes = {}
        for k, size in self._buffers.items():
            n = buffer_bytes[k] = size.size(env)
            if n < 0 or n > min(self.limit, MAX_TENSOR_BYTES):
                over = ("over the limit of 2**48 bytes (256 TiB) per tensor"
                        if n > MAX_TENSOR_BYTES else
                        f"over the limit of {self.limit} bytes per tensor {self.device}")
                self._raise(f"with {binding.describe()}, buffer {k} of the model would take "
                            f"{n} bytes ({size.text}), which is "
                            + ("negative: these shapes do not fit the model" if n < 0 else over))
        return Binding(values_, env, binding.input_shapes, self._output_shapes(binding),
                       buffer_bytes)

    def _output_shapes(self, binding: Binding) -> tuple[tuple[int, ...], ...]:
        outputs = []
        for t, axes in zip(self.plan.outputs, self._outputs, strict=True):
            shape = tuple(a if isinstance(a, int) else a.size(binding.symbols) for a in axes)
            for d, n in enumerate(shape):
                if n < 0:
                    text = axes[d].text  # type: ignore[union-attr]
                    self._raise(f"with {binding.describe()}, output '{t.name}' axis {d} would "
                                f"be {text} = {n}, a negative size: these shapes do not fit "
                                "the model")
            outputs.append(shape)
        return tuple(outputs)

    def count(self, binding: Binding, step: int, read: Callable[[int], int]) -> Binding:
        """``binding`` once step ``step`` has run: each size that step counted is the
        int64 ``read(buffer)`` plus one, checked against its bound (as tsm_runtime.c's
        ``learn_counts``, in the same words), and the outputs' shapes follow. The buffers
        stay where they are: they were placed for the bounds."""
        env = dict(binding.symbols)
        for c, _ in self._counted:
            if c.step != step:
                continue
            count, bound = int(read(c.buffer)), env[c.name]
            if not 0 <= count <= bound - 1:
                self._raise(f"{c.message}: it counted {count} results, outside 0..{bound - 1} "
                            f"('{c.name} - 1', at most {c.bound} - 1); the kernel that counts "
                            "them is wrong")
            env[c.name] = count + 1
        counted = replace(binding, values=tuple(env[s] for s in self.symbols), symbols=env)
        return replace(counted, output_shapes=self._output_shapes(counted))

    def _compute(self, env: dict[str, int],
                 values: Callable[[int], bytes | memoryview] | None) -> None:
        """The computed sizes into ``env``, in order, refused below 1 (as tsm_runtime.c's
        ``compute_values``, in the same words)."""
        arrays: dict[str, np.ndarray] = {}
        for i in self.value_inputs:
            if values is None:
                raise InputError(f"artifact '{self.path}': the executor gave no values of "
                                 f"input '{self.plan.inputs[i].name}', which sizes are "
                                 "computed from")
            t = self.plan.inputs[i]
            arrays[t.name] = np.frombuffer(bytes(values(i)), dtype=t.dtype)

        def read(name: str, k: int) -> int | float:
            return arrays[name][k].item()

        for c, fn in self._computed:
            try:
                value = fn(env, read)
            except (ZeroDivisionError, OverflowError, IndexError, KeyError, ValueError):
                self._raise(f"{c.message}: the size '{c.name}' cannot be computed from these "
                            "inputs (it overflows or divides by zero; `tensorsmith inspect` "
                            "shows how it is computed)")
            if isinstance(value, float) or value < 1 or value >= 2**63:
                self._raise(f"{c.message}: the size '{c.name}' computed from these inputs is "
                            f"{value}, but it must be at least 1 (`tensorsmith inspect` shows "
                            "how it is computed)")
            env[c.name] = int(value)

    def _refuse_axis(self, i: int, d: int, actual: int, axis: _Axis,
                     env: Mapping[str, int]) -> None:
        name = self.plan.inputs[i].name
        if axis.text in self.symbols:
            j, e = self._source[axis.text]
            self._raise(f"input '{name}' axis {d} is {actual}, but '{axis.text}' is "
                        f"{env[axis.text]} from input '{self.plan.inputs[j].name}' axis {e}")
        where = ", ".join(
            f"'{s}' is {env[s]} from input '{self.plan.inputs[self._source[s][0]].name}' "
            f"axis {self._source[s][1]}" for s in self.symbols if _mentions(axis.text, s))
        self._raise(f"input '{name}' axis {d} is {actual}, but it must be {axis.text} = "
                    f"{axis.size(env)}, where {where}")

    def at_ones(self) -> Binding:
        """The binding with every symbol 1 (what an executor reports before a run)."""
        return self.bind([tuple(1 if isinstance(a, _Axis) else a for a in axes)
                          for axes in self._inputs], placeholder=True)


def value_reads(text: str) -> set[str]:
    """The inputs a computed size's text reads with ``value("input", k)``."""
    return {n.args[0].value for n in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "value" and n.args
            and isinstance(n.args[0], ast.Constant)}


def _mentions(text: str, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(ast.parse(text)))


def input_shape_bytes(binder: Binder | None, path: Path, index: int,
                      shape: Sequence[int]) -> int:
    """The checks of an executor's ``set_input_shape`` (the CPU library's in C): a plan
    without symbols takes no other shapes, ``index`` must name an input, and the shape
    must fit it (:meth:`Binder.check_input_shape`); the input's bytes in that shape."""
    if binder is None:
        raise InputError(f"artifact '{path}': its inputs take the shapes they were "
                         "compiled for")
    if not 0 <= index < len(binder.plan.inputs):
        raise TensorsmithError(f"artifact '{path}': no input {index}")
    return binder.check_input_shape(index, shape)


def place_by_lifetime(buffers: Mapping[int, tuple[int, int, int]], alignment: int
                      ) -> tuple[dict[int, int], int]:
    """Offsets for buffers ``{index: (bytes, first_step, last_step)}`` in one region, each
    ``alignment``-aligned, two sharing bytes only where their steps do not meet: greedy
    first fit in order of first step, larger first (the CPU library's ``place``). Returns
    the offsets and the region's size."""
    order = sorted(buffers, key=lambda k: (buffers[k][1], -buffers[k][0], k))
    placed: list[tuple[int, int, int]] = []  # (offset, end, last_step)
    offsets: dict[int, int] = {}
    for k in order:
        nbytes, first, last = buffers[k]
        size = max(-(-max(nbytes, 4) // alignment) * alignment, alignment)
        live = sorted((o, e) for o, e, end_step in placed if end_step >= first)
        cursor = 0
        for o, e in live:
            if o - cursor >= size:
                break
            cursor = max(cursor, e)
        offsets[k] = cursor
        placed.append((cursor, cursor + size, last))
    return offsets, max((e for _, e, _ in placed), default=0)


def nbytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a tensor of ``shape`` and ``dtype``."""
    return math.prod(shape) * ITEMSIZE.get(dtype, 1)


def symbol_buffers(buffers: Sequence[Buffer]) -> dict[int, tuple[str, ...]]:
    """The plan buffers that hold symbols' values (int64, in the listed order): what an
    executor writes before a run at a new binding."""
    return {i: b.symbols for i, b in enumerate(buffers) if b.symbols}


def grown_size(have: int | None, need: int) -> int | None:
    """The size to reallocate a device buffer of ``have`` bytes (None: none yet) to, for a
    binding that needs ``need``; None where it fits. A buffer grows by half again at
    least, so that slowly growing shapes reallocate rarely."""
    if have is not None and have >= need:
        return None
    return need if have is None else max(need, have * 3 // 2)


Triple = tuple[int, int, int]


class _Dispatch(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def grid(self) -> tuple[int | str, int | str, int | str]: ...


class _Step(Protocol):
    @property
    def dispatches(self) -> Sequence[_Dispatch]: ...


class GridCounter:
    """Every dispatch's workgroup counts for a binding (the plan writes those that
    depend on sizes as text), their size expressions parsed once."""

    def __init__(self, steps: Sequence[_Step]) -> None:
        self.steps = steps
        self.exprs: dict[str, SizeExpr] = {}
        for s in steps:
            for d in s.dispatches:
                for g in d.grid:
                    if isinstance(g, str) and g not in self.exprs:
                        self.exprs[g] = size_expr(g)

    def count(self, binding: Binding, most: Sequence[int], where: str) -> list[list[Triple]]:
        """``[step][dispatch]`` workgroup counts; an InputError where one passes ``most``
        (the device's limit per axis)."""
        out = []
        for s in self.steps:
            row = []
            for d in s.dispatches:
                g = tuple(x if isinstance(x, int) else self.exprs[x](binding.symbols)
                          for x in d.grid)
                if any(n > m for n, m in zip(g, most)):
                    raise InputError(f"{where}: with {binding.describe()}, dispatch {d.name} "
                                     f"would need {list(g)} workgroups and the device allows "
                                     f"at most {list(most)}; run smaller shapes")
                row.append((g[0], g[1], g[2]))
            out.append(row)
        return out
