"""Quantized convolutions and products computed with integer arithmetic.

An int8 QDQ model (ONNX Runtime's quantizer, ``tensorsmith quantize``) imports as float
compute: each activation's QuantizeLinear/DequantizeLinear pair becomes ``clip(round(v /
s), lo - zp, hi - zp) * s`` and each weight ``q_w * s_w`` (frontend-onnx's
converters/quantize.py). Where a dense ``conv2d`` or a ``matmul`` reads such an
activation (per-tensor ``s``) and such a weight (a constant int8 ``q_w``, per-tensor or
per-output-channel ``s_w``, zero point 0), this pass computes it as

    u   = cast<uint8>(clip(round(v / s), lo - zp, hi - zp) - (lo - zp))
    acc = qconv2d | qmatmul(u, q_w)                        (int32, exact)
    out = float32(acc - (zp - lo) * sum_k q_w) * (s * s_w)

``u`` is the activation's integer ``q - zp`` moved to 0..255 (its zero point ``zp - lo``):
an int8 activation becomes uint8 this way, as the integer dot products take it. The
quantize step is elementwise, so it fuses into the kernel that produces ``v`` and the
tensor between the two kernels is one byte an element. The correction and the scales
are ordinary ops after the product, which fuse into its write-back with whatever follows
(the bias, the next quantize step). The weights become int8 constants in the layout the
integer ops take (ops/integer.py): a quarter of the float32 bytes.

Left in float: grouped and depthwise convolutions, reductions whose length is not a
multiple of 4 (a 3-channel first convolution) or so long that an int32 sum could
overflow (:data:`MAX_DEPTH`), weights whose values or scales do not have the shapes
above; on a CPU without integer dot products (x86 before VNNI) every QDQ product, as
there the exact 16-bit form (codegen-llvm's dot4.py) runs slower than float32
multiply-adds (on AVX2: ResNet-50, 2 threads, 51 ms against 41; a 64x768x768 product,
one thread, 0.84 ms against 0.69); and on a CPU
(``conv_block``: its channel block, passes/blocked_layout.py) a
convolution whose channels are not whole blocks: it would run on NCHW bytes, where a
pixel's four channels are not adjacent and no dot instruction applies (MobileNetV3 on
an AVX-512 VNNI Xeon, 2 threads: 3.30 ms against float32's 3.03 with its 24-, 40- and
72-channel layers converted too, 2.30 against 3.41 without them). The pass runs before
constant folding, which would otherwise multiply each weight by its scales into one
float32 tensor.

Which products a target takes (:class:`IntegerProducts`) is build._integer_products'
decision, from the target's facts.

The integer products of ONNX's QOperator format (ConvInteger, MatMulInteger,
QLinearConv, QLinearMatMul), which import as an int32 conv2d or matmul of ``int32(x) -
zp`` and a constant weight, become the same integer ops (without the float epilogue:
their int32 result is exact either way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph, Node, Value
from ..op_registry import TensorType, get_op
from ..ops.integer import pack_conv_weight, pack_matmul_weight
from ..te.dot4 import DOT

#: The longest reduction whose int32 sum cannot overflow: every term is at most 255 x 128.
MAX_DEPTH = (2**31 - 1) // (255 * 128)
#: Ops that only move a constant weight's elements (a Gemm's transposed ``B``).
_MOVES = ("transpose", "reshape")


@dataclass(frozen=True)
class IntegerProducts:
    """Which products a target computes in integers (build.py decides it per target).

    ``conv_block``: a convolution only where its input and output channels are whole
    blocks of it (a CPU's channel block; 0: no convolution); ``dequantized``: the float
    products of QDQ models too (not only the QOperator ops' int32 ones)."""

    conv_block: int = 1
    dequantized: bool = True


def integer_products(graph: Graph, where: IntegerProducts = IntegerProducts()) -> Graph:
    """``graph`` with every qualifying quantized conv2d / matmul that ``where`` admits
    computed in integers."""
    replaced: dict[int, Value] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        node.inputs = [replaced.get(v.uid, v) for v in node.inputs]
        made = _rewrite(node, where)
        if made is None:
            nodes.append(node)
            continue
        nodes += made[0]
        replaced[node.outputs[0].uid] = made[1]
    graph.nodes = nodes
    graph.replace_results(replaced)
    return graph


def _rewrite(node: Node, where: IntegerProducts) -> tuple[list[Node], Value] | None:
    integer = node.outputs[0].dtype == "int32"
    if not (integer or where.dequantized):
        return None
    if node.op == "conv2d":
        if not _whole_blocks(node, where.conv_block):
            return None
        return _integer_conv(node) if integer else _conv(node)
    if node.op == "matmul":
        return _integer_matmul(node) if integer else _matmul(node)
    return None


def _whole_blocks(conv: Node, block: int) -> bool:
    """Whether ``conv``'s input and output channels are whole blocks of ``block``."""
    x, w = conv.inputs[0], conv.inputs[1]
    return block > 0 and len(x.shape) == 4 and len(w.shape) == 4 and all(
        isinstance(c, int) and c % block == 0 for c in (x.shape[1], w.shape[0]))


# -- matching -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Activation:
    """A per-tensor QDQ activation: ``clipped * scale``, ``clipped = clip(round(..), low,
    low + 255)``."""

    clipped: Value
    low: float
    scale: float

    @property
    def zero_point(self) -> int:
        """The byte of ``u`` that stands for a real 0."""
        return int(-self.low)


def _activation(v: Value) -> _Activation | None:
    mul = v.producer
    if mul is None or mul.op != "mul" or v.dtype != "float32":
        return None
    for clipped, scale in (mul.inputs, mul.inputs[::-1]):
        s = _scalar(scale)
        clip = clipped.producer
        if s is None or s <= 0 or clip is None or clip.op != "clip" or len(clip.inputs) != 1:
            continue
        low, high = clip.attrs.get("min"), clip.attrs.get("max")
        source = clip.inputs[0].producer
        if (low is None or high is None or float(high) - float(low) != 255.0
                or not float(low) <= 0.0 <= float(high) or float(low) != int(low)
                or source is None or source.op != "round"):
            continue
        return _Activation(clipped, float(low), s)
    return None


def _scalar(v: Value) -> float | None:
    data = _constant(v)
    if data is None or data.size != 1 or data.dtype != np.float32:
        return None
    return float(data.reshape(-1)[0])


def _constant(v: Value, depth: int = 3) -> np.ndarray | None:
    """``v``'s value when it is a constant or a few ops over constants (a reshaped
    scale: the importer's, not yet folded)."""
    if v.is_constant:
        return np.asarray(v.data)
    node = v.producer
    if node is None or depth == 0 or len(node.outputs) != 1:
        return None
    args = [_constant(i, depth - 1) for i in node.inputs]
    if any(a is None for a in args):
        return None
    with np.errstate(all="ignore"):
        return np.asarray(get_op(node.op).reference(args, node.attrs)[0])  # type: ignore[arg-type]


def _weight(v: Value) -> tuple[np.ndarray, np.ndarray] | None:
    """``(q_w as int8, s_w broadcast to its shape)`` of a weight ``q_w * s_w`` (under ops
    that only move elements), or None."""
    moves: list[Node] = []
    while v.producer is not None and v.producer.op in _MOVES:
        moves.append(v.producer)
        v = v.producer.inputs[0]
    mul = v.producer
    if mul is None or mul.op != "mul" or v.dtype != "float32" or len(v.shape) < 2:
        return None
    for qv, sv in (mul.inputs, mul.inputs[::-1]):
        q, s = _constant(qv), _constant(sv)
        if q is None or s is None or q.shape != tuple(v.shape) or s.dtype != np.float32:
            continue
        if not (np.all(q == np.rint(q)) and q.min() >= -128 and q.max() <= 127):
            continue
        if not np.all(s > 0):
            continue
        q8, full = q.astype(np.int8), np.broadcast_to(s, q.shape)
        for node in reversed(moves):
            q8 = get_op(node.op).reference([q8], node.attrs)[0]
            full = get_op(node.op).reference([np.ascontiguousarray(full)], node.attrs)[0]
        return np.asarray(q8), np.asarray(full)
    return None


def _per_channel(scale: np.ndarray, axis: int) -> np.ndarray | None:
    """The scales along ``axis`` when they are the same along every other axis."""
    moved = np.moveaxis(scale, axis, 0).reshape(scale.shape[axis], -1)
    if not np.all(moved == moved[:, :1]):
        return None
    return np.ascontiguousarray(moved[:, 0])


# -- rewriting ----------------------------------------------------------------------------
class _Builder:
    """New nodes named after the node they replace."""

    def __init__(self, node: Node) -> None:
        self.base, self.where = node.outputs[0].name, node.name
        self.nodes: list[Node] = []

    def add(self, op: str, inputs: list[Value], attrs: dict, suffix: str) -> Value:
        ty = get_op(op).infer([TensorType(v.shape, v.dtype) for v in inputs], attrs)[0]
        out = Value(f"{self.base}_{suffix}", ty.shape, ty.dtype)
        node = Node(op, inputs, [out], attrs, f"{self.where}/{suffix}")
        out.producer = node
        self.nodes.append(node)
        return out

    def const(self, data: np.ndarray, suffix: str) -> Value:
        return Graph.constant(f"{self.base}_{suffix}", data)


def _bytes(b: _Builder, act: _Activation) -> Value:
    """The activation as uint8 ``q - zp + zero_point`` (0..255)."""
    low = b.const(np.asarray(act.low, np.float32), "low")
    shifted = b.add("sub", [act.clipped, low], {}, "shifted")
    return b.add("cast", [shifted], {"dtype": "uint8"}, "bytes")


def _epilogue(b: _Builder, acc: Value, correction: np.ndarray, scale: np.ndarray,
              shape: tuple[int, ...]) -> Value:
    """``float32(acc + correction) * scale``, both per output channel (``shape``)."""
    fixed = b.add("add", [acc, b.const(correction.astype(np.int32).reshape(shape),
                                       "zero_sum")], {}, "acc")
    real = b.add("cast", [fixed], {"dtype": "float32"}, "real")
    return b.add("mul", [real, b.const(scale.astype(np.float32).reshape(shape), "scale")],
                 {}, "dequantized")


def _conv(node: Node) -> tuple[list[Node], Value] | None:
    x, w = node.inputs[0], node.inputs[1]
    if (len(node.inputs) != 2 or node.attrs.get("groups", 1) != 1 or len(x.shape) != 4
            or node.attrs.get("weight_transform") or node.attrs.get("block")):
        return None
    act, weight = _activation(x), _weight(w)
    if (act is None or weight is None or weight[0].ndim != 4 or weight[0].shape[1] % DOT
            or weight[0][0].size > MAX_DEPTH):
        return None
    q, full = weight
    per = _per_channel(full, 0)
    if per is None:
        return None
    b = _Builder(node)
    attrs = {k: v for k, v in node.attrs.items() if k != "groups"}
    attrs["zero_point"] = act.zero_point
    acc = b.add("qconv2d", [_bytes(b, act), b.const(pack_conv_weight(q), "weight_int8")],
                attrs, "int32")
    sums = q.astype(np.int64).sum(axis=(1, 2, 3))
    out = _epilogue(b, acc, -act.zero_point * sums, np.float32(act.scale) * per,
                    (q.shape[0], 1, 1))
    return b.nodes, out


def _matmul(node: Node) -> tuple[list[Node], Value] | None:
    x, w = node.inputs
    act, weight = _activation(x), _weight(w)
    if (act is None or weight is None or weight[0].ndim != 2 or weight[0].shape[0] % DOT
            or weight[0].shape[0] > MAX_DEPTH):
        return None
    q, full = weight
    per = _per_channel(full, 1)
    if per is None:
        return None
    b = _Builder(node)
    acc = b.add("qmatmul", [_bytes(b, act), b.const(pack_matmul_weight(q), "weight_int8")],
                {}, "int32")
    sums = q.astype(np.int64).sum(axis=0)
    out = _epilogue(b, acc, -act.zero_point * sums, np.float32(act.scale) * per,
                    (q.shape[1],))
    return b.nodes, out


# -- the integer ops of ONNX's QOperator format -----------------------------------------
# ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul import as an int32 conv2d or
# matmul of ``int32(x) - zp`` and a constant int32 weight (converters/quantize.py): the
# same integer op computes them, and the int32 result is the same bit for bit.
def _centered_bytes(v: Value) -> tuple[Value, int] | None:
    """``(int32(x), zp)`` of ``v = int32(x) - zp`` (or ``int32(x)``): x 8-bit, zp one
    constant."""
    zero, node = 0, v.producer
    if node is not None and node.op == "sub":
        z = _constant(node.inputs[1])
        if z is None or z.size != 1:
            return None
        zero, v = int(z.reshape(-1)[0]), node.inputs[0]
        node = v.producer
    if node is None or node.op != "cast" or v.dtype != "int32":
        return None
    return (v, zero) if node.inputs[0].dtype in ("uint8", "int8") else None


def _int_weight(v: Value, rank: int) -> np.ndarray | None:
    """A constant int32 (or int8) weight of int8 values, as int8."""
    data = _constant(v)
    if data is None or data.ndim != rank or data.dtype not in (np.int32, np.int8):
        return None
    if data.size and (data.min() < -128 or data.max() > 127):
        return None
    return data.astype(np.int8)


def _int_bytes(b: _Builder, wide: Value, zero: int) -> tuple[Value, int] | None:
    """The activation ``x`` of ``wide = int32(x)`` as uint8 and its zero point there:
    uint8 as it is, int8 moved up by 128."""
    assert wide.producer is not None
    x = wide.producer.inputs[0]
    if x.dtype == "uint8":
        return (x, zero) if 0 <= zero <= 255 else None
    if not -128 <= zero <= 127:
        return None
    offset = b.const(np.asarray(128, np.int32), "offset")
    moved = b.add("add", [wide, offset], {}, "moved")
    return b.add("cast", [moved], {"dtype": "uint8"}, "bytes"), zero + 128


def _integer_conv(node: Node) -> tuple[list[Node], Value] | None:
    x32, w32 = node.inputs
    if (node.attrs.get("groups", 1) != 1 or len(x32.shape) != 4
            or node.attrs.get("weight_transform") or node.attrs.get("block")):
        return None
    act, q = _centered_bytes(x32), _int_weight(w32, 4)
    if act is None or q is None or q.shape[1] % DOT or q[0].size > MAX_DEPTH:
        return None
    b = _Builder(node)
    made = _int_bytes(b, *act)
    if made is None:
        return None
    u, zero = made
    attrs = {k: v for k, v in node.attrs.items() if k != "groups"}
    acc = b.add("qconv2d", [u, b.const(pack_conv_weight(q), "weight_int8")],
                {**attrs, "zero_point": zero}, "int32")
    sums = -zero * q.astype(np.int64).sum(axis=(1, 2, 3))
    return b.nodes, b.add("add", [acc, b.const(sums.astype(np.int32).reshape(-1, 1, 1),
                                               "zero_sum")], {}, "acc")


def _integer_matmul(node: Node) -> tuple[list[Node], Value] | None:
    x32, w32 = node.inputs
    act, q = _centered_bytes(x32), _int_weight(w32, 2)
    if act is None or q is None or q.shape[0] % DOT or q.shape[0] > MAX_DEPTH:
        return None
    b = _Builder(node)
    made = _int_bytes(b, *act)
    if made is None:
        return None
    u, zero = made
    acc = b.add("qmatmul", [u, b.const(pack_matmul_weight(q), "weight_int8")], {}, "int32")
    sums = -zero * q.astype(np.int64).sum(axis=0)
    return b.nodes, b.add("add", [acc, b.const(sums.astype(np.int32), "zero_sum")], {}, "acc")
