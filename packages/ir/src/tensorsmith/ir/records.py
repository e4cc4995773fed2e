"""Tuning records: JSON lines, one measured schedule candidate a line.

Each line: ``{"workload": key, "target": str, "steps": [[kind, stage, args], ...],
"costs": [seconds, ...], "error": null | str, "versions": {...}}``. The tuner appends
and flushes a line per measurement (so a killed run loses nothing); ``build`` applies
the fastest error-free record of each workload for the same target kind. A record with
``"selected": true`` is the tuner's final choice, made by re-measuring the fastest few
side by side (one lucky timing can make a slower schedule the fastest record); when a
workload has one, the last such record wins over any single timing.

A records file is input like a model: it may be edited, truncated or come from
elsewhere, and the steps it holds go straight into generated code (a split factor past
the loop makes a tile the stack cannot hold). So every record is checked before use,
here and nowhere else: its fields and step arguments when read (:func:`read_records`),
its stage and loop names and split factors against the workload's compute when
``build`` picks it (:func:`applicable_steps`). A record that fails is skipped with a
:class:`RecordWarning` naming its line, field and the reason, never applied; its
workload gets the next preferred record, else the default schedule. A file that is not
JSON lines at all, or cannot be read, raises :class:`RecordsError`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tensorsmith.runtime.winograd import TRANSFORMS

from . import te
from .errors import ModelError, TargetError
from .lowering import constant_conv_weights, group_compute, weight_transforms, workload_key
from .ops.winograd import eligible
from .passes.fuse import FusedGroup
from .target import Target
from .te.schedule import Schedule, Step, input_tensors
from .te.stmt import LOOP_KINDS

#: Loop kinds a CPU kernel can run; GPU targets also bind loops to blockIdx/threadIdx.
CPU_LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
#: The widest split past a loop's extent a rule makes: a tile of vector lanes with a
#: masked tail (64 int8 lanes of an AVX-512 register). Beyond it and beyond twice the
#: extent (a GPU tile rounded up), a factor only makes buffers nobody needs.
MAX_PADDED_FACTOR = 64
#: The most elements a ``cache_write`` tile may hold: it lives on the stack of a worker
#: thread (the rules size it for registers; a tile past this only overflows the stack).
MAX_LOCAL_ELEMENTS = 1 << 16


class RecordsError(ModelError):
    """A records file that cannot be read, or is not JSON lines at all."""


class RecordWarning(UserWarning):
    """A tuning record that is skipped: it does not describe a schedule of its workload."""


class InvalidRecord(ValueError):
    """Why a record is skipped: the ``field`` at fault (``steps[3].args[1]``) and why."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


@dataclass(frozen=True)
class Candidate:
    """A record's schedule, with where it came from (for the warning if it is skipped)."""

    source: str  # "path:line"
    steps: list[Step]


# -- reading ----------------------------------------------------------------------------
def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The well-formed records of ``path`` in file order (others skipped with a warning)."""
    return [rec for _, rec in _numbered_records(path)]


def _numbered_records(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for lineno, data in _json_lines(path):
        try:
            check_record(data)
        except InvalidRecord as e:
            skip(f"{path}:{lineno}", e)
            continue
        out.append((lineno, data))
    return out


def _json_lines(path: str | os.PathLike) -> list[tuple[int, Any]]:
    """Each non-blank line's JSON value with its line number; a torn last line (a run
    killed mid-write) after earlier records is dropped."""
    out: list[tuple[int, Any]] = []
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise RecordsError(f"{path}:{lineno}: not a tuning record (not UTF-8 "
                                       "text)") from None
                if not line.strip():
                    continue
                try:
                    out.append((lineno, json.loads(line)))
                except RecursionError:
                    out.append((lineno, _TOO_DEEP))
                except json.JSONDecodeError:
                    if out and not f.readline():
                        break  # at most one torn last line
                    raise RecordsError(f"{path}:{lineno}: not a tuning record (records "
                                       "files hold one JSON object a line)") from None
    except FileNotFoundError:
        raise RecordsError(f"records file {path} does not exist") from None
    except OSError as e:
        raise RecordsError(f"cannot read records file {path}: {e.strerror or e}") from None
    return out


_TOO_DEEP = object()  # a line nested deeper than the JSON parser goes


def skip(source: str, error: InvalidRecord, workload: str | None = None) -> None:
    """Warn that the record at ``source`` is not applied, and why."""
    then = f"; workload {workload[:40]} gets another schedule" if workload else ""
    warnings.warn(f"{source}: tuning record skipped: {error.field}: {error.why}{then}",
                  RecordWarning, stacklevel=3)


# -- the record's own fields ------------------------------------------------------------
def check_record(rec: Any) -> None:
    """Raise :class:`InvalidRecord` unless ``rec`` has the fields and types of a record."""
    _require(rec is not _TOO_DEEP, "line", "nested deeper than any record")
    _require(isinstance(rec, dict), "line", f"a JSON {_json_type(rec)}, not an object")
    for name in ("workload", "target"):
        _require(isinstance(rec.get(name), str), name, _expected("a string", rec.get(name)))
    try:
        Target.parse(rec["target"])
    except TargetError as e:
        raise InvalidRecord("target", str(e)) from None
    costs = rec.get("costs")
    _require(isinstance(costs, list), "costs", _expected("a list", costs))
    for i, c in enumerate(costs):
        _require(_is_number(c) and c >= 0, f"costs[{i}]",
                 _expected("a non-negative number of seconds", c))
    error = rec.get("error")
    _require(error is None or isinstance(error, str), "error", _expected("null or a string", error))
    selected = rec.get("selected", False)
    _require(isinstance(selected, bool), "selected", _expected("true or false", selected))
    steps = rec.get("steps")
    _require(isinstance(steps, list), "steps", _expected("a list", steps))
    for i, step in enumerate(steps):
        check_step(step, f"steps[{i}]")


def check_step(step: Any, field: str) -> None:
    """A step is ``[kind, stage, args]`` with a known kind and arguments of its types."""
    _require(isinstance(step, list) and len(step) == 3, field,
             _expected("[kind, stage, args]", step))
    kind, stage, args = step
    _require(isinstance(kind, str) and kind in STEP_ARGS, f"{field}.kind",
             f"{_short(kind)} is not one of {', '.join(STEP_ARGS)}")
    _require(_is_name(stage), f"{field}.stage", _expected("a stage name", stage))
    _require(isinstance(args, list), f"{field}.args", _expected("a list", args))
    required, optional = STEP_ARGS[kind]
    if required == (_name_list,):  # reorder: any number of distinct loop names
        _name_list(args, f"{field}.args")
        return
    _require(len(required) <= len(args) <= len(required) + len(optional), f"{field}.args",
             f"{kind} takes {len(required)} to {len(required) + len(optional)} "
             f"arguments, not {len(args)}")
    for i, (check, value) in enumerate(zip((*required, *optional), args)):
        check(value, f"{field}.args[{i}]")


Check = Callable[[Any, str], None]


def _name(value: Any, field: str) -> None:
    _require(_is_name(value), field, _expected("a name", value))


def _name_list(value: Any, field: str) -> None:
    _require(len(value) > 0 and all(_is_name(v) for v in value), field,
             _expected("a list of loop names", value))
    _require(len(set(value)) == len(value), field, "names a loop twice")


def _factor(value: Any, field: str) -> None:
    _require(_is_int(value) and value >= 1, field, _expected("a positive integer", value))


def _loop_kind(value: Any, field: str) -> None:
    _require(value in LOOP_KINDS, field, f"{_short(value)} is not one of {', '.join(LOOP_KINDS)}")


def _scope(value: Any, field: str) -> None:
    _require(value in ("shared", "local"), field, f"{_short(value)} is not 'shared' or 'local'")


def _flag(value: Any, field: str) -> None:
    _require(isinstance(value, bool), field, _expected("true or false", value))


def _input(value: Any, field: str) -> None:
    ok = isinstance(value, str) and value.startswith("in") and value[2:].isdigit()
    _require(ok, field, _expected("an input name in<k>", value))


def _order(value: Any, field: str) -> None:
    ok = isinstance(value, list) and len(value) <= 8 and all(_is_int(v) for v in value)
    _require(ok, field, _expected("a list of axis numbers", value))


def _block(value: Any, field: str) -> None:
    ok = value is None or (isinstance(value, list) and len(value) == 2
                           and all(_is_int(v) for v in value))
    _require(ok, field, _expected("null or [axis, block size]", value))


def _transform(value: Any, field: str) -> None:
    _require(value is None or (isinstance(value, str) and value in TRANSFORMS), field,
             f"{_short(value)} is not one of {', '.join(TRANSFORMS)}")


#: Per step kind, the checks of its required and of its optional arguments (as
#: ``tensorsmith.ir.te.schedule.Schedule`` records them).
STEP_ARGS: dict[str, tuple[tuple[Check, ...], tuple[Check, ...]]] = {
    "split": ((_name, _factor), ()),
    "fuse": ((_name, _name), ()),
    "reorder": ((_name_list,), ()),
    "annotate": ((_name, _loop_kind), ()),
    "compute_inline": ((), ()),
    "cache_write": ((_name,), ()),
    "rfactor": ((_name,), ()),
    "cache_read": ((_name, _scope, _name), (_flag,)),
    "layout": ((_input, _order), (_block, _transform)),
    "pack": ((_input, _order), (_block,)),
    "fuse_epilogue": ((_name,), ()),
    "compute_at": ((_name, _name), ()),
}


def _require(ok: bool, field: str, why: str) -> None:
    if not ok:
        raise InvalidRecord(field, why)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and not math.isnan(v)


def _is_name(v: Any) -> bool:
    return isinstance(v, str) and 0 < len(v) <= 1000


def _json_type(v: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
             float: "number", type(None): "null"}
    return names.get(type(v), "value")


def _short(v: Any) -> str:
    text = json.dumps(v) if v is not _TOO_DEEP else "..."
    return text if len(text) <= 40 else text[:37] + "..."


def _expected(what: str, v: Any) -> str:
    return f"expected {what}, got {_short(v)}"


# -- choosing ---------------------------------------------------------------------------
def ranked_candidates(path: str | os.PathLike, target: Target) -> dict[str, list[Candidate]]:
    """Per workload, the error-free records for ``target``'s kind, preferred first: the
    selected ones, last first, then the others, fastest first."""
    selected: dict[str, list[Candidate]] = {}
    timed: dict[str, list[tuple[float, Candidate]]] = {}
    for lineno, rec in _numbered_records(path):
        if rec["error"] or not rec["costs"]:
            continue
        if Target.parse(rec["target"]).kind != target.kind:
            continue
        cand = Candidate(f"{path}:{lineno}", [Step.from_json(s) for s in rec["steps"]])
        if rec.get("selected"):
            selected.setdefault(rec["workload"], []).insert(0, cand)
        else:
            timed.setdefault(rec["workload"], []).append((min(rec["costs"]), cand))
    out = {k: list(v) for k, v in selected.items()}
    for key, items in timed.items():
        out.setdefault(key, []).extend(c for _, c in sorted(items, key=lambda x: x[0]))
    return out


def load_best_steps(path: str | os.PathLike, target: Target) -> dict[str, list[Step]]:
    """The preferred steps per workload: the last selected record, else the fastest
    error-free one (not yet checked against any workload: see :func:`applicable_steps`)."""
    return {k: v[0].steps for k, v in ranked_candidates(path, target).items()}


def applicable_steps(path: str | os.PathLike, target: Target, groups: Iterable[FusedGroup]
                     ) -> dict[str, list[Step]]:
    """The steps ``build`` applies per workload of ``groups``: its most preferred record
    that schedules the workload's compute (those that do not are skipped with a warning);
    a workload without one is absent and gets the default schedule."""
    ranked = ranked_candidates(path, target)
    out: dict[str, list[Step]] = {}
    seen: set[str] = set()
    for group in groups:
        key = workload_key(group)
        if key in seen:
            continue
        seen.add(key)
        for cand in ranked.get(key, ()):
            try:
                check_steps(group, cand.steps, target.family)
            except InvalidRecord as e:
                skip(cand.source, e, key)
                continue
            out[key] = cand.steps
            break
    return out


# -- against the workload ---------------------------------------------------------------
def check_steps(group: FusedGroup, steps: Sequence[Step], family: str) -> None:
    """Raise :class:`InvalidRecord` unless ``steps`` (well-formed, see :func:`check_step`)
    replay on ``group``'s compute: every stage and loop they name exists, every split
    stays near its loop's extent, every loop kind runs on ``family`` and on that loop,
    and the schedule they make lowers (a well-formed record may still leave a stage a
    fused epilogue reads without a buffer, say)."""
    _check_transforms(group, steps)
    inputs, outputs = group_compute(group, weight_transforms(list(steps)))
    sched = Schedule(outputs)
    for i, step in enumerate(steps):
        field = f"steps[{i}]"
        _require(any(st.name == step.stage for st in sched.stages), f"{field}.stage",
                 f"the workload has no stage {step.stage!r}")
        _check_on_stage(sched, step, family, field)
        try:
            sched.apply(step)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise InvalidRecord(f"{field}.args", str(e.args[0] if e.args else e)) from None
    _check_local_tiles(sched)
    try:
        te.lower(sched, inputs, outputs)
    except Exception as e:  # any failure of a record's schedule is the record's fault
        raise InvalidRecord("steps", f"the schedule does not lower ({type(e).__name__}: "
                                     f"{e})") from None


def _check_on_stage(sched: Schedule, step: Step, family: str, field: str) -> None:
    """What ``Schedule.apply`` would accept but not compile correctly."""
    st = sched[step.stage]
    names = {leaf.name: leaf for leaf in st.leaves}
    if step.kind == "split":
        leaf, factor = names.get(step.args[0]), step.args[1]
        if leaf is not None:
            limit = padded_limit(leaf.extent)
            _require(factor <= limit, f"{field}.args[1]",
                     f"split factor {factor} of loop {leaf.name} (extent {leaf.extent}) "
                     f"is not in 1..{limit}")
    elif step.kind == "annotate":
        leaf, kind = names.get(step.args[0]), step.args[1]
        allowed = CPU_LOOP_KINDS if family == "cpu" else LOOP_KINDS
        _require(kind in allowed, f"{field}.args[1]", f"{family} targets run no {kind} loops")
        reduce_ok = kind not in ("parallel", "blockIdx.x", "blockIdx.y", "blockIdx.z")
        _require(leaf is None or not leaf.reduce or reduce_ok, f"{field}.args[1]",
                 f"reduce loop {leaf.name if leaf else ''} cannot run {kind}")
    elif step.kind in ("layout", "pack") and len(step.args) > 2 and step.args[2]:
        axis, size = step.args[2]
        shapes = [t.shape for t in input_tensors(st.tensor) if t.name == step.args[0]]
        extent = shapes[0][axis] if shapes and 0 <= axis < len(shapes[0]) else 1
        _require(size <= padded_limit(extent), f"{field}.args[2]",
                 f"block size {size} of axis {axis} (extent {extent}) is not in "
                 f"1..{padded_limit(extent)}")


def padded_limit(extent: int) -> int:
    """The largest split factor or block size worth making of a loop or axis: past the
    extent, rules round a GPU tile up (below twice the extent) or fill a vector register
    with a masked tail (:data:`MAX_PADDED_FACTOR`); more only makes bigger buffers."""
    return max(2 * extent, MAX_PADDED_FACTOR)


def _check_local_tiles(sched: Schedule) -> None:
    """Every ``cache_write`` tile (kept on the stack, in registers at best) fits in
    :data:`MAX_LOCAL_ELEMENTS`."""
    for st in sched.stages:
        if st.cache_at is None:
            continue
        below = st.leaves[st.leaves.index(st.leaf(st.cache_at)) + 1:]
        size = math.prod(lf.extent for lf in below if not lf.reduce)
        if st.rfactor is not None:
            size *= st.leaf(st.rfactor).extent
        _require(size <= MAX_LOCAL_ELEMENTS, "steps",
                 f"the cache_write tile of {st.name} holds {size} elements, more than "
                 f"{MAX_LOCAL_ELEMENTS}")


def _check_transforms(group: FusedGroup, steps: Sequence[Step]) -> None:
    """A ``layout`` step's weight transform must be one that computes that convolution
    (else the compute the steps were made for cannot even be built)."""
    convs = dict((i, node) for node, i in constant_conv_weights(group, range(len(group.inputs))))
    for i, step in enumerate(steps):
        if step.kind != "layout" or len(step.args) < 4 or not step.args[3]:
            continue
        index, transform = int(step.args[0][2:]), step.args[3]
        node = convs.get(index)
        ok = (node is not None and node.inputs[0].dtype == "float32"
              and eligible(node.attrs, node.inputs[1].shape, transform))
        _require(ok, f"steps[{i}].args[3]",
                 f"{transform} does not compute a convolution with weight in{index}")
