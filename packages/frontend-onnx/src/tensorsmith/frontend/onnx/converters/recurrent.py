"""LSTM, GRU and RNN, unrolled over the (static) sequence into canonical ops.

The input projection of every time step is one matmul over the whole sequence; each
step then adds its recurrent matmul, splits the gates, and applies the cell equations
of the ONNX operator definitions (gate orders: LSTM i,o,f,c; GRU z,r,h). Weights are
sliced, reshaped and transposed by graph ops, which the folding pass turns into
constants after ``build`` binds params. Unrolling keeps the graph IR free of loops;
sequences in inference models are short enough for it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text, static_dim

from ..context import NodeContext
from ..registry import converter
from .common import filled, reshape, slice_axis, transpose

Activation = Callable[[NodeContext, Value], Value]

_ACTIVATIONS: dict[str, Activation] = {
    "sigmoid": lambda ctx, v: ctx.add("sigmoid", [v]),
    "tanh": lambda ctx, v: ctx.add("tanh", [v]),
    "relu": lambda ctx, v: ctx.add("relu", [v]),
}


class _Cell:
    """What every recurrent op shares: shapes, directions, weights of one direction."""

    def __init__(self, ctx: NodeContext, gates: int, default_acts: list[str]) -> None:
        self.ctx = ctx
        x = ctx.input(0)
        self.layout = int(ctx.attr("layout", 0)) if ctx.opset >= 14 else 0
        if len(x.shape) != 3:
            raise ctx.error(f"X must be 3-D, got {shape_text(x.shape)}")
        if self.layout:  # [batch, seq, input] -> [seq, batch, input]
            x = transpose(ctx, x, (1, 0, 2))
        self.x = x
        seq, self.batch, self.input_size = x.shape
        self.seq = static_dim(seq, "the sequence length (the steps are unrolled)")
        self.hidden = int(ctx.required_attr("hidden_size"))
        self.gates = gates
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction={direction!r} is not forward, reverse or bidirectional")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        names = [a.lower() for a in (ctx.attr("activations") or
                                     default_acts * len(self.directions))]
        unknown = sorted({n for n in names if n not in _ACTIVATIONS})
        if unknown or len(names) != len(default_acts) * len(self.directions):
            raise ctx.error(f"activations {ctx.attr('activations')} are not supported (only "
                            f"{', '.join(_ACTIVATIONS)}, {len(default_acts)} per direction)")
        if ctx.attr("activation_alpha") or ctx.attr("activation_beta"):
            raise ctx.error("activation_alpha/activation_beta are not supported")
        self.acts = [[_ACTIVATIONS[n] for n in names[i:i + len(default_acts)]]
                     for i in range(0, len(names), len(default_acts))]
        clip = ctx.attr("clip")
        self.clip = None if clip is None else float(clip)
        lens = ctx.optional_input(4)
        if lens is not None:
            values = ctx.constant(4, "sequence_lens")
            if not np.all(values == self.seq):
                raise ctx.error(f"sequence_lens {values.tolist()} differ from the sequence "
                                f"length {self.seq}; variable lengths are not supported")

    def weights(self, d: int) -> tuple[Value, Value, Value | None]:
        """W^T [input, G*H], R^T [H, G*H] and the W bias + R bias [G*H] of direction d."""
        ctx, gh = self.ctx, self.gates * self.hidden
        w = reshape(ctx, slice_axis(ctx, ctx.input(1), 0, d, d + 1), (gh, self.input_size))
        r = reshape(ctx, slice_axis(ctx, ctx.input(2), 0, d, d + 1), (gh, self.hidden))
        b = ctx.optional_input(3)
        bias = None
        if b is not None:
            bd = reshape(ctx, slice_axis(ctx, b, 0, d, d + 1), (2 * gh,))
            bias = ctx.add("add", [slice_axis(ctx, bd, 0, 0, gh),
                                   slice_axis(ctx, bd, 0, gh, 2 * gh)])
        return transpose(ctx, w, (1, 0)), transpose(ctx, r, (1, 0)), bias

    def initial(self, index: int, d: int) -> Value:
        """initial_h / initial_c of direction d as [batch, H], zeros when absent."""
        v = self.ctx.optional_input(index)
        if v is None:
            return filled(self.ctx, (self.batch, self.hidden), 0, self.x.dtype, hint="zeros")
        if self.layout:  # [batch, dirs, H]
            v = transpose(self.ctx, v, (1, 0, 2))
        return reshape(self.ctx, slice_axis(self.ctx, v, 0, d, d + 1),
                       (self.batch, self.hidden))

    def projected(self, w_t: Value, bias: Value | None) -> Value:
        """X W^T (+ biases) for all steps at once: [seq, batch, G*H]."""
        ctx = self.ctx
        flat = reshape(ctx, self.x, (self.seq * self.batch, self.input_size))
        xw = ctx.add("matmul", [flat, w_t])
        if bias is not None:
            xw = ctx.add("add", [xw, bias])
        return reshape(ctx, xw, (self.seq, self.batch, self.gates * self.hidden))

    def step_input(self, xw: Value, t: int) -> Value:
        return reshape(self.ctx, slice_axis(self.ctx, xw, 0, t, t + 1),
                       (self.batch, self.gates * self.hidden))

    def gate(self, gates: Value, k: int) -> Value:
        g = slice_axis(self.ctx, gates, 1, k * self.hidden, (k + 1) * self.hidden)
        if self.clip is not None:
            g = self.ctx.add("clip", [g], {"min": -self.clip, "max": self.clip})
        return g

    def steps(self, d: int) -> list[int]:
        return list(range(self.seq))[::-1] if self.directions[d] == "reverse" else \
            list(range(self.seq))

    def outputs(self, per_dir_h: list[dict[int, Value]], finals: list[list[Value]]
                ) -> list[Value | None]:
        """Y [seq, dirs, batch, H] (or [batch, seq, dirs, H]) and the final states."""
        ctx = self.ctx
        y = None
        if ctx.output_wanted(0):
            steps = []
            for t in range(self.seq):
                per_dir = [reshape(ctx, hs[t], (1, 1, self.batch, self.hidden))
                           for hs in per_dir_h]
                steps.append(per_dir[0] if len(per_dir) == 1 else
                             ctx.add("concat", per_dir, {"axis": 1}))
            y = steps[0] if len(steps) == 1 else ctx.add("concat", steps, {"axis": 0})
            if self.layout:
                y = transpose(ctx, y, (2, 0, 1, 3))
        result: list[Value | None] = [y]
        for k in range(len(finals[0])):
            states = [reshape(ctx, f[k], (1, self.batch, self.hidden)) for f in finals]
            s = states[0] if len(states) == 1 else ctx.add("concat", states, {"axis": 0})
            if self.layout:
                s = transpose(ctx, s, (1, 0, 2))
            result.append(s if ctx.output_wanted(1 + k) else None)
        return result


def _mul(ctx: NodeContext, a: Value, b: Value) -> Value:
    return ctx.add("mul", [a, b])


@converter("LSTM", since=7)
def convert_lstm(ctx: NodeContext) -> list[Value | None]:
    cell = _Cell(ctx, 4, ["Sigmoid", "Tanh", "Tanh"])
    coupled = bool(int(ctx.attr("input_forget", 0)))
    peep = ctx.optional_input(7)
    hs, finals = [], []
    for d in range(len(cell.directions)):
        f, g, h_act = cell.acts[d]
        w_t, r_t, bias = cell.weights(d)
        xw = cell.projected(w_t, bias)
        p = None if peep is None else reshape(ctx, slice_axis(ctx, peep, 0, d, d + 1),
                                              (3 * cell.hidden,))
        p_i, p_o, p_f = ((None, None, None) if p is None else
                         (slice_axis(ctx, p, 0, k * cell.hidden, (k + 1) * cell.hidden)
                          for k in range(3)))
        h, c = cell.initial(5, d), cell.initial(6, d)
        per_t: dict[int, Value] = {}
        for t in cell.steps(d):
            gates = ctx.add("add", [cell.step_input(xw, t), ctx.add("matmul", [h, r_t])])
            i_pre, o_pre, f_pre, c_pre = (cell.gate(gates, k) for k in range(4))
            if p_i is not None:
                i_pre = ctx.add("add", [i_pre, _mul(ctx, p_i, c)])
            i = f(ctx, i_pre)
            if coupled:
                forget = ctx.add("sub", [ctx.scalar(1.0, i), i])
            else:
                if p_f is not None:
                    f_pre = ctx.add("add", [f_pre, _mul(ctx, p_f, c)])
                forget = f(ctx, f_pre)
            c = ctx.add("add", [_mul(ctx, forget, c), _mul(ctx, i, g(ctx, c_pre))])
            if p_o is not None:
                o_pre = ctx.add("add", [o_pre, _mul(ctx, p_o, c)])
            h = _mul(ctx, f(ctx, o_pre), h_act(ctx, c))
            per_t[t] = h
        hs.append(per_t)
        finals.append([h, c])
    return cell.outputs(hs, finals)


@converter("GRU", since=7)
def convert_gru(ctx: NodeContext) -> list[Value | None]:
    cell = _Cell(ctx, 3, ["Sigmoid", "Tanh"])
    before_reset = bool(int(ctx.attr("linear_before_reset", 0)))
    hs, finals = [], []
    hidden = cell.hidden
    for d in range(len(cell.directions)):
        f, g = cell.acts[d]
        w_t, r_t, _ = cell.weights(d)
        b = ctx.optional_input(3)
        wb = rb = None
        if b is not None:  # the h gate's recurrent bias sits inside the reset product
            bd = reshape(ctx, slice_axis(ctx, b, 0, d, d + 1), (6 * hidden,))
            wb, rb = slice_axis(ctx, bd, 0, 0, 3 * hidden), slice_axis(ctx, bd, 0, 3 * hidden,
                                                                      6 * hidden)
        xw = cell.projected(w_t, wb)
        r_zr = slice_axis(ctx, r_t, 1, 0, 2 * hidden)
        r_h = slice_axis(ctx, r_t, 1, 2 * hidden, 3 * hidden)
        rb_zr = None if rb is None else slice_axis(ctx, rb, 0, 0, 2 * hidden)
        rb_h = None if rb is None else slice_axis(ctx, rb, 0, 2 * hidden, 3 * hidden)
        h = cell.initial(5, d)
        per_t: dict[int, Value] = {}
        for t in cell.steps(d):
            x_t = cell.step_input(xw, t)
            hr = ctx.add("matmul", [h, r_zr])
            if rb_zr is not None:
                hr = ctx.add("add", [hr, rb_zr])
            zr = ctx.add("add", [slice_axis(ctx, x_t, 1, 0, 2 * hidden), hr])
            z, r = f(ctx, cell.gate(zr, 0)), f(ctx, cell.gate(zr, 1))
            if before_reset:
                rec = ctx.add("matmul", [h, r_h])
                if rb_h is not None:
                    rec = ctx.add("add", [rec, rb_h])
                rec = _mul(ctx, r, rec)
            else:
                rec = ctx.add("matmul", [_mul(ctx, r, h), r_h])
                if rb_h is not None:
                    rec = ctx.add("add", [rec, rb_h])
            h_pre = ctx.add("add", [slice_axis(ctx, x_t, 1, 2 * hidden, 3 * hidden), rec])
            if cell.clip is not None:
                h_pre = ctx.add("clip", [h_pre], {"min": -cell.clip, "max": cell.clip})
            candidate = g(ctx, h_pre)
            keep = ctx.add("sub", [ctx.scalar(1.0, z), z])
            h = ctx.add("add", [_mul(ctx, keep, candidate), _mul(ctx, z, h)])
            per_t[t] = h
        hs.append(per_t)
        finals.append([h])
    return cell.outputs(hs, finals)


@converter("RNN", since=7)
def convert_rnn(ctx: NodeContext) -> list[Value | None]:
    cell = _Cell(ctx, 1, ["Tanh"])
    hs, finals = [], []
    for d in range(len(cell.directions)):
        (f,) = cell.acts[d]
        w_t, r_t, bias = cell.weights(d)
        xw = cell.projected(w_t, bias)
        h = cell.initial(5, d)
        per_t: dict[int, Value] = {}
        for t in cell.steps(d):
            pre = ctx.add("add", [cell.step_input(xw, t), ctx.add("matmul", [h, r_t])])
            h = f(ctx, cell.gate(pre, 0))
            per_t[t] = h
        hs.append(per_t)
        finals.append([h])
    return cell.outputs(hs, finals)
