"""The benchmark and test models, built in code as ONNX with seeded random weights.

Each builder returns an ``onnx.ModelProto`` (checked by ``onnx.checker``) shaped like what
PyTorch's exporter writes for the torchvision / Hugging Face / timm original, at opset
13 or 17. Shapes are static: the batch (and image or sequence size) is a parameter.

    from bench.models import MODELS, input_shapes, sample_inputs
    model = MODELS["resnet18"](opset=17, batch=1)
    feeds = sample_inputs(model)                     # {name: np.ndarray}
    mod, params = from_onnx(model, shape=input_shapes(model))
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from .layers import conv_bn, encoder_layer, layer_norm, relu6
from .onnx_graph import GraphBuilder

__all__ = [
    "MODELS",
    "bert_encoder",
    "input_shapes",
    "lstm_model",
    "matmul_model",
    "mobilenetv2",
    "mobilenetv3",
    "resnet18",
    "resnet50",
    "sample_inputs",
    "tiny_detector",
    "vit_small",
]

# metadata key naming the exclusive upper bound of an integer input's values
INT_RANGE_KEY = "tensorsmith.bench.int_range."


# ---- ResNet -------------------------------------------------------------------------


def _classifier(g: GraphBuilder, x: str, channels: int, classes: int) -> str:
    """GlobalAveragePool, Flatten, Gemm(transB=1) to ``classes`` logits."""
    flat = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w = g.weight((classes, channels), 1.0 / math.sqrt(channels), "fc_W")
    b = g.const(g.normal((classes,), 0.01), g.fresh("fc_B"))
    return g.op("Gemm", [flat, w, b], alpha=1.0, beta=1.0, transB=1)


def _basic_block(g: GraphBuilder, x: str, cin: int, planes: int, stride: int, bn: bool) -> str:
    out = g.op("Relu", [conv_bn(g, x, cin, planes, 3, stride, bn=bn)])
    out = conv_bn(g, out, planes, planes, 3, bn=bn, gamma_scale=0.3)
    if stride != 1 or cin != planes:
        x = conv_bn(g, x, cin, planes, 1, stride, bn=bn)
    return g.op("Relu", [g.op("Add", [out, x])])


def _bottleneck(g: GraphBuilder, x: str, cin: int, planes: int, stride: int, bn: bool) -> str:
    cout = planes * 4
    out = g.op("Relu", [conv_bn(g, x, cin, planes, 1, bn=bn)])
    out = g.op("Relu", [conv_bn(g, out, planes, planes, 3, stride, bn=bn)])
    out = conv_bn(g, out, planes, cout, 1, bn=bn, gamma_scale=0.3)
    if stride != 1 or cin != cout:
        x = conv_bn(g, x, cin, cout, 1, stride, bn=bn)
    return g.op("Relu", [g.op("Add", [out, x])])


def _resnet(
    name: str,
    blocks: list[int],
    bottleneck: bool,
    opset: int,
    batch: int | str,
    image: int,
    bn: bool,
    seed: int,
) -> onnx.ModelProto:
    g = GraphBuilder(name, opset, seed)
    x = g.input("input", [batch, 3, image, image])
    x = g.op("Relu", [conv_bn(g, x, 3, 64, 7, 2, bn=bn)])
    x = g.op(
        "MaxPool",
        [x],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        ceil_mode=0,
        dilations=[1, 1],
    )
    block = _bottleneck if bottleneck else _basic_block
    expansion = 4 if bottleneck else 1
    cin = 64
    for stage, count in enumerate(blocks):
        planes = 64 * 2**stage
        for i in range(count):
            x = block(g, x, cin, planes, 2 if (i == 0 and stage > 0) else 1, bn)
            cin = planes * expansion
    g.output(_classifier(g, x, cin, 1000), [batch, 1000], name="logits")
    form = "Conv + BatchNormalization" if bn else "Conv with BatchNormalization folded"
    return g.model(f"{name} (torchvision topology), {form}, random weights, seed {seed}")


def resnet18(
    opset: int = 17, batch: int | str = 1, image: int = 224, bn: bool = False, seed: int = 0
) -> onnx.ModelProto:
    """ResNet-18: 7x7/2 stem, 3x3/2 max pool, basic blocks [2, 2, 2, 2], GAP, Gemm 1000.

    ``bn=True`` keeps Conv + BatchNormalization pairs (exporting without constant
    folding); the default folds BatchNormalization into the convolutions' weights and bias.
    A name for ``batch`` makes the batch axis symbolic (a dim_param).
    """
    return _resnet("resnet18", [2, 2, 2, 2], False, opset, batch, image, bn, seed)


def resnet50(
    opset: int = 17, batch: int | str = 1, image: int = 224, bn: bool = False, seed: int = 0
) -> onnx.ModelProto:
    """ResNet-50 (v1.5: stride in the 3x3): bottleneck blocks [3, 4, 6, 3]; see resnet18."""
    return _resnet("resnet50", [3, 4, 6, 3], True, opset, batch, image, bn, seed)


# ---- MobileNetV2 --------------------------------------------------------------------

# expansion t, output channels c, repeats n, first stride s (torchvision)
MOBILENETV2_SETTINGS = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


def _inverted_residual(
    g: GraphBuilder, x: str, cin: int, cout: int, stride: int, expand: int, bn: bool
) -> str:
    hidden = cin * expand
    y = x
    if expand != 1:
        y = relu6(g, conv_bn(g, y, cin, hidden, 1, bn=bn))
    y = relu6(g, conv_bn(g, y, hidden, hidden, 3, stride, groups=hidden, bn=bn))
    y = conv_bn(g, y, hidden, cout, 1, bn=bn, gamma_scale=0.5 if stride == 1 else 1.0)
    if stride == 1 and cin == cout:
        y = g.op("Add", [x, y])
    return y


def mobilenetv2(
    opset: int = 17, batch: int | str = 1, image: int = 224, bn: bool = False, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV2 (torchvision, width 1.0): inverted residuals with depthwise 3x3 convs
    (group = channels), ReLU6 as Clip(0, 6), 1x1 convs, GAP, Gemm 1000. A name for
    ``batch`` makes the batch axis symbolic (a dim_param)."""
    g = GraphBuilder("mobilenetv2", opset, seed)
    x = g.input("input", [batch, 3, image, image])
    x = relu6(g, conv_bn(g, x, 3, 32, 3, 2, bn=bn))
    cin = 32
    for expand, cout, repeats, first_stride in MOBILENETV2_SETTINGS:
        for i in range(repeats):
            x = _inverted_residual(g, x, cin, cout, first_stride if i == 0 else 1, expand, bn)
            cin = cout
    x = relu6(g, conv_bn(g, x, cin, 1280, 1, bn=bn))
    g.output(_classifier(g, x, 1280, 1000), [batch, 1000], name="logits")
    return g.model(f"mobilenetv2 (torchvision topology), random weights, seed {seed}")


#: torchvision's MobileNetV3-Large blocks: kernel, expanded channels, out channels,
#: squeeze-and-excite, hardswish (else ReLU), stride
MOBILENETV3_LARGE = [
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
]


def _divisible(v: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: ``v`` to a multiple of 8, not below 90% of it."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def _squeeze_excite(g: GraphBuilder, x: str, channels: int) -> str:
    """GAP, 1x1 conv to a quarter (ReLU), 1x1 conv back (HardSigmoid), scale ``x``."""
    squeeze = _divisible(channels // 4)
    s = g.op("GlobalAveragePool", [x])
    for cin, cout in ((channels, squeeze), (squeeze, channels)):
        w = g.weight((cout, cin, 1, 1), math.sqrt(2.0 / cin), "se_W")
        s = g.op("Conv", [s, w, g.const(g.normal((cout,), 0.1), g.fresh("se_B"))])
        s = g.op("Relu", [s]) if cout == squeeze else g.op("HardSigmoid", [s], alpha=1 / 6)
    return g.op("Mul", [x, s])


def mobilenetv3(
    opset: int = 17, batch: int | str = 1, image: int = 224, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV3-Large (torchvision topology, BatchNormalization folded as the
    exporter does): inverted residuals with 3x3 and 5x5 depthwise convs, squeeze-and-
    excite, HardSwish, then a 1x1 conv to 960, GAP and a 1280-wide head."""
    g = GraphBuilder("mobilenetv3", opset, seed)

    def act(y: str, hardswish: bool) -> str:
        return g.op("HardSwish", [y]) if hardswish else g.op("Relu", [y])

    x = act(conv_bn(g, g.input("input", [batch, 3, image, image]), 3, 16, 3, 2, bn=False),
            True)
    cin = 16
    for kernel, hidden, cout, se, hs, stride in MOBILENETV3_LARGE:
        y = x if hidden == cin else act(conv_bn(g, x, cin, hidden, 1, bn=False), hs)
        y = act(conv_bn(g, y, hidden, hidden, kernel, stride, groups=hidden, bn=False), hs)
        if se:
            y = _squeeze_excite(g, y, hidden)
        y = conv_bn(g, y, hidden, cout, 1, bn=False, gamma_scale=0.5)
        x = g.op("Add", [x, y]) if stride == 1 and cin == cout else y
        cin = cout
    x = act(conv_bn(g, x, cin, 960, 1, bn=False), True)
    flat = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    hidden_w = g.weight((1280, 960), 1.0 / math.sqrt(960), "head_W")
    h = g.op("HardSwish", [g.op("Gemm", [flat, hidden_w, g.const(g.normal((1280,), 0.01))],
                                transB=1)])
    out_w = g.weight((1000, 1280), 1.0 / math.sqrt(1280), "fc_W")
    g.output(g.op("Gemm", [h, out_w, g.const(g.normal((1000,), 0.01))], transB=1),
             [batch, 1000], name="logits")
    return g.model(f"mobilenetv3 large (torchvision topology), random weights, seed {seed}")


# ---- BERT ---------------------------------------------------------------------------


def _extended_mask(g: GraphBuilder, mask: str) -> str:
    """Hugging Face's additive mask: ``(1 - mask[:, None, None, :]) * -10000``."""
    m = g.op("Unsqueeze", [mask, g.int64s([1, 2])])
    m = g.op("Cast", [m], to=TensorProto.FLOAT)
    return g.op("Mul", [g.op("Sub", [g.scalar(1.0), m]), g.scalar(-10000.0)])


def bert_encoder(
    opset: int = 17,
    batch: int | str = 1,
    seq: int | str = 128,
    layers: int = 4,
    hidden: int = 256,
    heads: int = 4,
    vocab: int = 30522,
    attention_mask: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """A BERT encoder: word + position + token-type embeddings (Gather), LayerNorm,
    ``layers`` post-norm encoder layers (attention, GELU MLP of 4 * hidden).

    Inputs: ``input_ids`` int64 [batch, seq] and, with ``attention_mask``, an int64
    ``attention_mask`` [batch, seq] of 0/1. Output: ``last_hidden_state``.
    LayerNorm is the LayerNormalization op at opset 17, its decomposition before.
    A name for ``batch`` or ``seq`` makes that axis symbolic (a dim_param), and the shapes
    that depend on it are computed from the inputs' shapes, as exporters write them.
    """
    eps = 1e-12
    g = GraphBuilder("bert_encoder", opset, seed)
    ids = g.input("input_ids", [batch, seq], TensorProto.INT64)
    g.metadata[INT_RANGE_KEY + "input_ids"] = str(vocab)
    mask = None
    if attention_mask:
        mask = _extended_mask(g, g.input("attention_mask", [batch, seq], TensorProto.INT64))
    word = g.op("Gather", [g.weight((vocab, hidden), 1.0, "word_embeddings"), ids], axis=0)
    if isinstance(seq, int):
        positions = g.const(np.arange(seq, dtype=np.int64)[None, :], g.fresh("position_ids"))
        types = g.const(np.zeros((1, seq), dtype=np.int64), g.fresh("token_type_ids"))
    else:  # as Hugging Face exports it: a slice of the position buffer, zeros of ids' shape
        table = g.const(np.arange(512, dtype=np.int64)[None, :], g.fresh("position_ids"))
        length = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [ids]),
                                                    g.const(np.array(1, np.int64))], axis=0),
                                    g.int64s([0])])
        positions = g.op("Slice", [table, g.int64s([0]), length, g.int64s([1])])
        types = g.op("ConstantOfShape", [g.op("Shape", [ids])],
                     value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    pos = g.op("Gather", [g.weight((512, hidden), 1.0, "position_embeddings"), positions])
    typ = g.op("Gather", [g.weight((2, hidden), 1.0, "token_type_embeddings"), types])
    x = layer_norm(g, g.op("Add", [g.op("Add", [word, pos]), typ]), hidden, eps)
    for _ in range(layers):
        x = encoder_layer(
            g,
            x,
            batch=batch,
            seq=seq,
            hidden=hidden,
            heads=heads,
            ffn=4 * hidden,
            eps=eps,
            pre_norm=False,
            mask=mask,
        )
    g.output(x, [batch, seq, hidden], name="last_hidden_state")
    return g.model(f"BERT encoder, {layers} layers, hidden {hidden}, random weights")


# ---- ViT ----------------------------------------------------------------------------


def vit_small(
    opset: int = 17,
    batch: int = 1,
    image: int = 224,
    patch: int = 16,
    hidden: int = 192,
    layers: int = 4,
    heads: int = 3,
    cls_select: str | None = None,
    seed: int = 0,
) -> onnx.ModelProto:
    """A ViT (timm layout, DeiT-tiny sized): Conv patch embedding, Reshape/Transpose to
    tokens, class token Concat, position embedding Add, ``layers`` pre-norm encoder
    layers, final LayerNorm, the class token picked and a Gemm head of 1000.

    At 224x224 with patch 16 there are 197 tokens. ``cls_select`` is ``"gather"``
    (``x[:, 0]``, the default at opset 17) or ``"slice"`` (Slice + Squeeze, the default
    before).
    """
    eps = 1e-6
    if cls_select is None:
        cls_select = "gather" if opset >= 17 else "slice"
    grid = image // patch
    tokens = grid * grid + 1
    g = GraphBuilder("vit_small", opset, seed)
    x = g.input("input", [batch, 3, image, image])
    fan_in = 3 * patch * patch
    w = g.weight((hidden, 3, patch, patch), 1.0 / math.sqrt(fan_in), "patch_W")
    b = g.const(g.normal((hidden,), 0.02), g.fresh("patch_B"))
    x = g.op(
        "Conv",
        [x, w, b],
        kernel_shape=[patch, patch],
        strides=[patch, patch],
        pads=[0, 0, 0, 0],
        dilations=[1, 1],
        group=1,
    )
    x = g.op("Reshape", [x, g.int64s([batch, hidden, grid * grid])])
    x = g.op("Transpose", [x], perm=[0, 2, 1])
    cls = g.op(
        "Expand", [g.weight((1, 1, hidden), 0.02, "cls_token"), g.int64s([batch, 1, hidden])]
    )
    x = g.op("Concat", [cls, x], axis=1)
    x = g.op("Add", [x, g.weight((1, tokens, hidden), 0.02, "pos_embed")])
    for _ in range(layers):
        x = encoder_layer(
            g,
            x,
            batch=batch,
            seq=tokens,
            hidden=hidden,
            heads=heads,
            ffn=4 * hidden,
            eps=eps,
            pre_norm=True,
        )
    x = layer_norm(g, x, hidden, eps)
    if cls_select == "gather":
        x = g.op("Gather", [x, g.const(np.asarray(0, dtype=np.int64))], axis=1)
    elif cls_select == "slice":
        x = g.op("Slice", [x, g.int64s([0]), g.int64s([1]), g.int64s([1])])
        x = g.op("Squeeze", [x, g.int64s([1])])
    else:
        raise ValueError(f"cls_select must be 'gather' or 'slice', got {cls_select!r}")
    w_head = g.weight((1000, hidden), 1.0 / math.sqrt(hidden), "head_W")
    b_head = g.const(g.normal((1000,), 0.01), g.fresh("head_B"))
    g.output(g.op("Gemm", [x, w_head, b_head], transB=1), [batch, 1000], name="logits")
    return g.model(f"ViT {image}px patch {patch}, {layers} layers, hidden {hidden}")


# ---- LSTM ---------------------------------------------------------------------------


def lstm_model(
    opset: int = 17,
    batch: int = 1,
    seq: int = 32,
    input_size: int = 64,
    hidden: int = 128,
    classes: int = 10,
    seed: int = 0,
) -> onnx.ModelProto:
    """One forward LSTM layer (the ONNX LSTM op) on ``input`` [seq, batch, input_size];
    the last hidden state goes through a Gemm head to ``classes`` logits."""
    g = GraphBuilder("lstm_model", opset, seed)
    x = g.input("input", [seq, batch, input_size])
    scale = 1.0 / math.sqrt(hidden)
    w = g.const(g.uniform((1, 4 * hidden, input_size), -scale, scale), "lstm_W")
    r = g.const(g.uniform((1, 4 * hidden, hidden), -scale, scale), "lstm_R")
    bias = g.const(g.uniform((1, 8 * hidden), -scale, scale), "lstm_B")
    _, y_h, _ = g.op("LSTM", [x, w, r, bias], n_out=3, hidden_size=hidden, direction="forward")
    last = g.op("Squeeze", [y_h, g.int64s([0])])
    w_head = g.weight((classes, hidden), 1.0 / math.sqrt(hidden), "head_W")
    b_head = g.const(g.normal((classes,), 0.01), g.fresh("head_B"))
    g.output(g.op("Gemm", [last, w_head, b_head], transB=1), [batch, classes], name="logits")
    return g.model(f"LSTM({input_size} -> {hidden}) + Gemm({classes}), seq {seq}")


# ---- a detector with NonMaxSuppression at the end -------------------------------------


def _anchors(grid: int, per_cell: int) -> np.ndarray:
    """``[grid * grid * per_cell, 4]`` anchors (center y, center x, height, width) in [0, 1]:
    one square and wider/taller ones per cell, the cells row-major."""
    sizes = [(0.3, 0.3), (0.25, 0.4), (0.4, 0.25), (0.5, 0.5)][:per_cell]
    rows = [((i + 0.5) / grid, (j + 0.5) / grid, h, w)
            for i in range(grid) for j in range(grid) for h, w in sizes]
    return np.asarray(rows, dtype=np.float32)


def tiny_detector(
    opset: int = 17,
    batch: int | str = 1,
    image: int = 64,
    classes: int = 6,
    per_cell: int = 3,
    max_per_class: int = 20,
    iou: float = 0.45,
    score: float = 0.35,
    seed: int = 0,
) -> onnx.ModelProto:
    """An SSDlite-shaped detector: a strided conv backbone to an 8x8 grid (for 64x64
    images), box and class heads (1x1 convs), softmax scores without the background class,
    anchors decoded to corner boxes, NonMaxSuppression, and the kept boxes, scores and
    labels gathered with its indices, as torchvision's exported post-processing does. The
    outputs' first axis is the number of detections, known only once NMS has run."""
    g = GraphBuilder("tiny_detector", opset, seed)
    x = g.input("image", [batch, 3, image, image])
    h = relu6(g, conv_bn(g, x, 3, 16, 3, 2, bn=False))
    h = relu6(g, conv_bn(g, h, 16, 32, 3, 2, bn=False))
    h = relu6(g, conv_bn(g, h, 32, 32, 3, 2, bn=False))
    grid = image // 8
    count = grid * grid * per_cell

    def head(outputs: int) -> str:
        w = g.weight((per_cell * outputs, 32, 1, 1), 1.0 / math.sqrt(32), "head_W")
        y = g.op("Conv", [h, w, g.const(g.normal((per_cell * outputs,), 0.1))])
        y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
        return g.op("Reshape", [y, g.int64s([0, count, outputs])])

    deltas = head(4)
    logits = head(classes)
    probs = g.op("Softmax", [g.op("Mul", [logits, g.scalar(3.0)])], axis=-1)
    foreground = g.op("Slice", [probs, g.int64s([1]), g.int64s([classes]), g.int64s([2])])
    scores = g.op("Transpose", [foreground], perm=[0, 2, 1])
    anchors = _anchors(grid, per_cell)
    centers = g.op("Add", [g.const(anchors[:, :2]), g.op("Mul", [
        g.op("Slice", [deltas, g.int64s([0]), g.int64s([2]), g.int64s([2])]),
        g.const(0.1 * anchors[:, 2:])])])
    halves = g.op("Mul", [g.const(0.5 * anchors[:, 2:]), g.op("Exp", [g.op("Mul", [
        g.op("Slice", [deltas, g.int64s([2]), g.int64s([4]), g.int64s([2])]),
        g.scalar(0.2)])])])
    boxes = g.op("Concat", [g.op("Sub", [centers, halves]), g.op("Add", [centers, halves])],
                 axis=2)
    selected = g.op("NonMaxSuppression", [boxes, scores, g.int64s([max_per_class]),
                                          g.const(np.asarray([iou], np.float32)),
                                          g.const(np.asarray([score], np.float32))])
    where = g.op("Gather", [selected, g.int64s([0, 2])], axis=1)
    detections = "detections"
    g.output(g.op("GatherND", [boxes, where]), [detections, 4], name="boxes")
    g.output(g.op("GatherND", [scores, selected]), [detections], name="scores")
    label = g.op("Gather", [selected, g.const(np.asarray(1, np.int64))], axis=1)
    g.output(g.op("Add", [label, g.const(np.asarray(1, np.int64))]), [detections],
             TensorProto.INT64, name="labels")
    return g.model(f"tiny detector: {image}x{image} images, {count} anchors, {classes - 1} "
                   f"classes, NonMaxSuppression(max {max_per_class}, iou {iou}, score {score})")


# ---- registry and inputs ------------------------------------------------------------

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenetv2": mobilenetv2,
    "mobilenetv3": mobilenetv3,
    "bert_encoder": bert_encoder,
    "vit_small": vit_small,
    "lstm_model": lstm_model,
    "tiny_detector": tiny_detector,
}


def input_shapes(model: onnx.ModelProto, dims: dict[str, int] | None = None
                 ) -> dict[str, tuple[int, ...]]:
    """``{input name: static shape}`` of the graph's inputs (for ``from_onnx(shape=...)``);
    ``dims`` gives the sizes of symbolic axes by their dim_param."""
    dims = dims or {}
    return {
        i.name: tuple(dims[d.dim_param] if d.dim_param else d.dim_value
                      for d in i.type.tensor_type.shape.dim)
        for i in model.graph.input
    }


def sample_inputs(model: onnx.ModelProto, seed: int = 0, dims: dict[str, int] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded random feeds for every graph input (``dims``: sizes of symbolic axes).

    Floats are standard normal; integer inputs named ``*mask`` keep the first three
    quarters of each row (1) and mask the rest (0); other integer inputs are uniform in
    ``[0, n)``, ``n`` read from the model's metadata (``tensorsmith.bench.int_range.*``).
    """
    rng = np.random.default_rng(seed)
    ranges = {
        p.key[len(INT_RANGE_KEY) :]: int(p.value)
        for p in model.metadata_props
        if p.key.startswith(INT_RANGE_KEY)
    }
    feeds: dict[str, np.ndarray] = {}
    for info in model.graph.input:
        shape = input_shapes(model, dims)[info.name]
        dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[info.name] = rng.standard_normal(shape).astype(dtype)
        elif info.name.endswith("mask"):
            mask = np.ones(shape, dtype=dtype)
            mask[..., (3 * shape[-1]) // 4 :] = 0
            feeds[info.name] = mask
        else:
            feeds[info.name] = rng.integers(0, ranges.get(info.name, 2), shape).astype(dtype)
    return feeds


def matmul_model(n: int, opset: int = 17, m: int | None = None, k: int | None = None,
                 weight: np.ndarray | None = None) -> onnx.ModelProto:
    """One MatMul ``c = a @ b`` of float32 ``a`` [m, k] and ``b`` [k, n] (square n x n by
    default): the GEMM benchmark. ``b`` is a second input, or with ``weight`` a constant
    (a layer's weights, which a compiler may store in another layout)."""
    m, k = m or n, k or n
    g = GraphBuilder(f"matmul_{m}x{n}x{k}", opset)
    b = g.input("b", [k, n]) if weight is None else g.const(weight, "b")
    g.output(g.op("MatMul", [g.input("a", [m, k]), b]), [m, n], name="c")
    return g.model(f"c = a @ b, float32 [{m}, {k}] @ [{k}, {n}]")
