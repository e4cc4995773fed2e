"""Graph -> tensor IR: each fused group becomes one scheduled, lowered kernel."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from tensorsmith.runtime.winograd import transformed_shape

from . import te
from .direct import is_direct, lower_direct
from .errors import ModelError
from .graph import Node, Value
from .op_registry import TensorType, get_op
from .passes.fuse import FusedGroup
from .symbolic import Dim, is_static
from .te.schedule import input_tensors
from .te.stmt import PrimFunc
from .te.tensor import Tensor

ScheduleFn = Callable[..., te.Schedule]  # (outputs, constants=names) -> schedule


def group_compute(group: FusedGroup, transforms: Mapping[int, str] | None = None
                  ) -> tuple[list[Tensor], list[Tensor]]:
    """Tensor expressions of a group: placeholders for its inputs, tensors for its outputs.

    ``transforms`` maps input indices to weight transforms (``weight_transforms``): such
    an input's placeholder is the transformed weight, and the ops reading it are told
    (attribute ``weight_transform``) to compute with it, e.g. a Winograd convolution."""
    transforms = transforms or {}
    env: dict[int, Tensor] = {}
    transformed: dict[int, str] = {}
    inputs = []
    for i, v in enumerate(group.inputs):
        shape = v.shape
        if i in transforms:
            shape = transformed_shape(v.shape, transforms[i])
            transformed[v.uid] = transforms[i]
        t = te.placeholder(shape, v.dtype, f"in{i}")
        env[v.uid] = t
        inputs.append(t)
    for j, node in enumerate(group.nodes):
        opdef = get_op(node.op)
        if opdef.compute is None:
            raise ModelError(f"node '{node.name}' ({node.op}) has no compute definition")
        attrs = node.attrs
        reads = [transformed[v.uid] for v in node.inputs if v.uid in transformed]
        if reads:
            attrs = {**attrs, "weight_transform": reads[0]}
        outs = opdef.compute([env[v.uid] for v in node.inputs], attrs,
                             [TensorType(v.shape, v.dtype) for v in node.outputs],
                             f"t{j}_{node.op}")
        for v, t in zip(node.outputs, outs):
            env[v.uid] = t
    outputs: list[Tensor] = []
    for k, v in enumerate(group.outputs):
        t = env[v.uid]
        if t.op is None or any(t is o for o in outputs):
            src = t
            t = te.compute(v.shape, lambda *i, src=src: src[i], name=f"out{k}_copy")
        outputs.append(t)
    return inputs, outputs


def has_symbolic_shapes(group: FusedGroup) -> bool:
    """Whether any value a group reads or computes has a dim known only at run time."""
    values = [*group.inputs, *(v for n in group.nodes for v in n.outputs)]
    return not all(is_static(v.shape) for v in values)


def workload_key(group: FusedGroup) -> str:
    """A stable key of what a group computes (ops, attributes, shapes, dtypes, wiring),
    independent of value and node names: equal groups in one model or across models
    share it, so one tuning record serves them all."""
    ids: dict[int, str] = {}
    for i, v in enumerate(group.inputs):
        ids[v.uid] = f"in{i}:{v.dtype}{list(v.shape)}"
    parts = []
    for j, node in enumerate(group.nodes):
        for k, v in enumerate(node.outputs):
            ids[v.uid] = f"n{j}.{k}"
        attrs = json.dumps(node.attrs, sort_keys=True, default=str)
        parts.append(f"{node.op}({','.join(ids[v.uid] for v in node.inputs)}){attrs}")
    parts.append("->" + ",".join(ids[v.uid] for v in group.outputs))
    text = ";".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:16] + ":" + text[:120]


def weight_transforms(steps: list[te.Step] | None) -> dict[int, str]:
    """Inputs (by index) that ``layout`` steps store transformed, with the transform:
    the compute those steps were made for reads them transformed."""
    return {int(s.args[0][2:]): s.args[3] for s in steps or ()
            if s.kind == "layout" and len(s.args) > 3 and s.args[3]}


def default_transforms(group: FusedGroup, family: str, constant_inputs: Sequence[int]
                       ) -> dict[int, str]:
    """The weight transforms a group computes with by default on a target ``family``
    (input index -> transform), for the weights among ``constant_inputs``: a CPU's fast
    convolutions (schedules/cpu_algorithms.py). The auto-tuner's ``algorithm`` knob
    defaults to these too.

    A convolution whose batch is known only at run time takes the transform of one
    image (a transform of the weights does not depend on the batch, and its kernel is
    scheduled per image, schedules/cpu_dynamic.py); one with a run-time image size or
    channels takes none. Other sizes known only at run time in the group (its other
    inputs) take none either: the group's kernel is then not scheduled per image."""
    if family != "cpu" or not _static_images(group):
        return {}
    from .schedules.cpu_algorithms import default_conv_transform

    out: dict[int, str] = {}
    for node, i in constant_conv_weights(group, constant_inputs):
        x, w = node.inputs
        transform = default_conv_transform(node.attrs, _one_image(x.shape), w.shape,
                                           _one_image(node.outputs[0].shape), x.dtype)
        if transform is not None:
            out[i] = transform
    return out


def _static_images(group: FusedGroup) -> bool:
    """Whether every value the group reads or computes is static past its first axis
    (the batch, which may be symbolic): each image is then of a fixed size."""
    values = [*group.inputs, *(v for n in group.nodes for v in n.outputs)]
    return all(is_static(v.shape[1:]) for v in values)


def _one_image(shape: Sequence[Dim]) -> tuple[int, ...]:
    """``shape`` (static past its first axis, :func:`_static_images`) with a batch known
    only at run time at 1."""
    first, *rest = shape
    return (first if isinstance(first, int) else 1, *(int(d) for d in rest))


def constant_conv_weights(group: FusedGroup, constant_inputs: Collection[int]
                          ) -> Iterator[tuple[Node, int]]:
    """The group's convolutions whose weight is one of ``constant_inputs`` (the ones a
    fast algorithm may store transformed), each with that input's index."""
    index = {v.uid: i for i, v in enumerate(group.inputs)}
    for node in group.nodes:
        if node.op == "conv2d" and len(node.inputs) == 2:
            i = index.get(node.inputs[1].uid)
            if i is not None and i in constant_inputs:
                yield node, i


def transformed_start(inputs: list[Tensor], outputs: list[Tensor],
                      transforms: Mapping[int, str]) -> te.Schedule:
    """A schedule of ``outputs`` whose first steps store the ``transforms``' weights
    transformed (a ``layout`` step each, taken by the stage that reads the weight)."""
    s = te.Schedule(outputs)
    for index, transform in transforms.items():
        name = f"in{index}"
        reader = next(st for st in s.stages
                      if any(t.name == name for t in input_tensors(st.tensor)))
        s.layout(reader.name, name, tuple(range(inputs[index].ndim)), None, transform)
    return s


def lower_group(group: FusedGroup, name: str, schedule: ScheduleFn,
                steps: list[te.Step] | None = None,
                constant_inputs: Sequence[int] | None = None,
                transforms: Mapping[int, str] | None = None, family: str = "cpu") -> PrimFunc:
    """Lower a group with the default ``schedule``, or replay tuned ``steps``; a group
    whose kernel is written directly as tensor IR (direct.py) takes neither, only the
    target ``family`` ("cpu" or "gpu") it is written for.

    ``constant_inputs`` are the indices of the inputs that are weights (default: those
    whose value is constant in the graph); the schedule may store those transposed.
    ``transforms`` are the default's weight transforms (``default_transforms``); tuned
    steps name their own."""
    if is_direct(group):
        return _with_attrs(lower_direct(group, name, family), group, [])
    inputs, outputs = group_compute(
        group, weight_transforms(steps) if steps is not None else transforms)
    if steps is not None:
        sched = te.replay(outputs, steps)
    else:
        if constant_inputs is None:
            constant_inputs = [i for i, v in enumerate(group.inputs) if v.is_constant]
        sched = schedule(outputs, constants=frozenset(inputs[i].name for i in constant_inputs),
                         start=transformed_start(inputs, outputs, transforms or {}))
    return _with_attrs(te.lower(sched, inputs, outputs, name), group, sched.steps)


def _with_attrs(func: PrimFunc, group: FusedGroup, steps: Sequence[te.Step]) -> PrimFunc:
    """``func`` with what every kernel records: its workload key (the tuning records'
    key), the schedule steps it was lowered with, its ops and nodes."""
    func.attrs["workload"] = workload_key(group)
    func.attrs["steps"] = [s.to_json() for s in steps]
    func.attrs["ops"] = [n.op for n in group.nodes]
    func.attrs["nodes"] = [n.name for n in group.nodes]
    return func


def value_key(v: Value) -> int:
    return v.uid
