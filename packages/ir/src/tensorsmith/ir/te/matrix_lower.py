"""Lowering of a tensorized matrix product to cooperative-matrix statements (te/matrix.py).

``C[b.., i, j] = sum_k A[.., i, k] * B[.., k, j]`` with float16 ``A`` and ``B`` and a
float32 sum, tensorized as ``"matrix_product"`` (schedules/gpu_coop.py decides when).
Each workgroup computes a ``rows x cols`` block of C with ``warps_m x warps_n``
subgroups; each subgroup holds a ``frags_m x frags_n`` grid of accumulator fragments
(``m x n`` each), so every A fragment it loads is used ``frags_n`` times and every B
fragment ``frags_m`` times. The reduction runs in steps of ``kt``:

* the workgroup's invocations copy the ``rows x kt`` block of A and the ``kt x cols``
  block of B into shared memory in 16-byte chunks, zero where the block passes the
  tensor's edge (so any M, N and K, with K and N multiples of 8, are computed whole);
  where an operand's chunks do not divide among the invocations, those past the last
  chunk are idle in the last round (a guard);
* shared memory holds two steps: while a step is multiplied, each invocation already
  holds its chunks of the next one in registers, stored to the other half after the
  multiply-adds, so global memory latency overlaps the arithmetic and one barrier per
  step suffices (the half written at step s was last read at step s - 1, before the
  barrier that ended it);
* rows of shared memory are padded by ``pad`` elements (a multiple of 8, keeping
  chunks 16-byte aligned) so the rows a fragment load reads fall in different banks;
* ``prefetch`` 2 holds two steps in registers (two sets, the step loop unrolled by two so
  each set is indexed by constants): the chunks of step s + 2 are requested at step s
  and stored at step s + 1, so global memory latency overlaps two steps of arithmetic
  (an odd step count gets one step of zero tiles, which adds nothing);
* ``stash_after`` (at most ``kt // k``) of a step's ``kt // k`` sub-steps of multiply-adds
  run before the registers are stored into shared memory, the rest after: fewer keep
  the prefetched chunks live through fewer multiply-adds (register pressure of large
  steps), more leave more time for their global loads;
* ``preload`` 1 (for a step of one sub-step, ``kt == k``) moves each step's fragment
  loads ahead of the previous step's multiply-adds, past the barrier: a step stores the
  next step's chunks, requests a later step's, waits at the barrier, requests the next
  step's fragments (into a second fragment set) and only then multiplies its own, so
  the shared-memory loads after the barrier overlap arithmetic instead of stalling it.
  Still one barrier a step and two halves: the half a step stores into was last read
  by fragment loads before the previous barrier;
* ``raster`` > 1 orders the workgroups in groups of ``raster`` block rows, column by
  column within a group, so the workgroups running together share their A and B
  blocks in the GPU's L2 cache (the workgroup grid is left as it is, its linear index
  remapped);
* ``a_global`` / ``b_global`` 1 loads that operand's fragments straight from global
  memory (the buffer, its row stride) instead of staging it in shared memory: no chunk
  copies or shared tile for it, the subgroups that share its fragments served by the
  GPU's L1 cache. Only where the blocks divide it (M and K for A, K and N for B: no
  edges to zero); a step past the last (an odd step count with two steps prefetched,
  the step preloaded after the last) fills the fragments with zeros instead;
* ``a_interleave`` 1 (a step of 16: two chunks a row of A) gives each 16 invocations
  rows 0, 2, 4, 6 and then 1, 3, 5, 7 of eight rows of A instead of rows 0 to 7 in
  order: the eight 16-byte stores of a quarter subgroup (what shared memory serves at
  once) then fall in distinct banks for rows of 3 or 5 words (pad 8 or 24), where in
  order rows r and r + 3 of a quarter share one (a 2-way conflict on every A store).
  The global loads read the same 32-byte sectors either way;
* ``workgroup`` 1 makes each operand one matrix the whole workgroup holds
  (VK_NV_cooperative_matrix2's workgroup scope with flexible dimensions): one subgroup
  of ``subgroup`` = the workgroup's invocations, one ``m x n`` accumulator, ``m x k``
  and ``k x n`` operands loaded straight from global memory each step (``a_global`` and
  ``b_global``), and the driver plans the staging through shared memory and the split
  among its subgroups itself. The kernel is then only the block product, with
  ``preload`` 1 requesting each step's operands before the previous step's product;
* fragments loaded from or stored to global memory say their rows start 16-byte
  aligned (K and N are multiples of 8 float16 and every block offset a multiple of 8
  elements), so the driver may move them in whole vectors;
* a shared tile holds 16-byte words (``tile_lanes`` 8: a chunk is one store, fragments
  load with offsets and strides in words, which the cooperative-matrix load allows) or
  float16 elements (``tile_lanes`` 1: eight stores a chunk).

The result is written straight from the fragments (converted to C's dtype) when the
block divides C and the only epilogue is that conversion; otherwise each fragment
goes through a per-subgroup float32 scratch in shared memory and the invocations write
its elements one by one, guarded, with the fused epilogue applied (bias, activation,
the cast to float16). Subgroups are taken to be consecutive runs of ``subgroup``
invocations of the one-dimensional workgroup, as on drivers of a fixed subgroup size
(the target names it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .expr import Binary, Cast, Expr, Load, Reduce, Var, as_expr, const
from .matrix import (
    CHUNK_BYTES,
    CHUNK_DTYPE,
    ChunkLoad,
    ChunkStore,
    Fragment,
    FragmentFill,
    FragmentLoad,
    FragmentMulAdd,
    FragmentStore,
    chunk_registers,
)
from .stmt import Allocate, Barrier, Buffer, For, IfThenElse, Seq, Stmt, Store, all_of
from .visit import collect_loads, substitute

if TYPE_CHECKING:
    from .lower import _Lowerer
    from .schedule import Stage
    from .tensor import Tensor

#: The intrinsics ``Schedule.tensorize`` accepts.
INTRINSICS = ("matrix_product",)
#: Parameters of ``matrix_product``, all positive ints.
PARAMS = ("m", "n", "k", "warps_m", "warps_n", "frags_m", "frags_n", "kt", "subgroup", "pad",
          "tile_lanes")
#: Optional parameters (positive ints when given) and their values when not given;
#: ``stash_after`` defaults to all of a step's ``kt // k`` sub-steps.
OPTIONAL = {"prefetch": 1, "stash_after": None, "raster": 1, "preload": 0, "a_global": 0,
            "b_global": 0, "a_interleave": 0, "workgroup": 0}
#: Optional parameters that may be 0 (the others are positive).
SWITCHES = ("preload", "a_global", "b_global", "a_interleave", "workgroup")
#: Steps held in registers ahead of the multiply-adds.
PREFETCH = (1, 2)
#: Elements of a shared tile's element: a 16-byte word, or one float16.
TILE_LANES = (8, 1)
#: The element type of the operands and of the accumulator.
INPUT_DTYPE = "float16"
ACC_DTYPE = "float32"
#: Elements of an operand in one 16-byte chunk.
CHUNK = CHUNK_BYTES // 2


class Product:
    """A matmul stage's operands, as the intrinsic needs them, or the reason it cannot be
    tensorized (``problem``)."""

    def __init__(self, st: Stage) -> None:
        self.problem = ""
        op = st.tensor.op
        reads = collect_loads(op.body) if op is not None else []
        tensors = list({id(ld.buffer): ld.buffer for ld in reads}.values())
        if op is None or op.tag != "matmul" or len(op.reduce_axes) != 1 or len(tensors) != 2:
            self.problem = "it is not a matrix product of two tensors"
            return
        self.a: Tensor = tensors[0]  # type: ignore[assignment]
        self.b: Tensor = tensors[1]  # type: ignore[assignment]
        shapes = [*self.a.shape, *self.b.shape, *(a.extent for a in op.axes),
                  op.reduce_axes[0].extent]
        if not all(isinstance(d, int) for d in shapes):
            self.problem = "its sizes are known only at run time"
            return
        self.batch = tuple(int(a.extent) for a in op.axes[:-2])
        self.m, self.n = int(op.axes[-2].extent), int(op.axes[-1].extent)
        self.k = int(op.reduce_axes[0].extent)
        if any(t.op is not None for t in (self.a, self.b)):
            self.problem = "an operand is computed in the kernel, not read from memory"
        elif self.a.dtype != INPUT_DTYPE or self.b.dtype != INPUT_DTYPE:
            self.problem = f"its operands are {self.a.dtype} and {self.b.dtype}, not float16"
        elif st.tensor.dtype != ACC_DTYPE:
            self.problem = f"it accumulates in {st.tensor.dtype}, not {ACC_DTYPE}"
        elif tuple(self.a.shape[-2:]) != (self.m, self.k) or \
                tuple(self.b.shape[-2:]) != (self.k, self.n):
            self.problem = "its operands are not read as [.., M, K] x [.., K, N]"
        elif any(t.ndim > 2 and tuple(t.shape[:-2]) != self.batch for t in (self.a, self.b)):
            self.problem = "an operand broadcasts over part of the batch"
        elif self.k % CHUNK or self.n % CHUNK:
            self.problem = (f"K={self.k} and N={self.n} must be multiples of {CHUNK} (rows "
                            "are copied in 16-byte chunks)")
        elif not _plain_product(op.body, self.a, self.b):
            self.problem = "its body is not sum(A[i, k] * B[k, j])"

    def batch_offset(self, t: Tensor, b: Expr) -> Expr:
        """Element offset of batch ``b``'s matrix in operand ``t``."""
        return b * (self.m * self.k if t is self.a else self.k * self.n) if t.ndim > 2 \
            else const(0)


def _plain_product(body: Any, a: Tensor, b: Tensor) -> bool:
    """Whether ``body`` is ``sum(cast(A[.., i, k]) * cast(B[.., k, j]))`` over the
    stage's own i, j and k (so the tiles read the right elements)."""
    if not isinstance(body, Reduce) or body.combiner != "sum":
        return False
    e = body.body
    if not isinstance(e, Binary) or e.op != "mul":
        return False
    x, y = (v.value if isinstance(v, Cast) else v for v in (e.a, e.b))
    if not (isinstance(x, Load) and isinstance(y, Load) and x.buffer is a and y.buffer is b):
        return False
    k = body.axes[0].var
    return x.indices[-1] is k and y.indices[-2] is k


def check_tensorize(st: Stage, intrinsic: str, params: dict[str, Any]) -> None:
    """Raise ValueError unless ``st`` can be lowered with ``intrinsic`` and ``params``."""
    if intrinsic not in INTRINSICS:
        raise ValueError(f"tensorize: unknown intrinsic {intrinsic!r}; known: "
                         + ", ".join(INTRINSICS))
    missing = [p for p in PARAMS if not isinstance(params.get(p), int) or params[p] < 1]
    missing += [p for p in OPTIONAL if p in params and (not isinstance(params[p], int)
                                                        or params[p] < (p not in SWITCHES))]
    if missing:
        raise ValueError(f"tensorize {st.name}: parameters {missing} must be positive ints")
    product = Product(st)
    if product.problem:
        raise ValueError(f"tensorize {st.name}: {product.problem}")
    p = Params(params)
    if p.tile_lanes not in TILE_LANES:
        raise ValueError(f"tensorize {st.name}: tile_lanes={p.tile_lanes} is not one of "
                         f"{TILE_LANES}")
    if p.kt % p.k or p.kt % CHUNK or p.pad % CHUNK:
        raise ValueError(f"tensorize {st.name}: the step kt={p.kt} must be a multiple of "
                         f"k={p.k} and {CHUNK}, and the padding {p.pad} of {CHUNK}")
    if p.prefetch not in PREFETCH:
        raise ValueError(f"tensorize {st.name}: prefetch={p.prefetch} is not one of "
                         f"{PREFETCH}")
    if p.stash_after > p.kt // p.k:
        raise ValueError(f"tensorize {st.name}: stash_after={p.stash_after} exceeds the "
                         f"{p.kt // p.k} sub-steps of a step")
    if p.preload not in (0, 1) or (p.preload and p.kt != p.k):
        raise ValueError(f"tensorize {st.name}: preload={p.preload} must be 0 or 1, and 1 "
                         f"needs a step of one sub-step (kt={p.kt}, k={p.k})")
    for what, switch, edges in (
            ("a_global", p.a_global, {"M": (product.m, p.rows), "K": (product.k, p.kt)}),
            ("b_global", p.b_global, {"K": (product.k, p.kt), "N": (product.n, p.cols)})):
        bad = [f"{d}={size} is not a multiple of {block}" for d, (size, block) in edges.items()
               if size % block]
        if switch not in (0, 1) or (switch and bad):
            raise ValueError(f"tensorize {st.name}: {what}={switch} must be 0 or 1, and 1 "
                             f"needs blocks that divide the operand ({'; '.join(bad)})")
    if p.a_interleave not in (0, 1) or (p.a_interleave and p.kt != 2 * CHUNK):
        raise ValueError(f"tensorize {st.name}: a_interleave={p.a_interleave} must be 0 or "
                         f"1, and 1 needs a step of {2 * CHUNK} (kt={p.kt})")
    blocks_m = -(-product.m // p.rows)
    if blocks_m % p.raster:
        raise ValueError(f"tensorize {st.name}: raster={p.raster} does not divide the "
                         f"{blocks_m} block rows of M={product.m}")
    if p.workgroup not in (0, 1) or (p.workgroup and (
            (p.warps_m, p.warps_n, p.frags_m, p.frags_n) != (1, 1, 1, 1)
            or not (p.a_global and p.b_global) or p.prefetch != 1)):
        raise ValueError(f"tensorize {st.name}: workgroup={p.workgroup} must be 0 or 1, and "
                         "1 needs one subgroup of one fragment (warps and frags 1), both "
                         "operands from global memory and prefetch 1")
    if (p.m * p.n) % p.subgroup:
        raise ValueError(f"tensorize {st.name}: a {p.m}x{p.n} fragment does not divide "
                         f"among a subgroup of {p.subgroup}")


class Params:
    """The sizes of a ``matrix_product`` (see the module docstring)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.m, self.n, self.k = params["m"], params["n"], params["k"]
        self.warps_m, self.warps_n = params["warps_m"], params["warps_n"]
        self.frags_m, self.frags_n = params["frags_m"], params["frags_n"]
        self.kt, self.subgroup, self.pad = params["kt"], params["subgroup"], params["pad"]
        self.tile_lanes = params["tile_lanes"]
        self.prefetch = params.get("prefetch", OPTIONAL["prefetch"])
        self.stash_after = params.get("stash_after") or self.kt // self.k
        self.raster = params.get("raster", OPTIONAL["raster"])
        self.preload = params.get("preload", OPTIONAL["preload"])
        self.a_global = params.get("a_global", OPTIONAL["a_global"])
        self.b_global = params.get("b_global", OPTIONAL["b_global"])
        self.a_interleave = params.get("a_interleave", OPTIONAL["a_interleave"])
        self.workgroup = params.get("workgroup", OPTIONAL["workgroup"])

    @property
    def rows(self) -> int:
        return self.warps_m * self.frags_m * self.m

    @property
    def cols(self) -> int:
        return self.warps_n * self.frags_n * self.n

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * self.subgroup

    @property
    def a_chunks(self) -> int:
        """16-byte chunks of a step of A the workgroup stages (none from global)."""
        return 0 if self.a_global else self.rows * self.kt // CHUNK

    @property
    def b_chunks(self) -> int:
        return 0 if self.b_global else self.kt * self.cols // CHUNK

    @property
    def a_stride(self) -> int:
        return self.kt + self.pad

    @property
    def b_stride(self) -> int:
        return self.cols + self.pad

    def shared_bytes(self, scratch: bool) -> int:
        """Workgroup memory: two steps of A and B (float16), and the float32 scratch of
        each subgroup where the result goes through it."""
        staged = 2 * 2 * ((0 if self.a_global else self.rows * self.a_stride)
                          + (0 if self.b_global else self.kt * self.b_stride))
        return staged + (4 * self.warps_m * self.warps_n * self.m * self.n if scratch else 0)


def direct_store(st: Stage, product: Product, p: Params) -> bool:
    """Whether fragments can be stored straight into the output: the block divides C and
    the only epilogue (if any) converts the sum to the output's dtype."""
    return writes_directly(product, p, st.tensor, st.epilogue)


def writes_directly(product: Product, p: Params, tensor: Tensor, epilogue: Stage | None
                    ) -> bool:
    """:func:`direct_store` of the stage computing ``tensor`` with ``epilogue`` fused:
    also asked by the rule before the epilogue is fused, since the write-back through
    the scratch needs workgroup memory the tiles must leave free."""
    if product.m % p.rows or product.n % p.cols:
        return False
    if epilogue is None:
        return True
    cop = epilogue.tensor.op
    return (cop is not None and isinstance(cop.body, Cast) and isinstance(cop.body.value, Load)
            and cop.body.value.buffer is tensor)


def lower_matrix_product(low: _Lowerer, st: Stage) -> Stmt:
    """The dispatch of tensorized stage ``st`` (see the module docstring)."""
    assert st.tensorized is not None
    product = Product(st)
    p = Params(st.tensorized[1])
    a_buf, b_buf = low.buffers[product.a.uid], low.buffers[product.b.uid]
    out_tensor = st.epilogue.tensor if st.epilogue is not None else st.tensor
    out = low.buffers[out_tensor.uid]
    M, N, K = product.m, product.n, product.k
    steps = -(-K // p.kt)

    batch = Var("b") if product.batch else None
    by, bx, t = Var("by"), Var("bx"), Var("t")
    bz: Expr = batch if batch is not None else const(0)
    warp, lane = t // p.subgroup, t % p.subgroup
    wm, wn = warp // p.warps_n, warp % p.warps_n
    grid_m, grid_n = -(-M // p.rows), -(-N // p.cols)
    block_m, block_n = _rasterized(by, bx, grid_n, p.raster)
    row0, col0 = block_m * p.rows, block_n * p.cols
    a_base, b_base = product.batch_offset(product.a, bz), product.batch_offset(product.b, bz)
    direct = direct_store(st, product, p)

    # shared tiles and their offsets in units of their elements (words or halves)
    lanes = p.tile_lanes
    tile_dtype = CHUNK_DTYPE if lanes == CHUNK else INPUT_DTYPE
    a_smem = Buffer(f"{st.name}.A_shared", (2 * p.rows * p.a_stride // lanes,), tile_dtype,
                    "shared")
    b_smem = Buffer(f"{st.name}.B_shared", (2 * p.kt * p.b_stride // lanes,), tile_dtype,
                    "shared")
    a_half, b_half = p.rows * p.a_stride // lanes, p.kt * p.b_stride // lanes
    a_row, b_row = p.a_stride // lanes, p.b_stride // lanes
    per_chunk = CHUNK // lanes
    held = "workgroup" if p.workgroup else "subgroup"
    acc = Fragment(f"{st.name}.acc", (p.frags_m * p.frags_n,), ACC_DTYPE, "fragment",
                   "accumulator", p.m, p.n, held)
    fsets = 2 if p.preload else 1
    fa = Fragment(f"{st.name}.a", (fsets * p.frags_m,), INPUT_DTYPE, "fragment", "a", p.m,
                  p.k, held)
    fb = Fragment(f"{st.name}.b", (fsets * p.frags_n,), INPUT_DTYPE, "fragment", "b", p.k,
                  p.n, held)
    per_a, per_b = -(-p.a_chunks // p.threads), -(-p.b_chunks // p.threads)

    def mine(c: Expr, chunks: int) -> list[Expr]:
        """Whether chunk ``c`` exists, where the chunks do not divide among the
        invocations (the last round leaves some idle)."""
        return [c < chunks] if chunks % p.threads else []
    per_set = per_a + per_b
    # the barriers that order the shared tiles' stores and loads: none where both
    # operands come from global memory
    sync: list[Stmt] = [Barrier()] if per_set else []
    regs = chunk_registers(f"{st.name}.chunks", p.prefetch * per_set)

    def a_place(c: Expr) -> tuple[Expr, Expr]:
        """Row of A and chunk within the row of A's chunk ``c`` (``a_interleave``)."""
        if not p.a_interleave:
            return c // (p.kt // CHUNK), c % (p.kt // CHUNK)
        pair = c % 16 // 2
        return c // 16 * 8 + pair % 4 * 2 + pair // 4, c % 2

    def fetch(step: Expr, at: int = 0) -> Stmt:
        """This invocation's chunks of step ``step`` of A and B into registers ``at`` on
        (zeros past the last step)."""
        r = Var("r")
        c = t + r * p.threads
        row, col = a_place(c)
        col = col * CHUNK
        kcol = step * p.kt + col
        a_load = ChunkLoad(regs, _plus(r, at), a_buf, a_base + (row0 + row) * K + kcol,
                           all_of([*mine(c, p.a_chunks), step < steps, row0 + row < M,
                                   kcol < K]))
        r2 = Var("r")
        c2 = t + r2 * p.threads
        krow, col2 = c2 // (p.cols // CHUNK), c2 % (p.cols // CHUNK) * CHUNK
        b_load = ChunkLoad(regs, r2 + (at + per_a), b_buf,
                           b_base + (step * p.kt + krow) * N + col0 + col2,
                           all_of([*mine(c2, p.b_chunks), step < steps,
                                   step * p.kt + krow < K, col0 + col2 < N]))
        return _staged(per_a, per_b, For(r, per_a, "unrolled", a_load),
                       For(r2, per_b, "unrolled", b_load))

    def stash(half: Expr, at: int = 0) -> Stmt:
        """The chunks of registers ``at`` on into half ``half`` of the shared tiles."""
        r = Var("r")
        c = t + r * p.threads
        row, col = a_place(c)
        col = col * per_chunk
        a_store: Stmt = ChunkStore(a_smem, half * a_half + row * a_row + col, regs,
                                   _plus(r, at))
        if mine(c, p.a_chunks):
            a_store = IfThenElse(all_of(mine(c, p.a_chunks)), a_store)
        r2 = Var("r")
        c2 = t + r2 * p.threads
        krow, col2 = c2 // (p.cols // CHUNK), c2 % (p.cols // CHUNK) * per_chunk
        b_store: Stmt = ChunkStore(b_smem, half * b_half + krow * b_row + col2, regs,
                                   r2 + (at + per_a))
        if mine(c2, p.b_chunks):
            b_store = IfThenElse(all_of(mine(c2, p.b_chunks)), b_store)
        return _staged(per_a, per_b, For(r, per_a, "unrolled", a_store),
                       For(r2, per_b, "unrolled", b_store))

    def load_fragments(step: Expr, half: Expr, kk: Expr, fset: int = 0,
                       first: bool = False) -> Stmt:
        """Sub-step ``kk``'s A and B fragments of step ``step``, in half ``half`` of the
        shared tiles (or global memory, ``a_global``/``b_global``), into fragment set
        ``fset`` (``first``: step 0, which always exists)."""
        fi, fj = Var("fi"), Var("fj")
        a_slot, b_slot = _plus(fi, fset * p.frags_m), _plus(fj, fset * p.frags_n)
        if p.a_global:
            a: Stmt = FragmentLoad(fa, a_slot, a_buf, a_base + (
                row0 + wm * (p.frags_m * p.m) + fi * p.m) * K + step * p.kt + kk * p.k, K,
                CHUNK_BYTES)
        else:
            a = FragmentLoad(fa, a_slot, a_smem, half * a_half + (
                wm * (p.frags_m * p.m) + fi * p.m) * a_row + kk * (p.k // lanes), a_row)
        if p.b_global:
            b: Stmt = FragmentLoad(fb, b_slot, b_buf, b_base + (step * p.kt + kk * p.k) * N
                                   + col0 + wn * (p.frags_n * p.n) + fj * p.n, N, CHUNK_BYTES)
        else:
            b = FragmentLoad(fb, b_slot, b_smem, half * b_half + kk * p.k * b_row
                             + wn * (p.frags_n * p.n // lanes) + fj * (p.n // lanes), b_row)
        if (p.a_global or p.b_global) and (p.preload or p.prefetch > 1) and not first:
            # a step past the last may be loaded: zeros, never read past the buffer
            a = IfThenElse(step < steps, a, FragmentFill(fa, a_slot, 0.0)) \
                if p.a_global else a
            b = IfThenElse(step < steps, b, FragmentFill(fb, b_slot, 0.0)) \
                if p.b_global else b
        return Seq([For(fi, p.frags_m, "unrolled", a), For(fj, p.frags_n, "unrolled", b)])

    def multiply_adds(fset: int = 0) -> Stmt:
        """Every accumulator += its A fragment x its B fragment of set ``fset``."""
        fi, fj = Var("fi"), Var("fj")
        return For(fi, p.frags_m, "unrolled", For(fj, p.frags_n, "unrolled", FragmentMulAdd(
            acc, fi * p.frags_n + fj, fa, _plus(fi, fset * p.frags_m), fb,
            _plus(fj, fset * p.frags_n))))

    def multiply(step: Expr, half: Expr, first: int, last: int) -> Stmt:
        """Sub-steps ``first`` to ``last`` (excluded) of step ``step``, in half ``half``."""
        kk = Var("kk")
        return For(kk, last - first, "unrolled", Seq([
            load_fragments(step, half, _plus(kk, first)), multiply_adds()]))

    def one_step(step: Expr, half: Expr, ahead: Expr, regs_at: int, refill: int) -> Stmt:
        """Step ``step``, in half ``half``: registers ``refill`` on take step ``ahead``,
        registers ``regs_at`` on (the next step, already loaded) go to the other half."""
        subs = p.kt // p.k
        parts = [fetch(ahead, refill), multiply(step, half, 0, p.stash_after),
                 stash(1 - half, regs_at)]
        if p.stash_after < subs:
            parts.append(multiply(step, half, p.stash_after, subs))
        return Seq([*parts, *sync])

    scratch = None if direct else Buffer(
        f"{st.name}.C_shared", (p.warps_m * p.warps_n * p.m * p.n,), ACC_DTYPE, "shared")
    def preloading_step(ko: Expr, parity: int) -> Stmt:
        """Step ``ko`` (of ``parity``) with its fragments already loaded (set
        ``parity``): the next step's chunks stored, a later step's requested, the
        barrier, the next step's fragments requested (set ``1 - parity``), then the
        multiply-adds, which the fragment loads overlap."""
        regs_at = (1 - parity) % p.prefetch * per_set
        return Seq([stash(const(1 - parity), regs_at), fetch(ko + 1 + p.prefetch, regs_at),
                    *sync, load_fragments(ko + 1, const(1 - parity), const(0), 1 - parity),
                    multiply_adds(parity)])

    ko = Var("ko")
    prologue: list[Stmt] = [fetch(const(0)), stash(const(0))]
    if p.preload:  # see the module docstring; the loop unrolled by two (fragment sets)
        prologue += [fetch(const(j), j % p.prefetch * per_set)
                     for j in range(1, p.prefetch + 1)]
        prologue += [*sync, load_fragments(const(0), const(0), const(0), 0, True)]
        main: Stmt = For(ko, -(-steps // 2), "serial", Seq([
            preloading_step(ko * 2, 0), preloading_step(ko * 2 + 1, 1)]))
    elif p.prefetch == 1:
        prologue += sync
        main = For(ko, steps, "serial", one_step(ko, ko % 2, ko + 1, 0, 0))
    else:  # two register sets, alternating: the loop unrolled by two
        prologue += [fetch(const(1), per_set), *sync]
        s0, s1 = ko * 2, ko * 2 + 1
        main = For(ko, -(-steps // 2), "serial", Seq([
            one_step(s0, const(0), s0 + 2, per_set, 0),
            one_step(s1, const(1), s1 + 2, 0, per_set)]))
    f = Var("f")
    init = For(f, p.frags_m * p.frags_n, "unrolled", FragmentFill(acc, f, 0.0))
    body: Stmt = Seq([init, *prologue, main,
                      _write_back(low, st, product, p, out, acc, scratch,
                                  (bz, row0, col0, wm, wn, warp, lane))])
    staged = [b for b, chunks in ((b_smem, per_b), (a_smem, per_a)) if chunks]
    for buf in (*([regs] if per_set else []), fb, fa, acc, *staged,
                *([scratch] if scratch else [])):
        body = Allocate(buf, body)
    nest: Stmt = For(t, p.threads, "threadIdx.x", body)
    nest = For(bx, grid_n, "blockIdx.x", nest)
    nest = For(by, grid_m, "blockIdx.y", nest)
    if batch is not None:
        nest = For(batch, math.prod(product.batch), "blockIdx.z", nest)
    return nest


def _write_back(low: _Lowerer, st: Stage, product: Product, p: Params, out: Buffer,
                acc: Fragment, scratch: Buffer | None, at: tuple[Expr, ...]) -> Stmt:
    """Fragments into ``out``: stored directly (no ``scratch``), or each through the
    subgroup's region of ``scratch`` and written element by element, guarded, with the
    stage's epilogue applied."""
    bz, row0, col0, wm, wn, warp, lane = at
    M, N = product.m, product.n
    f = Var("f")
    fi, fj = f // p.frags_n, f % p.frags_n
    row = row0 + wm * (p.frags_m * p.m) + fi * p.m
    col = col0 + wn * (p.frags_n * p.n) + fj * p.n
    if scratch is None:
        return For(f, p.frags_m * p.frags_n, "unrolled", FragmentStore(
            out, bz * (M * N) + row * N + col, N, acc, f, CHUNK_BYTES))
    region = warp * (p.m * p.n)
    e = Var("e")
    idx = e * p.subgroup + lane
    r, c = row + idx // p.n, col + idx % p.n
    value: Expr = Load(scratch, (region + idx,), ACC_DTYPE)
    op = st.tensor.op
    assert op is not None
    own = [*_unravel(bz, product.batch), r, c]
    if st.epilogue is not None:
        cop = st.epilogue.tensor.op
        assert cop is not None
        low.overrides[st.tensor.uid] = (own, value)
        value = low.expr(substitute(cop.body, {id(a.var): v for a, v in zip(cop.axes, own)}))
        del low.overrides[st.tensor.uid]
    write = IfThenElse(all_of([r < M, c < N]), Store(
        out, bz * (M * N) + r * N + c, as_expr(value).astype(out.dtype)))
    return For(f, p.frags_m * p.frags_n, "unrolled", Seq([
        FragmentStore(scratch, region, p.n, acc, f), Barrier(),
        For(e, p.m * p.n // p.subgroup, "unrolled", write), Barrier()]))


def _staged(per_a: int, per_b: int, a: Stmt, b: Stmt) -> Stmt:
    """The chunk copies ``a`` and ``b`` of the operands staged in shared memory."""
    return Seq([x for x, n in ((a, per_a), (b, per_b)) if n])


def _plus(e: Expr, offset: int) -> Expr:
    return e + offset if offset else e


def _rasterized(by: Var, bx: Var, grid_n: int, raster: int) -> tuple[Expr, Expr]:
    """The block (row, column) workgroup (``by``, ``bx``) computes: itself, or with
    ``raster`` > 1 the workgroups' linear order walked through groups of ``raster``
    block rows, down each column of a group before the next column, so consecutive
    workgroups read ``raster`` blocks of A and few of B (the grid's row count is a
    multiple of ``raster``, see ``check_tensorize``)."""
    if raster == 1:
        return by, bx
    group = raster * grid_n
    linear = by * grid_n + bx
    within = linear % group
    return linear // group * raster + within % raster, within // raster


def _unravel(flat: Expr, shape: tuple[int, ...]) -> list[Expr]:
    """The coordinates of row-major index ``flat`` in ``shape``."""
    out: list[Expr] = []
    rest = flat
    for extent in reversed(shape):
        out.append(rest % extent if extent > 1 else const(0))
        rest = rest // extent
    return out[::-1]


__all__ = ["ACC_DTYPE", "INPUT_DTYPE", "INTRINSICS", "OPTIONAL", "PARAMS", "PREFETCH",
           "Params", "Product", "check_tensorize", "direct_store", "lower_matrix_product",
           "writes_directly"]
