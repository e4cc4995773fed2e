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
    """The output stage at the end of a single-reader, same-shape elementwise chain after
    ``stage`` (``None`` when ``stage`` is itself an output or the chain branches)."""
    if stage.tensor.uid in outputs:
        return None
    chain = stage
    while True:
        users = readers.get(chain.tensor.uid, [])
        if len(users) != 1:
            return None
        user = users[0]
        op = user.tensor.op
        if op is None or op.reduce_axes or user.tensor.shape != stage.tensor.shape:
            return None
        if user.tensor.uid in outputs:
            return user.name
        chain = user


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
