"""Readable text of tensor-IR functions, for debugging and `--dump-tir`."""

from __future__ import annotations

from .stmt import Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Stmt, Store


def print_func(f: PrimFunc) -> str:
    params = ", ".join(repr(b) for b in f.params)
    return f"func {f.name}({params}) {{\n{print_stmt(f.body, 1)}}}\n"


def print_stmt(s: Stmt, depth: int = 0) -> str:
    pad = "  " * depth
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f" {s.kind}"
        return f"{pad}for{kind} {s.var} in 0..{s.extent}:\n{print_stmt(s.body, depth + 1)}"
    if isinstance(s, Store):
        return f"{pad}{s.buffer.name}[{s.index}] = {s.value}\n"
    if isinstance(s, Seq):
        return "".join(print_stmt(x, depth) for x in s.stmts)
    if isinstance(s, IfThenElse):
        out = f"{pad}if {s.cond}:\n{print_stmt(s.then, depth + 1)}"
        if s.otherwise is not None:
            out += f"{pad}else:\n{print_stmt(s.otherwise, depth + 1)}"
        return out
    if isinstance(s, Allocate):
        b = s.buffer
        if b.scope == "fragment":
            return f"{pad}alloc {b!r}\n{print_stmt(s.body, depth)}"
        return f"{pad}alloc {b.name}: {b.dtype}[{b.size}] {b.scope}\n{print_stmt(s.body, depth)}"
    if isinstance(s, Barrier):
        return f"{pad}barrier\n"
    return f"{pad}{s!r}\n"
