"""Symbolic dimensions: sizes known only at run time, and integer expressions of them.

A dimension (:data:`Dim`) is a Python ``int`` or a :class:`Sym`. A ``Sym`` is a
polynomial with integer coefficients over *atoms*: named symbols (``batch``, ``seq``,
each a run-time size >= 1) and the few operations a polynomial cannot express
(``a // b``, ``a % b``, ``max(a, b)``, ``min(a, b)``), kept as opaque atoms. The
polynomial is kept canonical, so equal expressions compare and hash equal
(``batch*seq*768 == (seq*768)*batch``), and an expression that folds to a constant *is*
a Python int: code written for static shapes keeps running unchanged wherever the
symbols cancel, and arithmetic on a ``Sym`` with ints reads like arithmetic on ints.

What cannot be decided without the symbols' values raises :class:`SymbolicDimError`
(a ShapeError, so the importer names the node): ``int(batch)``, ``batch < 5``,
``if batch - seq:``. Comparisons that hold for every value of the symbols (``batch >= 1``,
``2*seq > 1``) are answered.

Shape expressions print as Python-like text (``batch*seq``, ``(seq + 1)//2``,
``max(a, b)``) and :func:`parse_dim` reads that text back, for the graph's text form and
the execution plan.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from .errors import ShapeError

__all__ = [
    "Assumption",
    "Dim",
    "Sym",
    "SymbolicDimError",
    "assume_equal",
    "assuming",
    "dim_max",
    "dim_min",
    "evaluate",
    "fold",
    "free_symbols",
    "is_static",
    "math_prod",
    "parse_dim",
    "shape_text",
    "static_dim",
    "symbol",
]

Dim = Union[int, "Sym"]

#: An atom: a symbol's name, or (op, a, b) for op in floordiv, mod, max, min.
Atom = str | tuple[str, Any, Any]
#: A monomial: atoms with their powers, sorted by the atom's text.
Monomial = tuple[tuple[Atom, int], ...]

_OPAQUE = ("floordiv", "mod", "max", "min")


class SymbolicDimError(ShapeError):
    """A question about a symbolic dimension that only its run-time value answers."""


class Sym:
    """A canonical polynomial over symbols and opaque atoms (see the module docstring).

    Build one with :func:`symbol` and arithmetic; never construct one directly."""

    __slots__ = ("_hash", "terms")

    def __init__(self, terms: Mapping[Monomial, int]) -> None:
        self.terms: tuple[tuple[Monomial, int], ...] = tuple(
            sorted(((m, c) for m, c in terms.items() if c), key=lambda t: _mono_key(t[0])))
        self._hash = hash(self.terms)

    # -- construction helpers -----------------------------------------------------------
    @staticmethod
    def _make(terms: Mapping[Monomial, int]) -> Dim:
        terms = {m: c for m, c in terms.items() if c}
        if not terms:
            return 0
        if len(terms) == 1 and () in terms:
            return terms[()]
        return Sym(terms)

    def _as_dict(self) -> dict[Monomial, int]:
        return dict(self.terms)

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        out = self._as_dict()
        for m, c in _terms(other):
            out[m] = out.get(m, 0) + c
        return Sym._make(out)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return Sym._make({m: -c for m, c in self.terms})

    def __sub__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return self + (-_check_dim(other))

    def __rsub__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return _check_dim(other) + (-self)

    def __mul__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _terms(other):
                m = _mono_mul(m1, m2)
                out[m] = out.get(m, 0) + c1 * c2
        return Sym._make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return _floordiv(self, _check_dim(other))

    def __rfloordiv__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return _floordiv(_check_dim(other), self)

    def __mod__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return _mod(self, _check_dim(other))

    def __rmod__(self, other: Dim) -> Dim:
        if not _is_dim(other):
            return NotImplemented
        return _mod(_check_dim(other), self)

    def __pos__(self) -> Sym:
        return self

    # -- comparison -----------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and self.terms == other.terms

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Dim) -> bool:
        return _decide(self - _check_dim(other), "<", self, other)

    def __le__(self, other: Dim) -> bool:
        return _decide(self - _check_dim(other), "<=", self, other)

    def __gt__(self, other: Dim) -> bool:
        return _decide(_check_dim(other) - self, "<", self, other, ">")

    def __ge__(self, other: Dim) -> bool:
        return _decide(_check_dim(other) - self, "<=", self, other, ">=")

    def __bool__(self) -> bool:
        low = lower_bound(self)
        if low is not None and low >= 1:
            return True
        raise SymbolicDimError(f"whether the size '{self}' is zero is known only at run time")

    def __int__(self) -> int:
        raise SymbolicDimError(
            f"a fixed size is needed where the model has the size '{self}', known only at "
            "run time; fix it with --dim NAME=SIZE or --input-shape (from_onnx(dims=...) "
            "or shapes=...)")

    __index__ = __int__

    def __float__(self) -> float:
        return float(int(self))

    # -- text -----------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = []
        for m, c in self.terms:
            factors = [_atom_text(a) for a, p in m for _ in range(p)]
            if not factors:
                parts.append((c, str(abs(c))))
                continue
            body = "*".join(factors)
            parts.append((c, body if abs(c) == 1 else f"{abs(c)}*{body}"))
        text = ""
        for i, (c, body) in enumerate(parts):
            if i == 0:
                text = body if c > 0 else f"-{body}"
            else:
                text += f" + {body}" if c > 0 else f" - {body}"
        return text

    def __repr__(self) -> str:
        return f"Sym({self})"


def symbol(name: str) -> Sym:
    """The symbol ``name``: a size known at run time, at least 1."""
    if not name.isidentifier():
        raise ValueError(f"a symbol's name must be an identifier, not {name!r}")
    return Sym({((name, 1),): 1})


# -- queries -------------------------------------------------------------------------------
def is_static(shape: Iterable[Dim]) -> bool:
    """Whether every dim is an int."""
    return all(isinstance(d, int) for d in shape)


def static_dim(d: Dim, what: str) -> int:
    """``d`` as an int, or a SymbolicDimError saying that ``what`` needs a fixed size."""
    if isinstance(d, Sym):
        raise SymbolicDimError(
            f"{what} must be known when the model is compiled, but it is '{d}', known only "
            "at run time; fix it with --dim NAME=SIZE or --input-shape "
            "(from_onnx(dims=...) or shapes=...)")
    return int(d)


def free_symbols(dims: Dim | Iterable[Dim]) -> set[str]:
    """The names of the symbols in a dim or a shape."""
    out: set[str] = set()
    for d in (dims,) if isinstance(dims, (int, Sym)) else dims:
        if isinstance(d, Sym):
            for m, _ in d.terms:
                for a, _p in m:
                    if isinstance(a, str):
                        out.add(a)
                    else:
                        out |= free_symbols((a[1], a[2]))
    return out


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    """The value of ``d`` with each symbol's value from ``env`` (KeyError names a missing
    one)."""
    return fold(d, lambda c: c, lambda name: int(env[name]), _INT_OPS)


T = TypeVar("T")


def fold(d: Dim, const: Callable[[int], T], sym: Callable[[str], T],
         ops: Mapping[str, Callable[[T, T], T]]) -> T:
    """``d`` rebuilt in another algebra: ``const`` and ``sym`` make its leaves, ``ops``
    (add, mul, floordiv, mod, max, min) combine them. The te and C code generators turn
    dims into expressions this way without knowing the polynomial's layout."""
    if isinstance(d, int):
        return const(d)
    total: T | None = None
    for m, c in d.terms:
        term: T | None = None if c == 1 else const(c)
        for a, p in m:
            leaf = sym(a) if isinstance(a, str) else ops[a[0]](
                fold(a[1], const, sym, ops), fold(a[2], const, sym, ops))
            for _ in range(p):
                term = leaf if term is None else ops["mul"](term, leaf)
        if term is None:
            term = const(c)
        total = term if total is None else ops["add"](total, term)
    assert total is not None
    return total


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b, "max": max, "min": min,
}


def lower_bound(d: Dim) -> int | None:
    """The least value ``d`` takes over all symbol values >= 1, where that is simple to
    see (every coefficient and atom nondecreasing in the symbols), else None."""
    if isinstance(d, int):
        return d
    total = 0
    for m, c in d.terms:
        if m and c < 0:
            return None
        value = c
        for a, p in m:
            low = _atom_lower(a)
            if low is None:
                return None
            value *= low**p
        total += value
    return total


def dim_max(a: Dim, b: Dim) -> Dim:
    """max(a, b), folded where the answer is clear (equal dims; a broadcast 1)."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    if a == b:
        return a
    for x, y in ((a, b), (b, a)):  # max(x, 1) is x where x is a size (at least 1)
        low = lower_bound(x)
        if isinstance(y, int) and low is not None and low >= y:
            return x
    return _atom("max", *sorted((a, b), key=str))


def dim_min(a: Dim, b: Dim) -> Dim:
    """min(a, b), folded where the answer is clear."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if a == b:
        return a
    return _atom("min", *sorted((a, b), key=str))


def shape_text(shape: Sequence[Dim]) -> str:
    """``[batch, 3, 224, 224]``: how errors and the text form print a shape."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


# -- assumptions ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Assumption:
    """``lhs == rhs`` must hold at run time. Shape inference assumes it where the model only
    makes sense if it holds (``seq`` added to a ``min(512, seq)`` slice of a position table
    means ``seq <= 512``); the graph keeps it, and the runtime refuses a run whose sizes
    break it with ``reason`` (naming the node) instead of computing garbage."""

    lhs: Dim
    rhs: Dim
    reason: str


_ASSUMPTIONS: ContextVar[list[Assumption] | None] = ContextVar("assumptions", default=None)


_COMPUTED: ContextVar[frozenset[str]] = ContextVar("computed", default=frozenset())


@contextmanager
def assuming(computed: Iterable[str] = ()) -> Iterator[list[Assumption]]:
    """Within this block :func:`assume_equal` records what it assumes (in the list it
    yields) instead of raising: graph construction opens one around each op's inference.
    ``computed`` names the symbols computed from inputs' values (host_sizes.py), about
    which :func:`assume_if_computed` assumes too."""
    log: list[Assumption] = []
    token = _ASSUMPTIONS.set(log)
    names = _COMPUTED.set(frozenset(computed))
    try:
        yield log
    finally:
        _ASSUMPTIONS.reset(token)
        _COMPUTED.reset(names)


def assume_if_computed(a: Dim, b: Dim, reason: str) -> bool:
    """Assume ``a == b`` (see :func:`assume_equal`) where it involves a size computed from
    inputs' values: nothing but the run can tell whether a Reshape's target given as an
    input has the input's element count, and the run checks it. False elsewhere."""
    if _ASSUMPTIONS.get() is None or not free_symbols((a, b)) & _COMPUTED.get():
        return False
    assume_equal(a, b, reason)
    return True


def assume_equal(a: Dim, b: Dim, reason: str) -> Dim:
    """``a``, given that ``a == b`` at run time: the simpler of the two (an int, else the
    one with fewer terms), recording the assumption where :func:`assuming` is active.
    Outside it, two dims that differ are a SymbolicDimError with ``reason``; two different
    ints are never assumed equal (that is the caller's ShapeError)."""
    if a == b:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{reason}: {a} != {b}")
    log = _ASSUMPTIONS.get()
    if log is None:
        raise SymbolicDimError(f"{reason}, which holds only for some run-time sizes")
    log.append(Assumption(a, b, reason))
    return min((a, b), key=_complexity)


def _complexity(d: Dim) -> tuple[int, int, str]:
    if isinstance(d, int):
        return (0, 0, str(d))
    atoms = sum(1 for m, _ in d.terms for a, _p in m if not isinstance(a, str))
    return (1 + atoms, len(d.terms), str(d))


# -- parsing -------------------------------------------------------------------------------
def parse_dim(text: str) -> Dim:
    """A dim from its printed form: an int, a name, or ``+ - * // %``, ``max``, ``min``
    and parentheses over those. Raises ValueError naming the text otherwise."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        return _from_ast(tree)
    except (SyntaxError, ValueError, RecursionError) as e:
        raise ValueError(f"'{text}' is not a dimension (an integer, a symbol name, or an "
                         f"expression of them with + - * // % max min): {e}") from None


def _from_ast(node: ast.AST) -> Dim:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_check_dim(_from_ast(node.operand))
    if isinstance(node, ast.BinOp):
        a, b = _from_ast(node.left), _from_ast(node.right)
        binops: dict[type, Callable[[Any, Any], Dim]] = {
            ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y,
            ast.Mult: lambda x, y: x * y, ast.FloorDiv: lambda x, y: x // y,
            ast.Mod: lambda x, y: x % y}
        if type(node.op) in binops:
            return binops[type(node.op)](a, b)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("max", "min") and len(node.args) == 2 and not node.keywords):
        a, b = (_from_ast(x) for x in node.args)
        return dim_max(a, b) if node.func.id == "max" else dim_min(a, b)
    raise ValueError(f"unexpected {ast.dump(node)[:60]}")


# -- internals ------------------------------------------------------------------------------
def _is_dim(x: object) -> bool:
    """An int (NumPy's too) or a Sym: what dim arithmetic takes; other types (te
    expressions) get NotImplemented, so their own operators take over."""
    return isinstance(x, (int, Sym)) or (hasattr(x, "__index__") and not hasattr(x, "dtype")
                                         ) or type(x).__module__ == "numpy"


def _check_dim(x: object) -> Dim:
    if isinstance(x, bool) or not isinstance(x, (int, Sym)):
        if hasattr(x, "__index__") and not isinstance(x, Sym):
            return int(x)  # type: ignore[call-overload]  (NumPy integers)
        raise TypeError(f"a dimension must be an int or a symbolic size, not {type(x).__name__}")
    return x


def _terms(x: object) -> tuple[tuple[Monomial, int], ...]:
    x = _check_dim(x)
    if isinstance(x, int):
        return (((), x),)
    return x.terms


def _atom_text(a: Atom) -> str:
    if isinstance(a, str):
        return a
    op, x, y = a
    if op in ("max", "min"):
        return f"{op}({x}, {y})"
    sign = "//" if op == "floordiv" else "%"
    return f"{_paren(x)}{sign}{_paren(y)}"


def _paren(d: Dim) -> str:
    text = str(d)
    simple = (isinstance(d, int) and d >= 0) or (isinstance(d, Sym) and len(d.terms) == 1 \
        and d.terms[0][1] == 1 and len(d.terms[0][0]) == 1 and d.terms[0][0][0][1] == 1)
    return text if simple else f"({text})"


def _mono_key(m: Monomial) -> tuple[int, str]:
    return (-sum(p for _, p in m), " ".join(f"{_atom_text(a)}^{p}" for a, p in m))


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    powers: dict[Atom, int] = dict(m1)
    for a, p in m2:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda t: _atom_text(t[0])))


def _atom(op: str, a: Dim, b: Dim) -> Sym:
    return Sym({(((op, a, b), 1),): 1})


def _atom_lower(a: Atom) -> int | None:
    if isinstance(a, str):
        return 1
    op, x, y = a
    lx, ly = lower_bound(x), lower_bound(y)
    if lx is None or ly is None:
        return None
    if op == "max":
        return max(lx, ly)
    if op == "min":
        return min(lx, ly)
    if op == "floordiv" and isinstance(y, int) and y > 0:
        return lx // y
    return 0 if op == "mod" and lx >= 0 else None


def _floordiv(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if b == 1:
        return a
    if isinstance(b, int) and b == 0:
        raise SymbolicDimError(f"'{a}' divided by zero")
    exact = _exact_quotient(a, b)
    if exact is not None:
        return exact
    return _atom("floordiv", a, b)


def _mod(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if b == 1:
        return 0
    if _exact_quotient(a, b) is not None:
        return 0
    return _atom("mod", a, b)


def _exact_quotient(a: Dim, b: Dim) -> Dim | None:
    """a / b where b is one term (coefficient times a monomial) dividing every term of a."""
    bt = _terms(b)
    if len(bt) != 1:
        return 1 if a == b else None  # a polynomial divisor divides only itself here
    (bm, bc), = bt
    if bc == 0:
        return None
    out: dict[Monomial, int] = {}
    bpow = dict(bm)
    for m, c in _terms(a):
        if c % bc:
            return None
        powers = dict(m)
        for atom, p in bpow.items():
            if powers.get(atom, 0) < p:
                return None
            powers[atom] -= p
        mono = tuple(sorted(((k, v) for k, v in powers.items() if v),
                            key=lambda t: _atom_text(t[0])))
        out[mono] = out.get(mono, 0) + c // bc
    return Sym._make(out)


def _decide(diff: Dim, rel: str, a: object, b: object, shown: str | None = None) -> bool:
    """Decide ``diff < 0`` (rel "<") or ``diff <= 0`` (rel "<=") for every symbol value,
    where the lower bounds of diff or -diff settle it."""
    low = lower_bound(diff)
    if low is not None and (low >= 0 if rel == "<" else low > 0):
        return False
    high_neg = lower_bound(-_check_dim(diff))  # -diff >= high_neg, so diff <= -high_neg
    if high_neg is not None and (high_neg > 0 if rel == "<" else high_neg >= 0):
        return True
    raise SymbolicDimError(
        f"whether {a} {shown or rel} {b} holds depends on sizes known only at run time")


def math_prod(dims: Iterable[Dim]) -> Dim:
    """The product of dims (``math.prod`` works too; this one is typed for Dim)."""
    out: Dim = 1
    for d in dims:
        out = out * d
    return out

