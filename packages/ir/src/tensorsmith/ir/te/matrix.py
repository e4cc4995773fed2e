"""Tensor-IR intrinsics of cooperative matrices: products a whole subgroup computes.

A GPU with cooperative matrices (Vulkan's VK_KHR_cooperative_matrix) multiplies small
matrices (16x16 by 16x16 on NVIDIA) held jointly by the invocations of a subgroup:
each invocation holds an unspecified part of each operand, so an operand is only ever
loaded, multiplied and stored whole, by the whole subgroup at once. The loop nests of
tensor expressions cannot say that, so a schedule that uses them (``tensorize``,
schedules/gpu_coop.py) lowers its stage to the statements below instead
(te/matrix_lower.py). Only codegens whose target offers cooperative matrices implement
them (codegen-spirv); every other codegen refuses them as statements it cannot emit,
and the default rules never produce them for such a target.

``Fragment`` buffers hold operands: a local array of ``count`` matrices of one use
("a", "b" or "accumulator") and shape, indexed by constants once unrolled loops are
unrolled. The chunk statements move 16 bytes at a time between global memory,
registers and shared memory: what the workgroup's staging copies are made of.
Every statement lists the buffers it reads and writes (``reads``/``writes``) and its
expressions (``exprs``), which is all a generic pass needs to know of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .expr import Expr
from .stmt import Buffer, Intrinsic

#: The uses of a cooperative matrix in ``C += A * B``.
USES = ("a", "b", "accumulator")
#: Bytes one chunk statement moves (a 128-bit vector load or store).
CHUNK_BYTES = 16
#: Who holds a fragment: a subgroup (VK_KHR_cooperative_matrix), or the whole workgroup
#: (VK_NV_cooperative_matrix2, where the driver stages the operands itself).
HOLDERS = ("subgroup", "workgroup")


@dataclass(eq=False)
class Fragment(Buffer):
    """``count`` cooperative matrices of ``rows`` x ``cols`` ``dtype`` elements with use
    ``use``, held by a subgroup or the whole workgroup (``held_by``), allocated
    (``Allocate``) like a local array."""

    use: str = "accumulator"
    rows: int = 16
    cols: int = 16
    held_by: str = "subgroup"

    def __post_init__(self) -> None:
        if self.use not in USES:
            raise ValueError(f"fragment {self.name}: use {self.use!r} is not one of {USES}")
        if self.held_by not in HOLDERS:
            raise ValueError(f"fragment {self.name}: held by {self.held_by!r}, not one of "
                             f"{HOLDERS}")

    def __repr__(self) -> str:
        held = ", workgroup" if self.held_by == "workgroup" else ""
        return (f"{self.name}: fragment<{self.use}, {self.dtype}, {self.rows}x{self.cols}"
                f"{held}>[{self.size}]")


def _item(buf: Buffer, slot: Expr) -> str:
    return f"{buf.name}[{slot}]"


def _aligned(align: int) -> str:
    return f", align={align}" if align > 1 else ""


@dataclass(eq=False)
class FragmentFill(Intrinsic):
    """Every element of ``frag[slot]`` set to ``value``."""

    frag: Fragment
    slot: Expr
    value: float

    def exprs(self) -> tuple[Expr, ...]:
        return (self.slot,)

    def map(self, fn: Callable[[Expr], Expr]) -> FragmentFill:
        return FragmentFill(self.frag, fn(self.slot), self.value)

    def __repr__(self) -> str:
        return f"fill {_item(self.frag, self.slot)} = {self.value}"


@dataclass(eq=False)
class FragmentLoad(Intrinsic):
    """``frag[slot]`` loaded from ``src`` (global or shared), row-major: row ``r`` from
    ``src[index + r * stride]`` on, ``index`` and ``stride`` in elements of ``src``,
    which may be 16-byte words (:data:`CHUNK_DTYPE`) holding several matrix elements.
    ``align``: bytes every row start is known to be aligned to (a codegen may tell the
    driver, which then moves whole vectors)."""

    frag: Fragment
    slot: Expr
    src: Buffer
    index: Expr
    stride: int
    align: int = 1

    @property
    def reads(self) -> tuple[Buffer, ...]:
        return (self.src,)

    def exprs(self) -> tuple[Expr, ...]:
        return (self.slot, self.index)

    def map(self, fn: Callable[[Expr], Expr]) -> FragmentLoad:
        return FragmentLoad(self.frag, fn(self.slot), self.src, fn(self.index), self.stride,
                            self.align)

    def __repr__(self) -> str:
        return (f"{_item(self.frag, self.slot)} = load_matrix({self.src.name}[{self.index}], "
                f"stride={self.stride}{_aligned(self.align)})")


@dataclass(eq=False)
class FragmentStore(Intrinsic):
    """``frag[slot]`` stored row-major into ``dst`` at ``index`` (row stride ``stride``),
    converted to ``dst``'s dtype; ``align`` as :class:`FragmentLoad`'s."""

    dst: Buffer
    index: Expr
    stride: int
    frag: Fragment
    slot: Expr
    align: int = 1

    @property
    def writes(self) -> tuple[Buffer, ...]:
        return (self.dst,)

    def exprs(self) -> tuple[Expr, ...]:
        return (self.index, self.slot)

    def map(self, fn: Callable[[Expr], Expr]) -> FragmentStore:
        return FragmentStore(self.dst, fn(self.index), self.stride, self.frag, fn(self.slot),
                             self.align)

    def __repr__(self) -> str:
        return (f"store_matrix({self.dst.name}[{self.index}], stride={self.stride}"
                f"{_aligned(self.align)}) = {_item(self.frag, self.slot)}")


@dataclass(eq=False)
class FragmentMulAdd(Intrinsic):
    """``acc[acc_slot] += a[a_slot] * b[b_slot]`` (a matrix product)."""

    acc: Fragment
    acc_slot: Expr
    a: Fragment
    a_slot: Expr
    b: Fragment
    b_slot: Expr

    def exprs(self) -> tuple[Expr, ...]:
        return (self.acc_slot, self.a_slot, self.b_slot)

    def map(self, fn: Callable[[Expr], Expr]) -> FragmentMulAdd:
        return FragmentMulAdd(self.acc, fn(self.acc_slot), self.a, fn(self.a_slot), self.b,
                              fn(self.b_slot))

    def __repr__(self) -> str:
        return (f"{_item(self.acc, self.acc_slot)} += {_item(self.a, self.a_slot)} @ "
                f"{_item(self.b, self.b_slot)}")


@dataclass(eq=False)
class ChunkLoad(Intrinsic):
    """Register chunk ``regs[slot]`` (16 bytes) = the 16 bytes of ``src`` (global) from
    element ``index`` on, which must be 16-byte aligned; zeros where ``valid`` is false
    (a tile's rows or columns past the tensor's edge)."""

    regs: Buffer
    slot: Expr
    src: Buffer
    index: Expr
    valid: Expr

    @property
    def reads(self) -> tuple[Buffer, ...]:
        return (self.src,)

    def exprs(self) -> tuple[Expr, ...]:
        return (self.slot, self.index, self.valid)

    def map(self, fn: Callable[[Expr], Expr]) -> ChunkLoad:
        return ChunkLoad(self.regs, fn(self.slot), self.src, fn(self.index), fn(self.valid))

    def __repr__(self) -> str:
        return (f"{_item(self.regs, self.slot)} = load_chunk({self.src.name}[{self.index}]) "
                f"if {self.valid} else 0")


@dataclass(eq=False)
class ChunkStore(Intrinsic):
    """The 16 bytes of register chunk ``regs[slot]`` stored into ``dst`` (shared) from
    element ``index`` on (one element where ``dst`` holds 16-byte words)."""

    dst: Buffer
    index: Expr
    regs: Buffer
    slot: Expr

    @property
    def writes(self) -> tuple[Buffer, ...]:
        return (self.dst,)

    def exprs(self) -> tuple[Expr, ...]:
        return (self.index, self.slot)

    def map(self, fn: Callable[[Expr], Expr]) -> ChunkStore:
        return ChunkStore(self.dst, fn(self.index), self.regs, fn(self.slot))

    def __repr__(self) -> str:
        return f"store_chunk({self.dst.name}[{self.index}]) = {_item(self.regs, self.slot)}"


#: dtype of a register-chunk buffer: each element is one 16-byte chunk.
CHUNK_DTYPE = "uint32x4"


def chunk_registers(name: str, count: int) -> Buffer:
    """A local buffer of ``count`` 16-byte register chunks."""
    return Buffer(name, (count,), CHUNK_DTYPE, "local")


def zeros(buf: Buffer) -> np.ndarray | None:
    """The memory of a fragment or register-chunk buffer in te/evaluate.py (None for
    other buffers): every invocation holds whole matrices, which stands for the
    subgroup's shared holding as long as the subgroup's invocations agree (the uniform
    operands the hardware requires)."""
    if isinstance(buf, Fragment):
        return np.zeros((buf.size, buf.rows, buf.cols), buf.dtype)
    if buf.dtype == CHUNK_DTYPE:
        return np.zeros((buf.size, CHUNK_BYTES), np.uint8)
    return None


def evaluate(s: Intrinsic, mem: dict[int, np.ndarray], value: Callable[[Expr], object]
             ) -> None:
    """Run ``s`` in one invocation of te/evaluate.py (``value`` evaluates expressions)."""

    def at(e: Expr) -> int:
        return int(value(e))  # type: ignore[call-overload]

    if isinstance(s, FragmentFill):
        mem[id(s.frag)][at(s.slot)] = s.value
    elif isinstance(s, FragmentLoad):
        f, src, start, stride = s.frag, mem[id(s.src)], at(s.index), s.stride
        if s.src.dtype == CHUNK_DTYPE:  # words of matrix elements
            lanes = CHUNK_BYTES // np.dtype(f.dtype).itemsize
            src, start, stride = src.reshape(-1).view(f.dtype), start * lanes, stride * lanes
        rows = [src[start + r * stride:start + r * stride + f.cols] for r in range(f.rows)]
        if any(len(r) != f.cols for r in rows):
            raise IndexError(f"load_matrix reads past the end of {s.src.name}")
        mem[id(f)][at(s.slot)] = np.array(rows)
    elif isinstance(s, FragmentStore):
        matrix, dst, start = mem[id(s.frag)][at(s.slot)], mem[id(s.dst)], at(s.index)
        for r in range(s.frag.rows):
            row = dst[start + r * s.stride:start + r * s.stride + s.frag.cols]
            if len(row) != s.frag.cols:
                raise IndexError(f"store_matrix writes past the end of {s.dst.name}")
            row[:] = matrix[r]
    elif isinstance(s, FragmentMulAdd):
        acc = mem[id(s.acc)]
        a, b = mem[id(s.a)][at(s.a_slot)], mem[id(s.b)][at(s.b_slot)]
        k = at(s.acc_slot)
        acc[k] = acc[k] + a.astype(acc.dtype) @ b.astype(acc.dtype)
    elif isinstance(s, ChunkLoad):
        src, start = mem[id(s.src)], at(s.index)
        lanes = CHUNK_BYTES // src.itemsize
        if not value(s.valid):
            mem[id(s.regs)][at(s.slot)] = 0
            return
        if start % lanes:
            raise IndexError(f"load_chunk of {s.src.name} at {start} is not 16-byte aligned")
        mem[id(s.regs)][at(s.slot)] = src[start:start + lanes].view(np.uint8)
    elif isinstance(s, ChunkStore):
        dst, start, chunk = mem[id(s.dst)], at(s.index), mem[id(s.regs)][at(s.slot)]
        if s.dst.dtype == CHUNK_DTYPE:
            dst[start] = chunk
        else:
            lanes = CHUNK_BYTES // dst.itemsize
            dst[start:start + lanes] = chunk.view(dst.dtype)
    else:
        raise TypeError(type(s).__name__)


__all__ = ["CHUNK_BYTES", "CHUNK_DTYPE", "HOLDERS", "USES", "ChunkLoad", "ChunkStore", "Fragment",
           "FragmentFill", "FragmentLoad", "FragmentMulAdd", "FragmentStore",
           "chunk_registers", "evaluate", "zeros"]
