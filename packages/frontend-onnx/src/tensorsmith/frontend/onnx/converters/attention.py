"""Attention (opset 23+): scaled dot-product attention as matmuls, a softmax and an
additive bias, following ONNX's reference implementation step by step.

Everything that depends only on static shapes and attributes (the causal and
sliding-window masks, the scale) is a constant; what depends on run-time inputs
(``attn_mask``, ``nonpad_kv_seqlen``) or on symbolic sequence lengths is computed in the
graph. The order of operations is the
reference's (Q and K each scaled by sqrt(scale), softcap before the bias, a fully masked
row decided on the bias and zeroed after the softmax), because the node tests' expected
values are that order's float rounding.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import Dim, is_static, shape_text, static_dim

from ..context import NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import filled, positions, reshape, slice_axis, transpose


def _heads(ctx: NodeContext, x: Value, heads: int) -> Value:
    """[B, S, H * D] -> [B, H, S, D]."""
    b, s, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise ctx.error(f"cannot split a hidden size of {hidden} into {heads} heads")
    return transpose(ctx, reshape(ctx, x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _repeat_heads(ctx: NodeContext, x: Value, times: int) -> Value:
    """Interleave-repeat each head ``times`` times: [h0, h0, h1, h1, ...] (GQA)."""
    b, h, s, d = x.shape
    view = reshape(ctx, x, (b, h, 1, s, d))
    return reshape(ctx, ctx.add("expand", [view], {"shape": [b, h, times, s, d]}),
                   (b, h * times, s, d))


def _select(ctx: NodeContext, allowed: Value, dtype: str) -> Value:
    """0 where ``allowed``, -inf elsewhere (select, never multiply: 0 * -inf is NaN)."""
    zero = ctx.const(np.zeros((), dtype), hint="zero")
    ninf = ctx.const(np.full((), -np.inf, dtype), hint="neg_inf")
    return ctx.add("where", [allowed, zero, ninf])


def _pad_keys(ctx: NodeContext, mask: Value, kv: Dim) -> Value:
    """A mask shorter than the keys is padded with masked positions (False or -inf)."""
    width = kv - mask.shape[-1]
    if width <= 0:
        return mask
    rank = len(mask.shape)
    value = False if mask.dtype == "bool" else -np.inf
    return ctx.add("pad", [mask], {"before": [0] * rank, "after": [0] * (rank - 1) + [width],
                                   "mode": "constant", "value": value})


def _add(ctx: NodeContext, a: Value | None, b: Value) -> Value:
    return b if a is None else ctx.add("add", [a, b])


def _batch_offset(ctx: NodeContext, nonpad: Value, q_len: Dim) -> Value:
    """nonpad_kv_seqlen[b] - q_len as int64 [B, 1, 1] (the external cache's frontier)."""
    n = nonpad if nonpad.dtype == "int64" else ctx.add("cast", [nonpad], {"dtype": "int64"})
    n = reshape(ctx, n, (nonpad.shape[0] if nonpad.shape else 1, 1, 1))
    length = static_dim(q_len, "the query length, with nonpad_kv_seqlen,")
    return ctx.add("sub", [n, ctx.const(np.int64(length), hint="q_len")])


def _grid(q: int, kv: int, offset: int = 0) -> np.ndarray:
    """(i + offset) - j over a [q, kv] grid."""
    return (np.arange(q).reshape(q, 1) + offset - np.arange(kv).reshape(1, kv)).astype(np.int64)


def _diff(ctx: NodeContext, q: Dim, kv: Dim, offset: Dim = 0) -> Value:
    """(i + offset) - j over a [q, kv] grid: a constant, or computed at run time where
    the lengths are symbolic. A symbolic offset is taken where it is the past length
    (``kv - q``): the queries' positions are then the last ``q`` of the keys'."""
    if is_static((q, kv, offset)):
        return ctx.const(_grid(q, kv, offset), hint="diff")  # type: ignore[arg-type]
    keys = positions(ctx, kv)
    if offset != 0 and offset == kv - q:
        rows = slice_axis(ctx, keys, 0, offset, kv)
    else:
        rows = positions(ctx, q)
        if offset != 0:
            shift = static_dim(offset, "the past length of a causal attention")
            rows = ctx.add("add", [rows, ctx.const(np.int64(shift), hint="offset")])
    return ctx.add("sub", [reshape(ctx, rows, (q, 1)), reshape(ctx, keys, (1, kv))])


def _causal(ctx: NodeContext, q: Dim, kv: Dim, offset: Dim | Value, dtype: str) -> Value:
    """Bottom-right causal bias: key j is attended by query i iff j <= i + offset."""
    zero = ctx.const(np.int64(0), hint="zero")
    if isinstance(offset, Value):  # per batch: [B, 1, q, kv]
        diff = ctx.add("add", [_diff(ctx, q, kv), offset])
        allowed = ctx.add("ge", [diff, zero])
        return reshape(ctx, _select(ctx, allowed, dtype), (offset.shape[0], 1, q, kv))
    if is_static((q, kv, offset)):
        return _select(ctx, ctx.const(_grid(q, kv, offset) >= 0, hint="causal"),  # type: ignore[arg-type]
                       dtype)
    return _select(ctx, ctx.add("ge", [_diff(ctx, q, kv, offset), zero]), dtype)


def _window(ctx: NodeContext, q: Dim, kv: Dim, offset: Dim | Value, left: int, right: int,
            dtype: str) -> Value:
    """Sliding window: p - left <= j <= p + right for p = i + offset (-1: unbounded)."""
    if isinstance(offset, Value):
        diff = ctx.add("add", [_diff(ctx, q, kv), offset])
    else:
        diff = _diff(ctx, q, kv, offset)
    allowed: Value | None = None
    if left >= 0:
        allowed = ctx.add("le", [diff, ctx.const(np.int64(left), hint="left")])
    if right >= 0:
        ok = ctx.add("ge", [diff, ctx.const(np.int64(-right), hint="right")])
        allowed = ok if allowed is None else ctx.add("and", [allowed, ok])
    assert allowed is not None
    bias = _select(ctx, allowed, dtype)
    if isinstance(offset, Value):
        bias = reshape(ctx, bias, (offset.shape[0], 1, q, kv))
    return bias


def _bias(ctx: NodeContext, mask: Value | None, nonpad: Value | None, past: Dim | None,
          q: Dim, kv: Dim, dtype: str) -> Value | None:
    """The additive attention bias (None when nothing is masked), as the reference builds
    it: mask, then causal, then the sliding window, then the key padding."""
    causal = bool(ctx.attr("is_causal", 0))
    left, right = int(ctx.attr("left_window_size", -1)), int(ctx.attr("right_window_size", -1))
    zeros = filled(ctx, (q, kv), 0, dtype, hint="zeros")
    if mask is not None:
        mask = _pad_keys(ctx, mask, kv)
        if mask.dtype == "bool":
            mask = _select(ctx, mask, dtype)
        elif mask.dtype != dtype:
            mask = ctx.add("cast", [mask], {"dtype": dtype})
    offset: Dim | Value = past or 0
    if past is None and nonpad is not None:
        offset = _batch_offset(ctx, nonpad, q)
    bias: Value | None = None
    if causal:
        base = zeros if mask is None else mask
        if left >= 0 or right >= 0:
            base = ctx.add("add", [zeros, base])
        bias = ctx.add("add", [base, _causal(ctx, q, kv, offset, dtype)])
    elif mask is not None:
        bias = ctx.add("add", [zeros, mask])
    if left >= 0 or right >= 0:
        base = ctx.add("add", [zeros, bias]) if bias is not None else zeros
        bias = ctx.add("add", [base, _window(ctx, q, kv, offset, left, right, dtype)])
    if nonpad is not None:
        n = nonpad if nonpad.dtype == "int64" else ctx.add("cast", [nonpad], {"dtype": "int64"})
        n = reshape(ctx, n, (n.shape[0] if n.shape else 1, 1))
        keep = ctx.add("lt", [positions(ctx, kv), n])
        pad = reshape(ctx, _select(ctx, keep, dtype), (n.shape[0], 1, 1, kv))
        bias = _add(ctx, bias, pad)
    return bias


@converter("Attention", since=23)
def convert_attention(ctx: NodeContext) -> list[Value | None]:
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    mask, past_k, past_v = (ctx.optional_input(i) for i in (3, 4, 5))
    nonpad = ctx.optional_input(6) if ctx.opset >= 24 else None
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    three_d = len(q.shape) == 3
    if three_d:
        q = _heads(ctx, q, int(ctx.required_attr("q_num_heads")))
        k = _heads(ctx, k, int(ctx.required_attr("kv_num_heads")))
        v = _heads(ctx, v, int(ctx.required_attr("kv_num_heads")))
    if not len(q.shape) == len(k.shape) == len(v.shape) == 4:
        raise ctx.error(f"Q, K and V must be 3-D or 4-D, got {shape_text(q.shape)}, "
                        f"{shape_text(k.shape)}, {shape_text(v.shape)}")
    dtype = q.dtype
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    root = ctx.const(np.asarray(np.sqrt(scale)).astype(dtype), hint="scale")
    past = None
    if past_k is not None and past_v is not None:
        past = past_k.shape[2]
        k = ctx.add("concat", [past_k, k], {"axis": 2})
        v = ctx.add("concat", [past_v, v], {"axis": 2})
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = _bias(ctx, mask, nonpad, past, q_len, kv_len, dtype)
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads != kv_heads and heads % kv_heads == 0 and k.shape[1] == v.shape[1]:
        k = _repeat_heads(ctx, k, heads // kv_heads)
        v = _repeat_heads(ctx, v, heads // kv_heads)
    scores = ctx.add("matmul", [ctx.add("mul", [q, root]),
                                transpose(ctx, ctx.add("mul", [k, root]), (0, 1, 3, 2))])
    cap = float(ctx.attr("softcap", 0.0))
    if cap > 0:
        c = ctx.const(np.asarray(cap).astype(dtype), hint="softcap")
        scores = ctx.add("mul", [ctx.add("tanh", [ctx.add("div", [scores, c])]), c])
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    biased = scores if bias is None else ctx.add("add", [scores, bias])
    qk_out = biased if mode == 2 else scores
    precision = ctx.attr("softmax_precision")
    logits = biased
    if precision is not None:
        wanted = to_numpy_dtype(int(precision), f"{ctx.where}: softmax_precision")
        if wanted != logits.dtype:
            logits = ctx.add("cast", [logits], {"dtype": wanted})
    probs = ctx.add("softmax", [logits], {"axis": len(logits.shape) - 1})
    if bias is not None:  # a row with no attendable key is all zeros, not NaN
        top = ctx.add("reduce_max", [bias], {"axes": [len(bias.shape) - 1], "keepdims": True})
        empty = ctx.add("eq", [top, ctx.const(np.full((), -np.inf, dtype), hint="neg_inf")])
        probs = ctx.add("where", [empty, ctx.const(np.zeros((), probs.dtype), hint="zero"),
                                  probs])
    if mode == 3:
        qk_out = probs
    if qk_out.dtype != dtype:
        qk_out = ctx.add("cast", [qk_out], {"dtype": dtype})
    if probs.dtype != dtype:
        probs = ctx.add("cast", [probs], {"dtype": dtype})
    y = ctx.add("matmul", [probs, v])
    if three_d:
        b, h, s, d = y.shape
        y = reshape(ctx, transpose(ctx, y, (0, 2, 1, 3)), (b, s, h * d))
    return [y, present_k if ctx.output_wanted(1) else None,
            present_v if ctx.output_wanted(2) else None,
            qk_out if ctx.output_wanted(3) else None]


@converter("RotaryEmbedding", since=23)
def convert_rotary_embedding(ctx: NodeContext) -> Value:
    """Rotates pairs of a head's first ``rotary_embedding_dim`` features by the cached
    angles: halves (x1, x2) or, with ``interleaved``, even and odd features."""
    x, cos, sin = ctx.input(0), ctx.input(1), ctx.input(2)
    positions = ctx.optional_input(3)
    original = x.shape
    if len(x.shape) == 4:  # [B, H, S, D] -> [B, S, H, D]
        x = transpose(ctx, x, (0, 2, 1, 3))
    elif len(x.shape) == 3:
        heads = int(ctx.attr("num_heads", 0))
        if heads <= 0 or x.shape[2] % heads:
            raise ctx.error(f"a 3-D input {shape_text(x.shape)} needs num_heads dividing its "
                            "last dimension")
        x = reshape(ctx, x, (x.shape[0], x.shape[1], heads, x.shape[2] // heads))
    else:
        raise ctx.error(f"needs a 3-D or 4-D input, got {shape_text(x.shape)}")
    b, s, h, d = x.shape
    dim = int(ctx.attr("rotary_embedding_dim", 0)) or d
    half = dim // 2
    if positions is not None:
        cos = ctx.add("gather", [cos, positions], {"axis": 0})
        sin = ctx.add("gather", [sin, positions], {"axis": 0})
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ctx.error(f"the caches' last dimension must be rotary_embedding_dim / 2 = {half}")
    cos = reshape(ctx, cos, (*cos.shape[:-1], 1, half))
    sin = reshape(ctx, sin, (*sin.shape[:-1], 1, half))

    def part(start: int, stop: int, step: int) -> Value:
        return ctx.add("slice", [x], {"begin": [0, 0, 0, start], "end": [b, s, h, stop],
                                      "step": [1, 1, 1, step]})

    interleaved = bool(ctx.attr("interleaved", 0))
    x1, x2 = (part(0, dim, 2), part(1, dim, 2)) if interleaved else \
        (part(0, half, 1), part(half, dim, 1))
    real = ctx.add("sub", [ctx.add("mul", [cos, x1]), ctx.add("mul", [sin, x2])])
    imag = ctx.add("add", [ctx.add("mul", [sin, x1]), ctx.add("mul", [cos, x2])])
    if interleaved:
        pairs = [reshape(ctx, v, (b, s, h, half, 1)) for v in (real, imag)]
        rotated = reshape(ctx, ctx.add("concat", pairs, {"axis": 4}), (b, s, h, dim))
    else:
        rotated = ctx.add("concat", [real, imag], {"axis": 3})
    if dim < d:
        rotated = ctx.add("concat", [rotated, part(dim, d, 1)], {"axis": 3})
    if len(original) == 4:
        return transpose(ctx, rotated, (0, 2, 1, 3))
    return reshape(ctx, rotated, original)


@converter("LinearAttention", since=27)
def convert_linear_attention(ctx: NodeContext) -> list[Value | None]:
    """The recurrence of ONNX's reference, unrolled over the (static) sequence: per step,
    decay the state (gated rules), correct the value by what the state already recalls
    (delta rules), add the key-value outer product, read with the query. All in float32,
    cast back at the end."""
    q, k, v, past, decay, beta = (ctx.optional_input(i) for i in range(6))
    assert q is not None and k is not None and v is not None
    rule = str(ctx.attr("update_rule", "gated_delta"))
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"unknown update_rule {rule!r}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise ctx.error(f"update_rule {rule!r} needs decay {'given' if gating else 'absent'} "
                        f"and beta {'given' if delta else 'absent'}")
    qh, kvh = int(ctx.required_attr("q_num_heads")), int(ctx.required_attr("kv_num_heads"))
    if len(q.shape) != 3 or qh % kvh:
        raise ctx.error(f"needs 3-D inputs and q_num_heads a multiple of kv_num_heads, got "
                        f"{shape_text(q.shape)}, {qh}, {kvh}")

    def f32(x: Value) -> Value:
        return x if x.dtype == "float32" else ctx.add("cast", [x], {"dtype": "float32"})

    b, t, _ = q.shape
    q4, k4, v4 = f32(_heads(ctx, q, qh)), f32(_heads(ctx, k, kvh)), f32(_heads(ctx, v, kvh))
    dk, dv = q4.shape[3], v4.shape[3]
    decay4 = beta4 = None
    if decay is not None:
        if decay.shape[-1] == kvh:
            decay4 = transpose(ctx, reshape(ctx, decay, (b, t, kvh, 1)), (0, 2, 1, 3))
        else:
            decay4 = _heads(ctx, decay, kvh)
        decay4 = f32(decay4)
    if beta is not None:
        width = beta.shape[-1]
        beta4 = f32(transpose(ctx, reshape(ctx, beta, (b, t, width, 1)), (0, 2, 1, 3)))
    state_dtype = past.dtype if past is not None else q.dtype
    state = f32(past) if past is not None else \
        filled(ctx, (b, kvh, dk, dv), 0, "float32", hint="state")
    scale = float(ctx.attr("scale", 0.0)) or 1.0 / math.sqrt(dk)

    def step(x: Value, i: int) -> Value:
        bb, h, _, d = x.shape
        return ctx.add("slice", [x], {"begin": [0, 0, i, 0], "end": [bb, h, i + 1, d],
                                      "step": [1, 1, 1, 1]})

    outputs = []
    for i in range(t):
        q_t, k_t, v_t = step(q4, i), step(k4, i), step(v4, i)
        if decay4 is not None:
            g = step(decay4, i)  # [B, Hkv, 1, dk or 1]
            g = reshape(ctx, g, (b, kvh, g.shape[3], 1))
            state = ctx.add("mul", [state, ctx.add("exp", [g])])
        if beta4 is not None:
            recalled = ctx.add("matmul", [k_t, state])  # [B, Hkv, 1, dv]
            v_t = ctx.add("mul", [step(beta4, i), ctx.add("sub", [v_t, recalled])])
        outer = ctx.add("matmul", [transpose(ctx, k_t, (0, 1, 3, 2)), v_t])
        state = ctx.add("add", [state, outer])
        read = state if qh == kvh else _repeat_heads(ctx, state, qh // kvh)
        o = ctx.add("matmul", [q_t, read])
        outputs.append(ctx.add("mul", [o, ctx.const(np.float32(scale), hint="scale")]))
    y = outputs[0] if len(outputs) == 1 else ctx.add("concat", outputs, {"axis": 2})
    y = reshape(ctx, transpose(ctx, y, (0, 2, 1, 3)), (b, t, qh * dv))
    if y.dtype != q.dtype:
        y = ctx.add("cast", [y], {"dtype": q.dtype})
    if state.dtype != state_dtype:
        state = ctx.add("cast", [state], {"dtype": state_dtype})
    return [y, state if ctx.output_wanted(1) else None]
