"""Default CPU schedules of kernels with run-time sizes (symbolic extents).

The static rules (cpu.py) size every loop from fixed extents and give every stage they
do not inline a buffer of its own. A kernel with symbolic extents cannot take either as
it is: a rule cannot ask whether ``batch*seq`` rows fit a register tile, and a buffer of
run-time size, though the plan places one per run, is a whole pass over memory that a
row at a time keeps in cache. So:

- elementwise stages read by others are inlined into their readers, always;
- an elementwise output runs by rows: its leading axes fused into one loop the threads
  share (fused with the column blocks too when no reduction rides along), the
  trailing static axes (or the last axis, where none is static) one loop cut into
  vector chunks, a masked tail where the chunk does not divide it;
- a reduction that is not an output (a softmax's max and sum, a layer norm's mean) is
  computed a row at a time inside the row loop of the stage that reads it
  (``compute_at``), into a buffer of one row of a fixed size; the rows are the leading
  axes the two stages share, their rest static (:meth:`DynamicCpuRules.rows_for`);
- a reduction that is an output fuses its spatial axes into one parallel loop;
- a window kernel (a convolution or pooling window, direct or by Winograd's stages)
  whose run-time sizes only count images (a ``batch``, a product's ``196*batch`` tiles)
  is scheduled whole by the static rules sized for ONE image (every such size at 1 on
  the stand-in graph), and their steps replay here: the same tiles, padding and parallel
  loops as the static kernel of one image, the images one more factor of the loops the
  rules fuse with the batch axis (the outermost, parallel one). Its padded input and
  Winograd's tiles are scratch of run-time size, which the plan places per run;
- other matrix products, convolutions and pooling windows keep the static register tile
  (cpu_tile.py): the static rules size it on a stand-in graph with every symbol at a
  typical value (proxy.py), and their steps replay on the symbolic stage, where a
  split of a symbolic axis gets a guarded (clamped) tail. A product of ``[batch*seq,
  K] x [K, N]`` thus keeps its rows x vector tile, its constant ``B`` stored as panels
  and its fused epilogue. Where the tile would need scratch or a register tile of
  run-time size (a packed copy of a symbolic operand, blocks of k without the fused
  epilogue), the rule retries without those choices, and falls back to the plain
  reduction above.

Free parameters still go through ``choose`` (the static rules' knobs, and ``row_vec``,
``vectorize``, ``parallel`` here), though the auto-tuner leaves such kernels to the
defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dtypes import itemsize
from ..errors import ModelError
from ..symbolic import Dim, Sym, math_prod, shape_text
from ..te.expr import Const
from ..te.lower import ROW_BUFFER_BYTES
from ..te.schedule import Schedule, Stage, Step, input_tensors, replay
from ..te.symbols import is_static, maybe_many
from ..te.visit import collect_loads
from .cpu import NO_YES, PARALLEL_MIN_WORK, VECTOR_BLOCK, YES_NO, CpuRules
from .cpu_shapes import fuse_all, inlined_body, left_hand_side, right_hand_side
from .knobs import Choose, KnobConflict
from .proxy import SIZE_HINT, bind, hinted

#: A stage's rule by kind (rules.py's table for the CPU).
RuleTable = dict[str, Callable[[Any, Stage], None]]
#: Trailing elements a row's vector loop should have at least: fewer, and the row loop
#: takes in the axis before (a symbolic one) too.
MIN_ROW_ELEMENTS = 16
#: Elements (at the typical sizes) from which a stage of run-time extent runs in
#: parallel by default: fewer than the static rules' threshold, since its sizes may be
#: far larger than the typical ones (and the threads' wake-up costs microseconds).
DYNAMIC_PARALLEL_MIN = 4096
#: Kinds scheduled by the static register-tile rules on a stand-in graph.
TILED = ("product", "window", "winograd_input", "winograd_input_blocked",
         "winograd_columns", "winograd_output")
#: Kinds of the stages that make a kernel a window kernel (:meth:`DynamicCpuRules.per_image`).
WINDOWS = ("window", "winograd_input", "winograd_input_blocked", "winograd_columns",
           "winograd_output")
#: Choices a retry takes away from a register tile that needed scratch of run-time size.
STRICT = {"kblock": 0, "tile_rows": 1, "ksplit": 0, "cache": True, "epilogue": True,
          "pack_rows": False}


def _static(shape: Sequence[Dim]) -> bool:
    return all(is_static(d) for d in shape)


def _chunk(cols: Dim) -> int:
    """Lanes of a row's vector chunk: :data:`VECTOR_BLOCK`, or a width that divides a
    static row (96 in two chunks of 48, not 64 and a masked 32), or the whole row where
    it is shorter."""
    if not is_static(cols):
        return VECTOR_BLOCK
    assert isinstance(cols, int)
    if cols <= VECTOR_BLOCK:
        return max(1, cols)
    return next((v for v in (VECTOR_BLOCK, 48, 32) if cols % v == 0), VECTOR_BLOCK)


class DynamicCpuRules:
    """The rules applied to one schedule whose stages have symbolic extents."""

    def __init__(self, rules: CpuRules, table: RuleTable) -> None:
        self.rules = rules
        self.table = table
        self.s: Schedule = rules.s
        self.choose: Choose = rules.choose
        self.out_ids = rules.out_ids
        self.readers = rules.readers
        self.deferred: list[Stage] = []
        self.stand_in = bind(self.s.outputs)

    def apply(self, kind_of: Callable[[Stage, set[int]], str]) -> Schedule:
        if self.per_image(kind_of):
            return self.s
        for st in self.s.stages:
            if st.merged or st.inline or st.attached is not None:
                continue
            kind = kind_of(st, self.out_ids)
            output = st.tensor.uid in self.out_ids
            if kind in ("inline", "pad") and not output:
                self.s.compute_inline(st.name)
            elif kind in ("inline", "elementwise", "pad"):
                self.elementwise(st)
            elif kind in TILED:
                self.tiled(st, kind)
            elif output or _static(st.tensor.shape):
                self.reduction(st)
            else:
                self.deferred.append(st)
        left = [p.name for p in self.deferred if p.attached is None]
        if left:
            raise ModelError(
                f"cannot schedule {', '.join(left)} for the CPU with sizes known only at run "
                "time: no stage reading it runs by the rows it is computed in; fix the "
                "shapes with --input-shape (or from_onnx(shapes=...))")
        return self.s

    # -- window kernels, one image at a time ----------------------------------------
    def per_image(self, kind_of: Callable[[Stage, set[int]], str]) -> bool:
        """Schedule a window kernel whose run-time sizes count images (:func:`image_sizes`)
        with the static rules of every stage, sized on the stand-in graph with each size
        at 1, and return True; False (nothing scheduled) for another kernel, or where
        those steps would need a register tile or a packed copy of run-time size.

        One image is what the static rules size a window for: the tile over its output
        channels and flattened pixels, the padding in a buffer of its own or read in
        place, whether it pays to run Winograd's stages in parallel. Sized for 64 images
        they would pick other orders and blocks (by the whole batch's bytes), and without
        a padded buffer (scratch of run-time size) the tile would select at every tap.
        The rules fuse the batch axis into their outermost loop, which runs in parallel:
        with one image the threads share its blocks as they do in the static kernel,
        with more they share the images' blocks."""
        sizes = image_sizes(self.s, lambda st: kind_of(st, self.out_ids))
        if sizes is None:
            return False
        proxy = replay(bind(self.s.outputs, sizes), list(self.s.steps))
        rules = CpuRules(proxy, self.rules.res, self.choose, self.rules.constants)
        before = len(proxy.steps)
        try:
            for st in proxy.stages:
                if not st.merged:  # (a stage is merged once a tile takes it as epilogue)
                    self.table[kind_of(st, rules.out_ids)](rules, st)
        except (KnobConflict, ValueError, KeyError):
            return False
        steps = proxy.steps[before:]
        try:
            trial = replay(self.s.outputs, [*self.s.steps, *steps])
        except (ValueError, KeyError):
            return False
        if not all(_fixed_tile(t) and _fixed_packs(t, trial) for t in trial.stages):
            return False
        for step in steps:
            self.s.apply(step)
        return True

    # -- elementwise ------------------------------------------------------------------
    def elementwise(self, st: Stage) -> None:
        """Rows in parallel, each row's trailing axes one loop in vector chunks; the
        reductions it reads computed a row at a time in its row loop."""
        producers = self.producers(st)
        shape = st.tensor.shape
        r = self.rows_for(st, producers, self.preferred_rows(shape))
        names = [lf.name for lf in st.leaves]
        work = hinted(math_prod(shape))
        cols_extent = math_prod(shape[r:])
        vec = self.choose(st, "row_vec", _chunk(cols_extent), (4, 8, 16, 32, 48, 64))
        vectorize = self.choose(st, "vectorize", True, YES_NO)
        parallel = self.choose(st, "parallel", work >= self.parallel_min(st), NO_YES)
        rows = fuse_all(self.s, st.name, names[:r])
        cols = fuse_all(self.s, st.name, names[r:])
        outer = None
        if cols is not None and (not is_static(cols_extent) or cols_extent > 1):
            outer, inner = self.s.split(st.name, cols, max(1, vec))
            if vectorize:
                self.s.vectorize(st.name, inner)
        if producers:
            assert rows is not None
            for p in producers:
                self.attach(p, st, r, rows)
            loop: str | None = rows
        else:
            loop = fuse_all(self.s, st.name, [x for x in (rows, outer) if x is not None])
        if loop is not None and parallel and maybe_many(st.leaf(loop).extent):
            self.s.parallel(st.name, loop)

    def preferred_rows(self, shape: Sequence[Dim]) -> int:
        """Leading axes of the row loop: all but the static trailing ones, or the last
        axis too where those are fewer than :data:`MIN_ROW_ELEMENTS` (none, or a
        ``[batch, seq, 2]``)."""
        r = len(shape)
        while r > 0 and is_static(shape[r - 1]):
            r -= 1
        while r > 0 and hinted(math_prod(shape[r:])) < MIN_ROW_ELEMENTS:
            r -= 1
        return r

    def parallel_min(self, st: Stage) -> int:
        """Work from which ``st`` runs in parallel by default (:data:`DYNAMIC_PARALLEL_MIN`
        for a stage of run-time extent)."""
        static = all(is_static(lf.extent) for lf in st.leaves)
        return PARALLEL_MIN_WORK if static else DYNAMIC_PARALLEL_MIN

    # -- reductions ----------------------------------------------------------------------
    def reduction(self, st: Stage) -> None:
        """Spatial axes fused into one loop (in parallel), the reduction inside in its
        own order; the reductions it reads computed a row at a time in that loop."""
        producers = self.producers(st)
        spatial = [lf.name for lf in st.leaves if not lf.reduce]
        work = hinted(math_prod(lf.extent for lf in st.leaves))
        parallel = self.choose(st, "parallel", work >= self.parallel_min(st), NO_YES)
        if producers:
            r = self.rows_for(st, producers, len(spatial))
            loop = fuse_all(self.s, st.name, spatial[:r])
            assert loop is not None
            for p in producers:
                self.attach(p, st, r, loop)
        else:
            loop = fuse_all(self.s, st.name, spatial)
        if loop is not None and parallel and maybe_many(st.leaf(loop).extent):
            self.s.parallel(st.name, loop)

    # -- register tiles ------------------------------------------------------------------
    def tiled(self, st: Stage, kind: str) -> None:
        """The static rule of ``kind``, sized on the stand-in graph, replayed here; a
        reduction (or, when read by another stage, a row at a time) where no tile fits,
        or where the stage reads reductions computed a row at a time (an argmax's
        maximum: a tile has no row loop to compute them in)."""
        for strict in (False, True) if not self.producers(st) else ():
            steps = self.stand_in_steps(st, kind, strict)
            if steps is not None and self.tile_fits(st, steps):
                for step in steps:
                    self.s.apply(step)
                return
        if st.tensor.uid in self.out_ids or _static(st.tensor.shape):
            self.reduction(st)
        else:
            self.deferred.append(st)

    def stand_in_steps(self, st: Stage, kind: str, strict: bool) -> list[Step] | None:
        """The steps the static rule of ``kind`` takes for ``st`` on the stand-in graph
        (after this schedule's steps so far), or None where it cannot."""
        proxy = replay(self.stand_in, list(self.s.steps))
        rules = CpuRules(proxy, self.rules.res, self.vetoed(st, strict), self.rules.constants)
        before = len(proxy.steps)
        try:
            self.table[kind](rules, proxy[st.name])
        except (KnobConflict, ValueError, KeyError):
            return None
        return proxy.steps[before:]

    def vetoed(self, st: Stage, strict: bool) -> Choose:
        """``choose`` without the answers that would give ``st`` scratch of run-time size:
        a packed copy of an operand with symbolic dims (and, ``strict``, :data:`STRICT`)."""
        rhs, lhs = right_hand_side(st), left_hand_side(st)
        vetoes: dict[str, Any] = dict(STRICT) if strict else {}
        if rhs is not None and not _static(rhs.shape):
            vetoes["pack"] = False
        if lhs is not None and not _static(lhs.shape):
            vetoes["pack_rows"] = False

        def choose(stage: Stage, knob: str, default: Any, choices: Sequence[Any] = ()) -> Any:
            answer = self.choose(stage, knob, default, choices)
            if stage.name == st.name and knob in vetoes:
                return vetoes[knob]
            return answer

        return choose

    def tile_fits(self, st: Stage, steps: list[Step]) -> bool:
        """Whether ``steps`` schedule ``st`` without scratch or registers of run-time
        size: its tile static, no packed copy of a symbolic operand, and its result
        either an output, written back through its epilogue, or of a fixed size."""
        try:
            trial = replay(self.s.outputs, [*self.s.steps, *steps])
        except (ValueError, KeyError):
            return False
        t = trial[st.name]
        if (t.tensor.uid not in self.out_ids and t.epilogue is None
                and not _static(t.tensor.shape)):
            return False
        return _fixed_tile(t) and _fixed_packs(t, trial)

    # -- rows shared with the reductions a stage reads -----------------------------------
    def producers(self, st: Stage) -> list[Stage]:
        """The deferred reductions ``st`` reads, directly, through inlined stages or
        through one another."""
        found: dict[int, Stage] = {}
        seen: set[int] = set()
        todo = list(input_tensors(st.tensor))
        while todo:
            t = todo.pop()
            if t.uid in seen or t.op is None:
                continue
            seen.add(t.uid)
            x = self.s[t.name]
            if x.inline:
                todo += input_tensors(t)
            elif any(x is p for p in self.deferred) and x.attached is None:
                found[t.uid] = x
                todo += input_tensors(t)
        return sorted(found.values(), key=self.s.stages.index)

    def rows_for(self, st: Stage, producers: list[Stage], preferred: int) -> int:
        """The leading axes of ``st`` its row loop fuses: ``preferred`` without
        producers, else the nearest count under which every producer computes a row of
        a fixed size at the rows ``st`` reads (:meth:`rows_ok`)."""
        if not producers:
            return preferred
        op = st.tensor.op
        assert op is not None
        valid = [r for r in range(1, len(op.axes) + 1) if self.rows_ok(st, producers, r)]
        if not valid:
            shapes = ", ".join(f"{p.name} {shape_text(p.tensor.shape)}" for p in producers)
            raise ModelError(
                f"cannot schedule {st.name} {shape_text(st.tensor.shape)} for the CPU with "
                f"sizes known only at run time: it reads {shapes}, which it cannot compute "
                "a row of a fixed size at a time; fix the shapes with --input-shape (or "
                "from_onnx(shapes=...))")
        return min(valid, key=lambda r: (abs(r - preferred), -r))

    def rows_ok(self, st: Stage, producers: list[Stage], r: int) -> bool:
        """Whether every producer can run one row of ``st``'s first ``r`` axes at a time:
        it has the same leading dims, the rest of a fixed, small size; only these stages
        read it; and each reads it at its own leading coordinates."""
        shape = tuple(st.tensor.shape[:r])
        group = {st.tensor.uid, *(p.tensor.uid for p in producers)}
        for p in producers:
            if tuple(p.tensor.shape[:r]) != shape:
                return False
            rest = math_prod(p.tensor.shape[r:])
            if not is_static(rest) or rest * itemsize(p.tensor.dtype) > ROW_BUFFER_BYTES:
                return False
            if not self.read_only_by(p, group):
                return False
        by_uid = {p.tensor.uid for p in producers}
        for x in (st, *producers):
            op = x.tensor.op
            assert op is not None
            for load in collect_loads(inlined_body(x, self.s)):
                if getattr(load.buffer, "uid", None) not in by_uid:
                    continue
                for d in range(r):
                    i = load.indices[d]
                    if not (i is op.axes[d].var or (isinstance(i, Const) and i.value == 0
                                                    and op.axes[d].extent == 1)):
                        return False
        return True

    def read_only_by(self, p: Stage, group: set[int]) -> bool:
        """Whether only stages of ``group`` read ``p`` (directly or through inlined ones)."""
        for reader in self.readers.get(p.tensor.uid, []):
            if reader.inline:
                if not self.read_only_by(reader, group):
                    return False
            elif reader.tensor.uid not in group:
                return False
        return True

    def attach(self, p: Stage, st: Stage, r: int, rows: str) -> None:
        """``p``'s first ``r`` axes fused, run as ``st``'s row loop ``rows``."""
        names = [lf.name for lf in p.leaves if not lf.reduce]
        fuse_all(self.s, p.name, names[:r])
        self.s.compute_at(p.name, st.name, rows)


def _fixed_tile(t: Stage) -> bool:
    """Whether ``t``'s register tile (the loops below its ``cache_write``), if any, has a
    fixed size."""
    if t.cache_at is None:
        return True
    below = t.leaves[t.leaves.index(t.leaf(t.cache_at)) + 1:]
    tile = [lf for lf in below if not lf.reduce]
    if t.rfactor is not None:
        tile.append(t.leaf(t.rfactor))
    return all(is_static(lf.extent) for lf in tile)


def _fixed_packs(t: Stage, s: Schedule) -> bool:
    """Whether every input of ``t`` that ``s`` packs (a copy the kernel makes) has a fixed
    size."""
    packed = {x.name: x for x in input_tensors(t.tensor)}
    return all(name not in packed or _static(packed[name].shape) for name in s.packs)


def _counted_symbol(d: Dim) -> str | None:
    """The symbol ``d`` is a multiple of (``batch`` for ``batch`` and ``196*batch``), or
    None where it is static or any other polynomial (``h + 2``, ``batch*seq``)."""
    if not isinstance(d, Sym) or len(d.terms) != 1:
        return None
    monomial, _ = d.terms[0]
    if len(monomial) != 1:
        return None
    atom, power = monomial[0]
    return atom if isinstance(atom, str) and power == 1 else None


def image_sizes(s: Schedule, kind: Callable[[Stage], str]) -> dict[str, int] | None:
    """``{symbol: 1}`` for the run-time sizes of a window kernel that only count images,
    else None. Such a kernel has a stage of a :data:`WINDOWS` kind; every window (and
    Winograd output) of it is symbolic along its batch axis only (axis 0: its channels
    and image are fixed); and every symbolic size of its stages and of what they read
    is a multiple of one symbol (the images, or a Winograd product's tiles of all
    images), so that the work grows by whole images."""
    windows = [st for st in s.stages if not st.inline and kind(st) in WINDOWS]
    if not windows:
        return None
    if not all(_static(st.tensor.shape[1:]) for st in windows
               if kind(st) in ("window", "winograd_output")):
        return None
    names: set[str] = set()
    for st in s.stages:
        for t in (st.tensor, *input_tensors(st.tensor)):
            for d in t.shape:
                if not is_static(d):
                    name = _counted_symbol(d)
                    if name is None:
                        return None
                    names.add(name)
    return dict.fromkeys(sorted(names), 1) if names else None


def schedule_dynamic(rules: CpuRules, table: RuleTable,
                     kind_of: Callable[[Stage, set[int]], str]) -> Schedule:
    """The default CPU schedule of a kernel with run-time sizes (the module's rules)."""
    return DynamicCpuRules(rules, table).apply(kind_of)


__all__ = ["SIZE_HINT", "DynamicCpuRules", "image_sizes", "schedule_dynamic"]
