"""Graph -> tensor IR: each fused group becomes one scheduled, lowered kernel."""

from __future__ import annotations

from collections.abc import Callable

from . import te
from .errors import ModelError
from .graph import Value
from .op_registry import TensorType, get_op
from .passes.fuse import FusedGroup
from .te.stmt import PrimFunc
from .te.tensor import Tensor

ScheduleFn = Callable[[list[Tensor]], te.Schedule]


def group_compute(group: FusedGroup) -> tuple[list[Tensor], list[Tensor]]:
    """Tensor expressions of a group: placeholders for its inputs, tensors for its outputs."""
    env: dict[int, Tensor] = {}
    inputs = []
    for i, v in enumerate(group.inputs):
        t = te.placeholder(v.shape, v.dtype, f"in{i}")
        env[v.uid] = t
        inputs.append(t)
    for j, node in enumerate(group.nodes):
        opdef = get_op(node.op)
        if opdef.compute is None:
            raise ModelError(f"node '{node.name}' ({node.op}) has no compute definition")
        outs = opdef.compute([env[v.uid] for v in node.inputs], node.attrs,
                             [TensorType(v.shape, v.dtype) for v in node.outputs],
                             f"t{j}_{node.op}")
        for v, t in zip(node.outputs, outs):
            env[v.uid] = t
    outputs = []
    for k, v in enumerate(group.outputs):
        t = env[v.uid]
        if t.op is None or any(t is o for o in outputs):
            src = t
            t = te.compute(v.shape, lambda *i, src=src: src[i], name=f"out{k}_copy")
        outputs.append(t)
    return inputs, outputs


def lower_group(group: FusedGroup, name: str, schedule: ScheduleFn) -> PrimFunc:
    inputs, outputs = group_compute(group)
    func = te.lower(schedule(outputs), inputs, outputs, name)
    func.attrs["ops"] = [n.op for n in group.nodes]
    func.attrs["nodes"] = [n.name for n in group.nodes]
    return func


def value_key(v: Value) -> int:
    return v.uid
