"""Who reads a stage, and which elementwise output a tiled stage can write directly.

Shared by the CPU and GPU default schedules and by the auto-tuner's sketches, so the
three agree on when bias, activation or residual add ride along a tile's write-back.
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
    """The output stage that ends the same-shape elementwise stages reading ``stage``:
    a chain (bias, activation, residual add) or a diamond of them (x * sigmoid(x)), with
    one output, which the others all lead to (``None`` when ``stage`` is itself an
    output, or the stages after it reduce, change shape or end in several outputs)."""
    if stage.tensor.uid in outputs:
        return None
    found: Stage | None = None
    seen = {stage.tensor.uid}
    frontier = [stage]
    while frontier:
        for user in readers.get(frontier.pop().tensor.uid, []):
            if user.tensor.uid in seen:
                continue
            seen.add(user.tensor.uid)
            op = user.tensor.op
            if op is None or op.reduce_axes or user.tensor.shape != stage.tensor.shape:
                return None
            if user.tensor.uid in outputs:
                if found is not None or readers.get(user.tensor.uid):
                    return None
                found = user
            else:
                frontier.append(user)
    return found.name if found is not None else None


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
