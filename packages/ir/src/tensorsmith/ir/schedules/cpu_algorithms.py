"""Which algorithm computes a convolution by default on a CPU: the direct loop nest, or
Winograd's minimal filtering (ops/winograd.py) where its products are large enough.

Winograd trades multiplications for two transforms and ``alpha^2`` matrix products of
(tiles x input channels) by (input channels x output channels). F(4x4, 3x3) does 4x fewer
multiplications than the direct loop nest, F(2x2, 3x3) 2.25x, but each needs enough
tiles to fill its products' register tiles: at 7x7 (16 tiles of 2x2, 4 of 4x4) both
lost to the direct loop nest on ResNet's layers, and F(4x4) at 14x14 (16 tiles). So the
default is the largest tile with at least :data:`MIN_TILES` tiles. Whole models on Zen 3
(AVX2), interleaved with ONNX Runtime (its time / ours): ResNet-18 0.95 direct, 1.12
with F(2x2) only, 1.21 with F(4x4) then F(2x2); ResNet-50 0.91, 0.97, 1.01. The choice
is the default of the tuner's ``algorithm`` knob, which tries the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorsmith.runtime.winograd import TRANSFORMS

from ..dtypes import accumulator
from ..op_registry import Attrs
from ..ops.winograd import eligible

#: Winograd transforms by default, largest output tile first.
DEFAULT_TRANSFORMS: tuple[str, ...] = ("winograd_f4_3", "winograd_f2_3")
#: Tiles (rows of each product) a transform needs to be the default.
MIN_TILES = 32
#: Input and output channels a convolution needs: the products' depth, and the width
#: over which each tile's transforms are amortized (the input transform's work grows
#: with the input channels, the products' with both). DenseNet's 128 -> 32 layers stay
#: direct.
MIN_CHANNELS = 64


def default_conv_transform(attrs: Attrs, input_shape: Sequence[int],
                           weight_shape: Sequence[int], output_shape: Sequence[int],
                           dtype: str) -> str | None:
    """The weight transform (:data:`DEFAULT_TRANSFORMS`) a convolution with constant
    weights runs by default, or None for the direct loop nest. Only convolutions on
    channel-blocked activations qualify: there the input transform's vectors are a
    block's contiguous lanes. 16-bit inputs qualify too: their transforms and products
    run in float32 (ops/winograd.py)."""
    if len(input_shape) != 5 or not attrs.get("block") or accumulator(dtype) != "float32":
        return None
    if min(weight_shape[0], weight_shape[1]) < MIN_CHANNELS:
        return None
    batch, _, height, width = output_shape[:4]
    for transform in DEFAULT_TRANSFORMS:
        m = TRANSFORMS[transform].m
        tiles = batch * -(-height // m) * -(-width // m)
        if eligible(attrs, weight_shape, transform) and tiles >= MIN_TILES:
            return transform
    return None
