"""Who reads a stage, and which elementwise output a tiled stage can write directly.

Shared by the CPU and GPU default schedules, so both agree on when bias, activation or
residual add ride along a tile's write-back.
"""

from __future__ import annotations

from ..te.schedule import Schedule, Stage, input_tensors


def stage_readers(s: Schedule) -> dict[int, list[Stage]]:
    """Stages reading each tensor (by tensor uid), including stages that will be inlined."""
    out: dict[int, list[Stage]] = {}
    for st in s.stages:
        for t in input_tensors(st.tensor):
            out.setdefault(t.uid, []).append(st)
    return out


def epilogue_consumer(stage: Stage, outputs: set[int],
                      readers: dict[int, list[Stage]]) -> str | None:
    """The one output stage that every same-shape elementwise path from ``stage`` ends
    in: a chain (bias, activation) or a diamond that closes again (``x * sigmoid(x)``).
    ``None`` when ``stage`` is itself an output, or its paths end in more than one
    output or pass a reduction or another shape."""
    if stage.tensor.uid in outputs:
        return None
    found: set[str] = set()
    seen: set[int] = set()
    todo = [stage]
    while todo:
        users = readers.get(todo.pop().tensor.uid, [])
        if not users:
            return None
        for user in users:
            op = user.tensor.op
            if op is None or op.reduce_axes or user.tensor.shape != stage.tensor.shape:
                return None
            if user.tensor.uid in outputs:
                if readers.get(user.tensor.uid):
                    return None
                found.add(user.name)
            elif user.tensor.uid not in seen:
                seen.add(user.tensor.uid)
                todo.append(user)
    return found.pop() if len(found) == 1 else None


def fuse_epilogue_chain(s: Schedule, stage: Stage, outputs: set[int],
                        readers: dict[int, list[Stage]]) -> None:
    """Apply that output at ``stage``'s write-back when the schedule allows it."""
    consumer = epilogue_consumer(stage, outputs, readers)
    if consumer is None:
        return
    try:
        s.fuse_epilogue(stage.name, consumer)
    except ValueError:  # the consumer reads the stage at other indices: keep it separate
        s.steps.pop()
