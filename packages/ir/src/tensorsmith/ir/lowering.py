"""Graph -> tensor IR: each fused group becomes one scheduled, lowered kernel."""

from __future__ import annotations

import hashlib
import json
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
    outputs: list[Tensor] = []
    for k, v in enumerate(group.outputs):
        t = env[v.uid]
        if t.op is None or any(t is o for o in outputs):
            src = t
            t = te.compute(v.shape, lambda *i, src=src: src[i], name=f"out{k}_copy")
        outputs.append(t)
    return inputs, outputs


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


def lower_group(group: FusedGroup, name: str, schedule: ScheduleFn,
                steps: list[te.Step] | None = None) -> PrimFunc:
    """Lower a group with the default ``schedule``, or replay tuned ``steps``."""
    inputs, outputs = group_compute(group)
    sched = te.replay(outputs, steps) if steps is not None else schedule(outputs)
    func = te.lower(sched, inputs, outputs, name)
    func.attrs["workload"] = workload_key(group)
    func.attrs["steps"] = [s.to_json() for s in sched.steps]
    func.attrs["ops"] = [n.op for n in group.nodes]
    func.attrs["nodes"] = [n.name for n in group.nodes]
    return func


def value_key(v: Value) -> int:
    return v.uid
