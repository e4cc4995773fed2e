"""The checks a tuning record passes before ``build`` applies it (records.py reads and
chooses records; this module says whether one may be used).

A record's steps go straight into generated code, so a record is checked twice: its own
fields and step arguments when it is read (:func:`check_record`), and its steps replayed
on the workload's compute when ``build`` picks it (:func:`check_steps`): stage and loop
names that exist, split factors near their loop's extent, loop kinds the target runs,
a schedule that lowers. Each check raises :class:`InvalidRecord` naming the field at
fault; records.py turns that into a warning and skips the record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from tensorsmith.runtime.winograd import TRANSFORMS

from . import te
from .errors import TargetError
from .lowering import constant_conv_weights, group_compute, weight_transforms
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


class InvalidRecord(ValueError):
    """Why a record is skipped: the ``field`` at fault (``steps[3].args[1]``) and why."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


#: What records.py reads for a line nested deeper than the JSON parser goes.
TOO_DEEP = object()


# -- the record's own fields ------------------------------------------------------------
def check_record(rec: Any) -> None:
    """Raise :class:`InvalidRecord` unless ``rec`` has the fields and types of a record."""
    _require(rec is not TOO_DEEP, "line", "nested deeper than any record")
    _require(isinstance(rec, dict), "line", f"a JSON {_json_type(rec)}, not an object")
    for name in ("workload", "target"):
        _require(isinstance(rec.get(name), str), name, _expected("a string", rec.get(name)))
    try:
        Target.parse(rec["target"], installed=False)  # records of any target share a file
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


def _intrinsic(value: Any, field: str) -> None:
    from .te.matrix_lower import INTRINSICS

    _require(value in INTRINSICS, field, f"{_short(value)} is not one of "
             + ", ".join(INTRINSICS))


def _intrinsic_params(value: Any, field: str) -> None:
    from .te.matrix_lower import OPTIONAL, PARAMS

    ok = isinstance(value, dict) and len(value) <= len(PARAMS) + len(OPTIONAL) and all(
        isinstance(k, str) and _is_int(v) for k, v in value.items())
    _require(ok, field, _expected("an object of integer parameters", value))


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
    "tensorize": ((_intrinsic, _intrinsic_params), ()),
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
    text = json.dumps(v) if v is not TOO_DEEP else "..."
    return text if len(text) <= 40 else text[:37] + "..."


def _expected(what: str, v: Any) -> str:
    return f"expected {what}, got {_short(v)}"


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
    elif step.kind == "tensorize":
        _require(family == "gpu", f"{field}.kind", f"{family} targets have no "
                 "cooperative matrices to tensorize with")
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
