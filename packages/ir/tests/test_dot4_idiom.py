"""te/dot4.py: the four-byte dot of the integer ops, found in lowered tensor IR, and the
alignment proof a packed load needs."""

from __future__ import annotations

from tensorsmith.ir.te import dot4
from tensorsmith.ir.te.expr import Binary, Cast, Const, Expr, Load, Var
from tensorsmith.ir.te.stmt import Buffer

X = Buffer("x", (256,), "uint8")
W = Buffer("w", (256,), "int8")
i, k = Var("i"), Var("k")


def c(v: int) -> Expr:
    return Const(v, "int64")


def product(a: Buffer, ia: Expr, b: Buffer, ib: Expr) -> Expr:
    return Binary("mul", Cast(Load(a, (ia,), a.dtype), "int32"),
                  Cast(Load(b, (ib,), b.dtype), "int32"), "int32")


def dot(x_at: list[Expr], w_at: list[Expr], x: Buffer = X, w: Buffer = W) -> Expr:
    total = product(x, x_at[0], w, w_at[0])
    for xa, wa in zip(x_at[1:], w_at[1:]):
        total = Binary("add", total, product(x, xa, w, wa), "int32")
    return total


def base_x() -> Expr:  # ((i // 16) * 32) + k * 4, as qmatmul's lowering writes it
    return Binary("add", Binary("mul", Binary("floordiv", i, c(16), "int64"), c(32), "int64"),
                  Binary("mul", k, c(4), "int64"), "int64")


def at(base: Expr, j: int) -> Expr:
    return base if j == 0 else Binary("add", base, c(j), "int64")


def test_the_ops_dot_is_found() -> None:
    xs = [at(base_x(), j) for j in range(4)]
    ws = [at(Binary("mul", k, c(64), "int64"), j) for j in range(4)]
    found = dot4.match(dot(xs, ws))
    assert found is not None
    x, w = dot4.word(found.xs), dot4.word(found.ws)
    assert x is not None and w is not None and x.buffer is X and w.buffer is W
    assert dot4.multiple_of(x.indices[0], 4) and dot4.multiple_of(w.indices[0], 4)


def test_operands_in_either_order_are_found() -> None:
    xs = [at(base_x(), j) for j in range(4)]
    total = product(W, xs[0], X, xs[0])
    for j in range(1, 4):
        total = Binary("add", total, product(W, xs[j], X, xs[j]), "int32")
    found = dot4.match(total)
    assert found is not None
    assert all(isinstance(v, Load) and v.buffer is X for v in found.xs)
    assert all(isinstance(v, Load) and v.buffer is W for v in found.ws)


def test_what_is_not_the_dot_or_not_a_word() -> None:
    xs = [at(base_x(), j) for j in range(4)]
    assert dot4.match(dot(xs[:3], xs[:3])) is None  # three terms
    signed = Buffer("s", (256,), "int8")
    assert dot4.match(dot(xs, xs, x=signed)) is None  # int8 x int8
    shuffled = dot4.match(dot([xs[0], xs[2], xs[1], xs[3]], xs))
    assert shuffled is not None and dot4.word(shuffled.xs) is None  # not in order
    assert dot4.word(shuffled.ws) is not None
    other = Buffer("x2", (256,), "uint8")
    total = Binary("add", dot(xs[:3], xs[:3]), product(other, xs[3], W, xs[3]), "int32")
    two = dot4.match(total)
    assert two is not None and dot4.word(two.xs) is None  # two activation buffers


def test_alignment_is_proven_only_where_it_holds() -> None:
    assert dot4.multiple_of(Binary("add", Binary("mul", i, c(8), "int64"), c(4), "int64"), 4)
    assert not dot4.multiple_of(Binary("add", Binary("mul", i, c(4), "int64"), c(1), "int64"),
                                4)
    assert not dot4.multiple_of(i, 4)  # an unknown leaf
    assert not dot4.multiple_of(Binary("mul", i, c(6), "int64"), 4)
    assert dot4.multiple_of(Binary("sub", Binary("mul", c(12), i, "int64"), c(8), "int64"), 4)
