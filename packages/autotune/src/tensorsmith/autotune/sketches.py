"""Sketches: for each kind of stage, the knobs a schedule may turn and the steps they make.

The knobs are the free parameters of the default CPU rules (``ir/schedules/cpu.py``):
the same split / reorder / fuse / cache_write / annotate / fuse_epilogue steps, but
with tile sizes, loop orders and annotations left open instead of fixed by a rule.
Every knob a rule asks ``choose`` for takes the rule's answer as its default (the
space probes the rules with ``rule_knobs``, for the CPU the task compiles for), so the
default config is the default schedule, which the search starts from; the other knobs
(cache blocking, loop orders, unrolling) default to what the rules always do.

- Tiled reductions (matmul-like: the output's last axis is an input's contiguous axis;
  conv2d and pool2d windows): a register tile of ``rows`` x ``vec`` accumulated in a
  local buffer (``cache_write``), an optional outer tile for cache blocking, a split of
  the largest reduce axis (with the ``k`` outer loop above the tile when the tile is not
  cached), reduce-loop order, unrolling, vectorizing, the fused parallel outer loop and
  whether the elementwise epilogue is folded into the write-back.
- Other reductions: fused spatial loops, optionally chunked and vectorized *across*
  outputs, the innermost reduce axis optionally split and unrolled, parallel or not.
- Elementwise outputs: one fused loop, optional vector chunks, parallel or not.
  Padding stages: inlined into their reader or materialized, by rows with vector
  columns (the default rule) or as one fused loop. Other non-output elementwise
  stages are always inlined: fused epilogues rely on it and it is never slower on the
  CPU.

Every sketch only emits steps that lower to a correct loop nest: a ``cache_write`` always
has every reduce loop below it (its write-back overwrites rather than accumulates).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tensorsmith.ir.schedules.cpu import (
    PARALLEL_MIN_WORK,
    VECTOR_BLOCK,
    channel_vector_weight,
    depthwise_conv,
    fuse_all,
    last_axis_contiguous,
    packable_weight,
)
from tensorsmith.ir.schedules.epilogue import epilogue_consumer
from tensorsmith.ir.te.expr import Binary, Const
from tensorsmith.ir.te.schedule import Schedule, Stage
from tensorsmith.ir.te.visit import walk

Values = dict[str, Any]
#: A stage's knobs as its default rule asked for them: ``{knob: the rule's choice}``.
Rule = dict[str, Any]
VECTOR_LANES_MAX = 64  # the llvm codegen emits explicit SIMD up to 64 lanes
LOCAL_MAX = 512  # register tile elements: beyond this the tile spills to the stack
# Copies of the innermost loop that nested unrolled loops make: beyond these, LLVM's
# compile time explodes (seconds to a minute per candidate) for no speed.
UNROLL_MAX_VECTOR = 32
UNROLL_MAX_SCALAR = 8
# ... except over a Winograd output transform, whose unrolled body is one multiply-add
# with constant coefficients: 6 x 6 table entries times a few rows stay cheap to compile.
UNROLL_MAX_TABLE = 160


@dataclass(frozen=True)
class Knob:
    """A free parameter of a sketch: its name, its choices, and the default rule's value."""

    name: str
    choices: tuple[Any, ...]
    default: Any


class Sketch:
    """How one stage may be scheduled."""

    kind = "base"

    def __init__(self, stage: Stage) -> None:
        self.stage = stage.name
        self.knobs: tuple[Knob, ...] = ()

    def valid(self, v: Values) -> bool:
        return True

    def seeds(self) -> list[Values]:
        """Knob values of other rules worth starting from, besides the default."""
        return []

    def apply(self, s: Schedule, v: Values) -> None:
        raise NotImplementedError


def _work(stage: Stage) -> int:
    return math.prod(lf.extent for lf in stage.leaves)


def _parallel_default(stage: Stage, rule: Rule) -> bool:
    return bool(rule.get("parallel", _work(stage) >= PARALLEL_MIN_WORK))


def _split(s: Schedule, stage: str, leaf: str, extent: int, factor: int
           ) -> tuple[str | None, str | None]:
    """(outer, inner) of ``leaf`` split by ``factor``; either is None when it would be 1."""
    if factor <= 1:
        return leaf, None
    if factor >= extent:
        return None, leaf
    return s.split(stage, leaf, factor)


def _choices(extent: int, candidates: Sequence[int], keep: int | None = None) -> tuple[int, ...]:
    out = {c for c in candidates if c <= extent}
    if keep is not None:
        out.add(min(keep, extent))
    return tuple(sorted(out)) or (1,)


class AlgorithmSketch:
    """Not a stage's sketch: the task's choice of compute (the direct one first, the
    default). The search measures each alternative's default schedule early."""

    kind = "algorithm"
    stage = ""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.knobs = (Knob("algorithm", self.names, self.names[0]),)

    def valid(self, v: Values) -> bool:
        return True

    def seeds(self) -> list[Values]:
        return [{"algorithm": name} for name in self.names[1:]]


class InlineSketch(Sketch):
    """A non-output elementwise stage: substituted into its readers."""

    kind = "inline"

    def apply(self, s: Schedule, v: Values) -> None:
        s.compute_inline(self.stage)


class ElementwiseSketch(Sketch):
    """One fused loop over the output, cut in vector chunks, optionally parallel."""

    kind = "elementwise"

    def __init__(self, stage: Stage, rule: Rule, pad: bool = False) -> None:
        super().__init__(stage)
        self.names = [lf.name for lf in stage.leaves]
        self.extent = _work(stage)
        chunk = rule.get("chunk", VECTOR_BLOCK if self.extent >= 2 * VECTOR_BLOCK else 0)
        knobs = [
            Knob("chunk", _choices(self.extent, (0, 8, 16, 32, 64), chunk), chunk),
            Knob("vectorize", (True, False), True),
            Knob("parallel", (False, True), _parallel_default(stage, rule)),
        ]
        # A padding stage, or one that selects by its leading coordinates (a Concat): by
        # rows of vector columns (the default rule) or flat; a padding stage is also
        # inlined into its reader where it is not an output.
        self.row_vec = int(rule.get("row_vec", VECTOR_BLOCK))
        self.row_axes = int(rule.get("row_axes", len(self.names) - 1))
        if (pad and len(self.names) >= 2) or "row_axes" in rule:
            knobs[:0] = [Knob("by_rows", (True, False), "row_vec" in rule)]
        if "inline" in rule:
            knobs[:0] = [Knob("inline", (False, True), rule["inline"])]
        self.knobs = tuple(knobs)

    def apply(self, s: Schedule, v: Values) -> None:
        if v.get("inline"):
            s.compute_inline(self.stage)
            return
        if s[self.stage].merged:
            # It runs as a reduction's epilogue: its loops are never emitted, so its knobs do
            # not matter. Fixed (default) steps keep equal programs equal records.
            v = {k.name: k.default for k in self.knobs}
        if v.get("by_rows") and len(self.names) >= 2:
            rows = fuse_all(s, self.stage, self.names[:self.row_axes])
            row = fuse_all(s, self.stage, self.names[self.row_axes:])
            assert rows is not None and row is not None
            _, cols = s.split(self.stage, row, self.row_vec)
            if v["vectorize"]:
                s.vectorize(self.stage, cols)
            if v["parallel"] and s[self.stage].leaf(rows).extent > 1:
                s.parallel(self.stage, rows)
            return
        fused = fuse_all(s, self.stage, self.names)
        if fused is None:
            return
        outer, inner = fused, None
        if v["chunk"] and v["chunk"] < self.extent:
            outer, inner = s.split(self.stage, fused, v["chunk"])
            if v["vectorize"]:
                s.vectorize(self.stage, inner)
        if v["parallel"] and s[self.stage].leaf(outer).extent > 1:
            s.parallel(self.stage, outer)


class ReductionSketch(Sketch):
    """A reduction not worth a register tile (softmax sums, reductions along a row).

    Either vector lanes run across outputs (``chunk``: each lane reduces its own output,
    reading with the outputs' stride), or, with ``rfactor``, across the innermost reduce
    axis: that axis is split by the lane count, each lane accumulates every lanes-th
    element in a local vector, and the lanes are combined once at the end. The default
    rules never do the latter, because it reassociates the sum (see ir/schedules/cpu.py);
    the tuner may, because the runner checks every candidate against the default."""

    kind = "reduction"

    def __init__(self, stage: Stage, rule: Rule) -> None:
        super().__init__(stage)
        self.spatial = [lf.name for lf in stage.leaves if not lf.reduce]
        self.reduce = [lf.name for lf in stage.leaves if lf.reduce]
        self.space_extent = math.prod(lf.extent for lf in stage.leaves if not lf.reduce)
        self.rlast = stage.leaves[-1].extent if self.reduce else 1
        self.knobs = (
            Knob("chunk", _choices(self.space_extent, (0, 4, 8, 16, 32, 64)) if self.spatial
                 else (0,), 0),
            Knob("rfactor", _choices(self.rlast // 2, (0, 8, 16, 32, 64)) if self.spatial
                 else (0,), 0),
            Knob("rsplit", _choices(self.rlast - 1, (0, 4, 8, 16)), 0),
            Knob("parallel", (False, True), _parallel_default(stage, rule)),
        )

    def valid(self, v: Values) -> bool:
        # One vector loop: lanes run across outputs or along the reduction, not both.
        if v["rfactor"] and v["chunk"]:
            return False
        return v["rfactor"] * max(v["rsplit"], 1) <= self.rlast

    def apply(self, s: Schedule, v: Values) -> None:
        st = self.stage
        fused = fuse_all(s, st, self.spatial)
        outer, inner = fused, None
        if fused is not None and v["chunk"] and v["chunk"] < self.space_extent:
            outer, inner = s.split(st, fused, v["chunk"])
        reduce = list(self.reduce)
        lanes = None
        if v["rfactor"] and reduce and fused is not None:
            ro, lanes = s.split(st, reduce[-1], v["rfactor"])
            reduce[-1:] = [ro, lanes]
        if v["rsplit"] and reduce:
            at = len(reduce) - (2 if lanes is not None else 1)  # the loop above the lanes
            ro, ri = s.split(st, reduce[at], v["rsplit"])
            reduce[at:at + 1] = [ro, ri]
            s.unroll(st, ri)
        order = [x for x in (outer, *reduce, inner) if x is not None]
        if order != [lf.name for lf in s[st].leaves]:
            s.reorder(st, *order)
        if lanes is not None:  # (rfactor excludes chunk: outer is the fused spatial loop)
            s.cache_write(st, fused)
            s.rfactor(st, lanes)
            s.vectorize(st, lanes)
        if inner is not None:
            s.vectorize(st, inner)
        if outer is not None and v["parallel"] and s[st].leaf(outer).extent > 1:
            s.parallel(st, outer)


class WinogradInputSketch(Sketch):
    """A Winograd input transform ``V[e, n, c, p]`` (ops/winograd.py): per channel and
    row of tiles, the ``alpha x alpha`` table entries unrolled (so each is the handful
    of terms its matrix row holds) over a vector of the row's tiles, whose inputs are
    ``m`` apart (one strided load per patch element)."""

    kind = "winograd_input"

    def __init__(self, stage: Stage) -> None:
        super().__init__(stage)
        self.names = [lf.name for lf in stage.leaves]
        self.columns = _tile_columns(stage)
        self.knobs = (
            Knob("vectorize", (True, False), True),
            Knob("parallel", (False, True), _work(stage) >= PARALLEL_MIN_WORK),
        )

    def apply(self, s: Schedule, v: Values) -> None:
        st = self.stage
        e, n, c, p = self.names
        rows, cols = _split(s, st, p, s[st].leaf(p).extent, self.columns)
        order = [x for x in (c, rows, e, n, cols) if x is not None]
        s.reorder(st, *order)
        s.unroll(st, e)
        s.unroll(st, n)
        if cols is not None and v["vectorize"]:
            s.vectorize(st, cols)
        outer = fuse_all(s, st, [x for x in (c, rows) if x is not None])
        if outer is not None and v["parallel"]:
            s.parallel(st, outer)


def _tile_columns(stage: Stage) -> int:
    """Tiles per row of a Winograd input transform: the modulus its body applies to the
    tile index (the last axis) to find a tile's column."""
    op = stage.tensor.op
    assert op is not None
    p = op.axes[-1].var
    for e in walk(op.body):
        if (isinstance(e, Binary) and e.op == "floormod" and e.a is p
                and isinstance(e.b, Const)):
            return int(e.b.value)
    return op.axes[-1].extent


class TiledSketch(Sketch):
    """Register-tiled reduction: matmul-like stages and conv2d / pool2d windows.

    Loops, outer to inner: the fused parallel outer loops (other spatial axes, the row
    block's outer loop and the vector block's outer loop, in spatial or columns-first
    order), an optional serial tile of row and column blocks (cache blocking), then the
    reduce loops (the largest one optionally split), the ``rows`` loop and the ``vec``
    loop. With every knob at its default this is exactly the default CPU rule.
    """

    kind = "tiled"

    def __init__(self, stage: Stage, row_axis: int | None, outputs: set[int],
                 readers: dict[int, list[Stage]], rule: Rule, window: bool = False,
                 constants: frozenset[str] = frozenset(), unroll_reduce: bool = False) -> None:
        super().__init__(stage)
        op = stage.tensor.op
        assert op is not None
        self.spatial = [a.var.name for a in op.axes]
        self.reduce = [a.var.name for a in op.reduce_axes]
        self.extent = {a.var.name: a.extent for a in (*op.axes, *op.reduce_axes)}
        self.row = self.spatial[row_axis] if row_axis is not None else None
        if self.row is not None and self.extent[self.row] <= 1:
            self.row = None
        self.window = window
        self.pointwise = "flatten" in rule  # the rule may run one vector over the image
        self.kaxis = max(self.reduce, key=lambda n: self.extent[n])
        self.rperms = [list(p) for p in itertools.permutations(self.reduce)][:6]
        self.epilogue = epilogue_consumer(stage, outputs, readers)
        cols = self.extent[self.spatial[-1]]
        if self.pointwise:
            cols *= self.extent[self.spatial[-2]]
        rows = self.extent[self.row] if self.row else 1
        k = self.extent[self.kaxis]
        vec = int(rule.get("vec", 16))
        rows_default = int(rule.get("rows", 1)) if self.row else 1
        if unroll_reduce:
            table = math.prod(self.extent[r] for r in self.reduce)
            rows_default = max(1, min(rows_default, UNROLL_MAX_TABLE // table))
        knobs = [
            Knob("vec", _choices(cols, (4, 8, 16, 24, 32, 48, 64), vec), vec),
            Knob("rows", _choices(rows, (1, 2, 3, 4, 5, 6, 8, 10, 12), rows_default),
                 rows_default),
            Knob("outer_order", ("natural", "cols_first", "rows_first"), rule.get(
                "outer_order", "cols_first" if self.row is not None and window else "natural")),
            Knob("tile_rows", (1, 2, 4, 8), 1),
            Knob("tile_cols", _choices(cols, (1, 2, 4, 8, 16), rule.get("tile_cols", 1)),
                 rule.get("tile_cols", 1)),
            Knob("inner_order", ("rc", "cr"), "rc"),
            Knob("ksplit", _choices(k - 1, (0, 4, 8, 16, 32, 64)), 0),
            Knob("korder", tuple(range(len(self.rperms))), 0),
            Knob("rows_pos", ("inner", "mid"), "inner"),
            Knob("kpos", ("inner", "outer"), "inner"),
            Knob("unroll_rows", (True, False), True),
            Knob("unroll_k", (False, True), False),
            Knob("vectorize", (True, False), True),
            Knob("cache", (True, False), True),
            Knob("epilogue", (True, False), True),
            Knob("parallel", (False, True), _parallel_default(stage, rule)),
        ]
        if self.pointwise:
            knobs.insert(0, Knob("flatten", (True, False), rule["flatten"]))
        if len(self.reduce) == 1 and not window:
            # the reduction in cache-sized blocks, partial sums kept in the output
            kblock = int(rule.get("kblock", 0))
            knobs.append(Knob("kblock", _choices(k - 1, (0, 128, 256, 512), kblock), kblock))
        if unroll_reduce:  # small reduce loops over constant tables (Winograd's output)
            knobs.append(Knob("unroll_reduce", (True, False), True))
        self.weight = channel_vector_weight(stage, constants) if window else None
        # A Winograd output transform reads its products with output channels contiguous:
        # its vector loop runs over those by default, and needs no weight stored otherwise.
        if self.weight is not None or unroll_reduce:
            o, x = self.extent[self.spatial[1]], self.extent[self.spatial[-1]]
            if self.weight is not None:  # its rows run over the flattened image
                x *= self.extent[self.spatial[-2]]
            crows = rule.get("crows", min(8, x, rows_default) if unroll_reduce else min(8, x))
            cvec = rule.get("cvec", min(16, o))
            knobs += [Knob("vec_axis", ("cols", "channels"), rule.get(
                          "vec_axis", "channels" if unroll_reduce else "cols")),
                      Knob("cvec", _choices(o, (8, 16, 32, 48, 64), cvec), cvec),
                      Knob("crows", _choices(x, (2, 4, 6, 7, 8, 10, 12, 14, 16), crows),
                           crows)]
        self.panel = None if window else packable_weight(stage, constants)
        if self.panel is not None:
            knobs.append(Knob("pack", (False, True), rule.get("pack", False)))
        self.knobs = tuple(knobs)

    def seeds(self) -> list[Values]:
        """The rules' other choices, measured early by the search. For a convolution:
        vector loops along output columns (the rule for grouped convolutions), and other
        orders of the output-channel tile; for a matrix product with a constant
        right-hand side: the other choice of packed panels than the rule's."""
        if self.panel is not None:
            pack = next(k.default for k in self.knobs if k.name == "pack")
            return [{"pack": not pack}]
        if self.weight is None:
            return []
        # (with channel lanes the image is one flattened axis: "cols_first" is "natural")
        return [{"vec_axis": "cols"}, *({"vec_axis": "channels", "outer_order": order}
                                        for order in ("natural", "rows_first"))]

    def _cols(self, v: Values) -> int:
        if v.get("vec_axis") == "channels":
            return int(v["cvec"])
        cols = self.extent[self.spatial[-1]]
        if v.get("flatten"):
            cols *= self.extent[self.spatial[-2]]
        return min(v["vec"], cols)

    def valid(self, v: Values) -> bool:
        cols = self._cols(v)
        rows = v["crows"] if v.get("vec_axis") == "channels" else v["rows"]
        if v["cache"] and rows * cols > LOCAL_MAX:
            return False
        if v["kpos"] == "outer" and (v["cache"] or not v["ksplit"]):
            return False  # a k loop above a cached tile would overwrite partial sums
        if v.get("kblock") and (not v["cache"] or v["ksplit"]):
            return False  # blocks of k keep their partial sums in a cached tile
        unrolled = (rows if v["unroll_rows"] else 1) * (
            v["ksplit"] if v["unroll_k"] and v["ksplit"] else 1)
        if v.get("unroll_reduce"):
            unrolled *= math.prod(self.extent[r] for r in self.reduce)
            return unrolled <= UNROLL_MAX_TABLE and not v["ksplit"]
        return unrolled <= (UNROLL_MAX_VECTOR if v["vectorize"] and cols > 1
                            else UNROLL_MAX_SCALAR)

    def apply(self, s: Schedule, v: Values) -> None:
        st = self.stage
        spatial = list(self.spatial)
        vec_axis, row_axis, vec, rows = spatial[-1], self.row, v["vec"], v["rows"]
        if v.get("vec_axis") == "channels":
            # Vector lanes over output channels, rows over output columns: any stride or
            # image width fills whole registers. The weights are stored with a block of
            # output channels last, so each (c, ry, rx) reads its lanes contiguously and
            # a block's weights are one sequential run (blocks of the vector width when
            # it divides the channels, else the whole output-channel axis last).
            if self.weight is not None:  # a convolution: rows over the flattened image
                spatial[-2:] = [s.fuse(st, spatial[-2], spatial[-1])]
            vec_axis, row_axis, vec, rows = spatial[1], spatial[-1], v["cvec"], v["crows"]
            if self.weight is not None:  # (a Winograd output transform reads no weight)
                if self.extent[vec_axis] % vec == 0:
                    s.layout(st, self.weight, (0, 2, 3, 4, 1), (0, vec))
                else:
                    s.layout(st, self.weight, (1, 2, 3, 0))
        elif v.get("flatten"):  # a 1x1 convolution: one vector axis over the whole image
            spatial[-2:] = [s.fuse(st, spatial[-2], spatial[-1])]
            vec_axis = spatial[-1]
        jo, ji = s.split(st, vec_axis, vec)
        if v.get("pack") and self.panel is not None:
            # B[k, j] stored as panels [j / vec, k, vec]: the k loop then walks one
            # contiguous run instead of a row of B (up to a page apart) per step.
            s.layout(st, self.panel, (1, 0, 2), (1, vec))
        io = ii = None
        if row_axis is not None:
            io, ii = s.split(st, row_axis, rows)
        ioi = joi = None
        if v["tile_rows"] > 1 and io is not None:
            io, ioi = _split(s, st, io, s[st].leaf(io).extent, v["tile_rows"])
        if 1 < v["tile_cols"] < s[st].leaf(jo).extent:
            jo, joi = s.split(st, jo, v["tile_cols"])
        others = [a for a in spatial if a not in (row_axis, vec_axis)]
        if v["outer_order"] == "cols_first":
            outer = [*others, jo, io]
        elif v["outer_order"] == "rows_first":
            outer = [*others, io, jo]
        else:
            outer = [io if a == row_axis else jo if a == vec_axis else a for a in spatial]
        outer = [x for x in outer if x is not None]
        inner_tile = [x for x in (ioi, joi) if x is not None]
        if v["inner_order"] == "cr":
            inner_tile.reverse()
        reduce: list[str] = []
        ko = ki = kb = None
        for name in self.rperms[v["korder"]]:
            if name == self.kaxis and 0 < v.get("kblock", 0) < self.extent[name]:
                kb, name = s.split(st, name, v["kblock"])
            if name == self.kaxis and v["ksplit"]:
                ko, ki = s.split(st, name, v["ksplit"])
                reduce += [ko, ki]
            else:
                reduce.append(name)
        if ii is not None and v["rows_pos"] == "mid" and ko is not None:
            reduce.insert(reduce.index(ko) + 1, ii)
            below = [*reduce, ji]
        else:
            below = [*reduce, ii, ji]
        if v["kpos"] == "outer" and ko is not None:
            below.remove(ko)
            order = [*outer, ko, *inner_tile, *below]
        else:
            order = [*outer, *inner_tile, *below]
        if kb is not None:  # blocks of k outermost, the parallel loop inside
            order.insert(0, kb)
        s.reorder(st, *[x for x in order if x is not None])
        fused = fuse_all(s, st, outer)
        at = inner_tile[-1] if inner_tile else fused
        cached = bool(v["cache"]) and at is not None
        if cached:
            s.cache_write(st, at)
        if ii is not None and v["unroll_rows"]:
            s.unroll(st, ii)
        if ki is not None and v["unroll_k"]:
            s.unroll(st, ki)
        if v.get("unroll_reduce"):
            for name in reduce:
                s.unroll(st, name)
        if v["vectorize"] and s[st].leaf(ji).extent <= VECTOR_LANES_MAX:
            s.vectorize(st, ji)
        if fused is not None and v["parallel"] and s[st].leaf(fused).extent > 1:
            s.parallel(st, fused)
        if cached and v["epilogue"] and self.epilogue is not None and kb is None:
            try:
                s.fuse_epilogue(st, self.epilogue)
            except ValueError:
                s.steps.pop()


def sketch_for(stage: Stage, outputs: set[int], readers: dict[int, list[Stage]],
               constants: frozenset[str] = frozenset(), rule: Rule | None = None) -> Sketch:
    """The sketch of one stage, by the same classification as the default CPU rules;
    ``constants`` names the inputs that are weights (which ``layout`` steps may store
    transposed), ``rule`` the knobs the stage's default rule asked for, with its choices
    (``rule_knobs``): those are the sketch's defaults."""
    op = stage.tensor.op
    assert op is not None
    rule = rule or {}
    is_output = stage.tensor.uid in outputs
    if op.tag == "winograd_input":
        return WinogradInputSketch(stage)
    if not op.reduce_axes:
        if stage.name.endswith("_pad"):
            return ElementwiseSketch(stage, rule, pad=True)
        if is_output:
            return ElementwiseSketch(stage, rule)
        return InlineSketch(stage)
    if op.tag == "conv2d" or op.tag.startswith("pool_"):
        # rows of output channels; of output rows for a pooling or depthwise window
        row_axis = 1 if op.tag == "conv2d" and not depthwise_conv(stage) else 2
        return TiledSketch(stage, row_axis, outputs, readers, rule, window=True,
                           constants=constants)
    if op.tag == "winograd_output":
        return TiledSketch(stage, 1, outputs, readers, rule, window=True, unroll_reduce=True)
    if last_axis_contiguous(stage):
        return TiledSketch(stage, len(op.axes) - 2 if len(op.axes) >= 2 else None, outputs,
                           readers, rule, constants=constants)
    return ReductionSketch(stage, rule)
