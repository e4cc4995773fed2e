"""Control flow the static graph can take: an If whose condition is known at import, a
Scan over a sequence length known at import, and a Loop whose trip count and conditions
are known at import, unrolled.

The graph IR has no control flow; an If on a constant condition (a flag folded from
attributes, as in function bodies, or a frozen input) is its chosen branch, converted in
place. A condition only known at run time is an error that says so. A Scan is its body
converted once per step, each step reading the states the previous one returned; a
sequence length known only at run time, or one over :data:`MAX_SCAN_STEPS`, is refused.
A Loop is its body converted once per iteration while its condition holds: the trip count
and the initial condition must be constants, and so must the condition each iteration
computes (folded from the iteration number, say); one known only at run time is refused.
"""

from __future__ import annotations

import numpy as np
import onnx

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..registry import converter
from .common import normalize_axis, reshape, slice_axis


@converter("If", since=1)
def convert_if(ctx: NodeContext) -> list[Value]:
    cond = np.asarray(ctx.constant(0, "cond"))
    if cond.size != 1:
        raise ctx.error(f"the condition must have one element, has {cond.size}")
    branch = ctx.required_attr("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    assert ctx.state.inline is not None
    outputs = ctx.state.inline(branch, ctx.where)
    if len(outputs) != ctx.num_outputs:
        raise ctx.error(f"the branch has {len(outputs)} outputs, the node {ctx.num_outputs}")
    return outputs


MAX_SCAN_STEPS = 4096
"""The longest Scan the importer unrolls: every step is a copy of the body in the graph."""


@converter("Scan", since=9)
def convert_scan(ctx: NodeContext) -> list[Value]:
    """Scan, unrolled: the body once per step of a sequence length known at import."""
    body = ctx.required_attr("body")
    num_scan = int(ctx.required_attr("num_scan_inputs"))
    num_state = len(ctx.node.input) - num_scan
    if num_scan < 1 or num_state < 0:
        raise ctx.error(f"num_scan_inputs is {num_scan}, but the node has "
                        f"{len(ctx.node.input)} inputs")
    states = [ctx.input(i) for i in range(num_state)]
    scans = [ctx.input(num_state + i) for i in range(num_scan)]
    num_out = len(body.output) - num_state
    return _scan(ctx, body, states, scans,
                 _ints_attr(ctx, "scan_input_axes", num_scan, 0),
                 _ints_attr(ctx, "scan_input_directions", num_scan, 0),
                 _ints_attr(ctx, "scan_output_axes", num_out, 0),
                 _ints_attr(ctx, "scan_output_directions", num_out, 0))


@converter("Scan", since=8)
def convert_scan_v8(ctx: NodeContext) -> list[Value]:
    """Opset 8's Scan has a batch axis 0 on every input and output, and an optional
    sequence_lens: unrolled per batch entry, where every sequence has the full length."""
    body = ctx.required_attr("body")
    num_scan = int(ctx.required_attr("num_scan_inputs"))
    num_state = len(ctx.node.input) - 1 - num_scan
    if num_scan < 1 or num_state < 0:
        raise ctx.error(f"num_scan_inputs is {num_scan}, but the node has "
                        f"{len(ctx.node.input)} inputs")
    states = [ctx.input(1 + i) for i in range(num_state)]
    scans = [ctx.input(1 + num_state + i) for i in range(num_scan)]
    batch = scans[0].shape[0]
    if not isinstance(batch, int):
        raise ctx.error(f"the batch size is {batch}, known only at run time; Scan is "
                        "unrolled at import, so it must be fixed (--input-shape or --dim)")
    length = scans[0].shape[1] if len(scans[0].shape) > 1 else None
    if ctx.optional_input(0) is not None:
        lens = np.asarray(ctx.constant(0, "sequence_lens")).reshape(-1)
        if not all(int(n) == length for n in lens):
            raise ctx.error(f"sequence_lens {lens.tolist()} differ from the sequence length "
                            f"{length}; only sequences of the full length are supported")
    num_out = len(body.output) - num_state
    directions = _ints_attr(ctx, "directions", num_scan, 0)
    per_batch: list[list[Value]] = []
    for b in range(batch):
        per_batch.append(_scan(
            ctx, body, [_squeezed(ctx, _step(ctx, s, 0, b), 0) for s in states],
            [_squeezed(ctx, _step(ctx, x, 0, b), 0) for x in scans],
            [0] * num_scan, directions, [0] * num_out, [0] * num_out))
    return [ctx.add("concat", [_unsqueezed(ctx, outs[i], 0) for outs in per_batch],
                    {"axis": 0}) for i in range(len(body.output))]


def _ints_attr(ctx: NodeContext, name: str, count: int, default: int) -> list[int]:
    values = ctx.attr(name)
    if values is None:
        return [default] * count
    values = [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"{name} has {len(values)} entries, expected {count}")
    return values


def _step(ctx: NodeContext, x: Value, axis: int, t: int) -> Value:
    return slice_axis(ctx, x, axis, t, t + 1)


def _squeezed(ctx: NodeContext, x: Value, axis: int) -> Value:
    return reshape(ctx, x, [d for i, d in enumerate(x.shape) if i != axis])


def _unsqueezed(ctx: NodeContext, x: Value, axis: int) -> Value:
    shape = list(x.shape)
    return reshape(ctx, x, [*shape[:axis], 1, *shape[axis:]])


def _scan(ctx: NodeContext, body: onnx.GraphProto, states: list[Value], scans: list[Value],
          in_axes: list[int], in_dirs: list[int], out_axes: list[int], out_dirs: list[int]
          ) -> list[Value]:
    """The body run over the scan inputs' steps: the final states, then the scan outputs
    stacked along their axes."""
    num_state = len(states)
    if len(body.input) != num_state + len(scans):
        raise ctx.error(f"the body has {len(body.input)} inputs, expected {num_state} states "
                        f"and {len(scans)} scan inputs")
    if len(body.output) < num_state:
        raise ctx.error(f"the body has {len(body.output)} outputs, fewer than its "
                        f"{num_state} states")
    axes = [normalize_axis(ctx, a, len(x.shape), "scan_input_axes entry")
            for a, x in zip(in_axes, scans)]
    lengths = [x.shape[a] for a, x in zip(axes, scans)]
    for name, n in zip(ctx.node.input[-len(scans):], lengths):
        if not isinstance(n, int):
            raise ctx.error(f"the sequence length of scan input '{name}' is {n}, known only "
                            "at run time; Scan is unrolled at import, so its length must be "
                            "fixed (--input-shape or --dim)")
    if len(set(lengths)) != 1:
        raise ctx.error(f"the scan inputs have different sequence lengths {lengths}")
    length = int(lengths[0])
    if length == 0:
        raise ctx.error("the sequence is empty; a Scan of no steps is not supported")
    if length > MAX_SCAN_STEPS:
        raise ctx.error(f"the sequence has {length} steps; Scan is unrolled at import, "
                        f"which is refused beyond {MAX_SCAN_STEPS} steps")
    names = [vi.name for vi in body.input]
    assert ctx.state.inline is not None
    steps: list[list[Value]] = []
    for t in range(length):
        xs = [_squeezed(ctx, _step(ctx, x, a, length - 1 - t if d else t), a)
              for x, a, d in zip(scans, axes, in_dirs)]
        outs = ctx.state.inline(body, f"{ctx.where}, step {t}",
                                dict(zip(names, [*states, *xs])))
        states = outs[:num_state]
        steps.append(outs[num_state:])
    results = list(states)
    for k, (axis, direction) in enumerate(zip(out_axes, out_dirs)):
        ys = [step[k] for step in steps]
        axis = normalize_axis(ctx, axis, len(ys[0].shape) + 1, "scan_output_axes entry")
        parts = [_unsqueezed(ctx, y, axis) for y in (reversed(ys) if direction else ys)]
        results.append(parts[0] if len(parts) == 1 else
                       ctx.add("concat", parts, {"axis": axis}))
    return results


@converter("Loop", since=1)
def convert_loop(ctx: NodeContext) -> list[Value]:
    """Loop, unrolled: the body once per iteration, for a trip count and conditions known
    at import. Its outputs are the final loop-carried values, then the scan outputs
    stacked along a new axis 0 over the iterations run."""
    body = ctx.required_attr("body")
    num_carried = len(ctx.node.input) - 2
    if num_carried < 0:
        raise ctx.error(f"Loop needs the inputs M and cond (either may be ''), has "
                        f"{len(ctx.node.input)}")
    if len(body.input) != 2 + num_carried:
        raise ctx.error(f"the body has {len(body.input)} inputs, expected 2 (iteration "
                        f"number, condition) and {num_carried} loop-carried values")
    num_scan = len(body.output) - 1 - num_carried
    if num_scan < 0:
        raise ctx.error(f"the body has {len(body.output)} outputs, expected the condition "
                        f"and {num_carried} loop-carried values at least")
    trip_count = None
    if ctx.optional_input(0) is not None:
        m = np.asarray(ctx.constant(0, "the trip count M"))
        if m.size != 1:
            raise ctx.error(f"the trip count M must have one element, has {m.size}")
        trip_count = max(int(m.reshape(-1)[0]), 0)
    # onnxruntime and ONNX's reference stop on the body's condition even without a cond
    # input (the spec calls it ignored then), and run on it alone without an M
    cond = True
    if ctx.optional_input(1) is not None:
        cond = _flag(ctx, np.asarray(ctx.constant(1, "the condition cond")), "cond")
    carried = [ctx.input(2 + i) for i in range(num_carried)]
    names = [vi.name for vi in body.input]
    assert ctx.state.inline is not None
    steps: list[list[Value]] = []
    i = 0
    while cond and (trip_count is None or i < trip_count):
        if i == MAX_SCAN_STEPS:
            raise ctx.error(f"the loop runs more than {MAX_SCAN_STEPS} iterations; Loop is "
                            f"unrolled at import, which is refused beyond {MAX_SCAN_STEPS} "
                            "iterations")
        bound = [ctx.const(np.int64(i), "int64", hint="iter"),
                 ctx.const(np.bool_(cond), "bool", hint="cond"), *carried]
        outs = ctx.state.inline(body, f"{ctx.where}, iteration {i}", dict(zip(names, bound)))
        if outs[0].data is None:
            raise ctx.error(
                f"the loop's condition (body output '{body.output[0].name}') is known only "
                f"at run time after iteration {i}; Loop is unrolled at import, so its "
                "condition must be computable at import (from the iteration number or "
                "constants)")
        cond = _flag(ctx, np.asarray(outs[0].data), "the body's condition")
        carried = outs[1:1 + num_carried]
        steps.append(outs[1 + num_carried:])
        i += 1
    if not steps and num_scan:
        raise ctx.error(f"the loop runs no iterations, so its {num_scan} scan outputs are "
                        "empty with a shape the body never gives; not supported")
    results = list(carried)
    for k in range(num_scan):
        parts = [_unsqueezed(ctx, step[k], 0) for step in steps]
        results.append(parts[0] if len(parts) == 1 else ctx.add("concat", parts, {"axis": 0}))
    return results


def _flag(ctx: NodeContext, value: np.ndarray, what: str) -> bool:
    if value.size != 1:
        raise ctx.error(f"{what} must have one element, has {value.size}")
    return bool(value.reshape(-1)[0])
