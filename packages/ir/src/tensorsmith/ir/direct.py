"""Kernels written directly as tensor IR: the one home of the decision and its lowering.

Most ops give tensor expressions (``compute``) that a schedule turns into loop nests. A
few have loop-carried, data-dependent control flow no tensor expression states (greedy
non-maximum suppression, the compaction of NonZero); such an op registers a ``kernel``
instead (op_registry.KernelFn), which writes the statements itself over the flat
buffers of its inputs and outputs, for the target family. Its group holds that node
alone (passes/fuse.py keeps it so), takes no schedule, and is no tuning task.
"""

from __future__ import annotations

from .graph import Node
from .op_registry import OpDef, get_op
from .passes.fuse import FusedGroup
from .te.stmt import Buffer, PrimFunc
from .te.symbols import kernel_symbols


def direct_op(node: Node) -> OpDef | None:
    """The op of ``node`` if its kernel is written directly as tensor IR, else None."""
    op = get_op(node.op)
    return op if op.kernel is not None else None


def is_direct(group: FusedGroup) -> bool:
    """Whether ``group`` is a kernel written directly (then its only node's)."""
    return any(direct_op(n) is not None for n in group.nodes)


def lower_direct(group: FusedGroup, name: str, family: str) -> PrimFunc:
    """The kernel of a group holding one directly written op, for target ``family``
    ("cpu" or "gpu"): its inputs, outputs, then its scratch as parameters, and the
    run-time sizes it reads (``attrs["symbols"]``, as te/lower.py records them);
    ``lower_group`` adds what every kernel records."""
    if len(group.nodes) != 1:
        raise ValueError(f"a directly written kernel ({group.name}) must be alone in its "
                         "group")
    (node,) = group.nodes
    op = direct_op(node)
    assert op is not None and op.kernel is not None
    # a value read twice is one parameter; an output nothing reads is scratch
    inputs = [Buffer(f"in{i}", v.shape, v.dtype) for i, v in enumerate(group.inputs)]
    read = {v.uid: b for v, b in zip(group.inputs, inputs)}
    outputs = [Buffer(f"out{i}", v.shape, v.dtype) for i, v in enumerate(group.outputs)]
    written = {v.uid: b for v, b in zip(group.outputs, outputs)}
    unread = [Buffer(f"{node.name}.{v.name}", v.shape, v.dtype) for v in node.outputs
              if v.uid not in written]
    spare = iter(unread)
    body, scratch = op.kernel([read[v.uid] for v in node.inputs],
                              [written[v.uid] if v.uid in written else next(spare)
                               for v in node.outputs], node.attrs, family)
    scratch = [*unread, *scratch]
    params = [*inputs, *outputs, *scratch]
    func = PrimFunc(name, params, body, len(inputs), len(outputs))
    symbols = kernel_symbols(body, [b.shape for b in params])
    if symbols:
        func.attrs["symbols"] = symbols
    return func


__all__ = ["direct_op", "is_direct", "lower_direct"]
