"""Which int64 index expressions can be computed in 32 bits.

The tensor IR types every index as int64. GPUs emulate 64-bit integer arithmetic with
several 32-bit instructions (and some lack it), so the emitter computes an int64
expression in int32 when interval arithmetic proves that it and every subexpression fit:
loop and thread variables have known extents, so flat indices and guards nearly always
do. Values that come from memory (an int64 tensor's data) have no known range and stay
64-bit, as does anything built from them.

Sizes known only at run time (``SymVar``, and the loops and workgroup IDs they extend)
are "sized" variables: an expression that reads one is computed in int32 on the
runtime's promise that every run-time size of the model -- each tensor's element
count, each workgroup count, each size the plan writes -- fits in int32 (the GPU
runtimes refuse shapes that break it, runtime/shapes.py), which bounds the flat indices,
extents and guards the kernels compute from them.
"""

from __future__ import annotations

from tensorsmith.ir.te.expr import Binary, Const, Expr, Select, SymVar, Var

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
Interval = tuple[int, int]


class RangeAnalysis:
    """Intervals of integer index expressions, given the variables' bounds."""

    def __init__(self) -> None:
        self.bounds: dict[int, Interval] = {}
        self.sized: set[int] = set()  # ids of the variables bounded by run-time sizes
        # id(expr) -> (expr, interval, all-32-bit, sized); holding expr keeps its id unique.
        self._memo: dict[int, tuple[Expr, Interval | None, bool, bool]] = {}

    def bind(self, var: Var, lo: int, hi: int) -> None:
        if self.bounds.get(id(var), (lo, hi)) != (lo, hi) or id(var) in self.sized:
            self._memo.clear()  # a variable reused with other bounds: forget derived ranges
        self.sized.discard(id(var))
        self.bounds[id(var)] = (lo, hi)

    def bind_sized(self, var: Var, lo: int = 0) -> None:
        """``var`` ranges from ``lo`` over a run-time extent (see the module docstring)."""
        self._memo.clear()
        self.bounds[id(var)] = (lo, INT32_MAX)
        self.sized.add(id(var))

    def interval(self, e: Expr) -> Interval | None:
        """The values ``e`` can take, or None when unknown (data, floats, unknown ops)."""
        return self._analyse(e)[0]

    def fits32(self, e: Expr) -> bool:
        """True when ``e`` and all its subexpressions stay within int32."""
        iv, all32 = self._analyse(e)
        return iv is not None and all32

    def nonnegative(self, e: Expr) -> bool:
        iv = self.interval(e)
        return iv is not None and iv[0] >= 0

    def positive(self, e: Expr) -> bool:
        iv = self.interval(e)
        return iv is not None and iv[0] > 0

    def _analyse(self, e: Expr) -> tuple[Interval | None, bool]:
        hit = self._memo.get(id(e))
        if hit is None:
            iv, children32, sized = self._compute(e)
            if sized and iv is not None:  # within int32 by the runtime's promise
                iv = (max(iv[0], INT32_MIN), min(iv[1], INT32_MAX))
            inside = iv is not None and iv[0] >= INT32_MIN and iv[1] <= INT32_MAX
            hit = (e, iv, children32 and inside, sized)
            self._memo[id(e)] = hit
        return hit[1], hit[2]

    def _sized(self, e: Expr) -> bool:
        self._analyse(e)
        return self._memo[id(e)][3]

    def _compute(self, e: Expr) -> tuple[Interval | None, bool, bool]:
        if e.dtype not in ("int64", "int32"):
            return None, False, False
        if isinstance(e, Const):
            v = int(e.value)
            return (v, v), True, False
        if isinstance(e, SymVar):
            return (1, INT32_MAX), True, True
        if isinstance(e, Var):
            return self.bounds.get(id(e)), True, id(e) in self.sized
        if isinstance(e, Select):
            (a, a32), (b, b32) = self._analyse(e.a), self._analyse(e.b)
            if a is None or b is None:
                return None, False, False
            sized = self._sized(e.a) or self._sized(e.b)
            return (min(a[0], b[0]), max(a[1], b[1])), a32 and b32, sized
        if not isinstance(e, Binary):
            return None, False, False
        (a, a32), (b, b32) = self._analyse(e.a), self._analyse(e.b)
        if a is None or b is None:
            return None, False, False
        return _binary(e.op, a, b), a32 and b32, self._sized(e.a) or self._sized(e.b)


def _binary(op: str, a: Interval, b: Interval) -> Interval | None:
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "sub":
        return a[0] - b[1], a[1] - b[0]
    if op == "mul":
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    if op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if op in ("floordiv", "div") and b[0] > 0:
        quotients = [x // y for x in a for y in b]
        return min(quotients), max(quotients)
    if op == "floormod" and b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        return 0, b[1] - 1
    return None


__all__ = ["INT32_MAX", "INT32_MIN", "RangeAnalysis"]
