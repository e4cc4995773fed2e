"""PyTorch modules with the architectures of bench/models.py, for the eager-mode baseline.

The GPU benchmark (bench/gpu_vulkan.py) times each model in PyTorch eager next to
tensorsmith's Vulkan artifact, so these mirror the ONNX builders layer for layer: the
torchvision ResNet-18, ResNet-50 and MobileNetV2 (Conv + BatchNorm in eval mode, as a user runs
them), and the BERT encoder (post-norm layers, exact GELU, additive attention mask,
attention through ``scaled_dot_product_attention``, as Hugging Face's default does).

Parameters are registered in the order the ONNX builders create their initializers, so
:func:`load_onnx_weights` can copy a builder's seeded weights in by position: that is how
``gpu_vulkan.py build`` checks, on the CPU, that a module computes what its ONNX model
computes. On the GPU host the modules keep their random initialization: timing does not
depend on the values.

Only torch, onnx and numpy are needed (onnx for the weight copy and the layer table of
bench/models.py): this file runs on the GPU host.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import nn

from bench.models import MOBILENETV2_SETTINGS

__all__ = ["TORCH_MODELS", "build_torch_model", "load_onnx_weights"]


# ---- MLP (examples/mlp.onnx) --------------------------------------------------------


class MLP(nn.Module):
    """784 -> 256 -> 128 -> 10 with ReLUs and a softmax: the example model."""

    def __init__(self, sizes: Sequence[int] = (784, 256, 128, 10)) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.relu(x) if i + 1 < len(self.layers) else torch.softmax(x, dim=-1)
        return x


# ---- convolutional ------------------------------------------------------------------


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    """Conv without bias, then BatchNorm (eps 1e-5): ``layers.conv_bn(bn=True)``."""
    conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(cout, eps=1e-5))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, planes, 3, stride)
        self.conv2 = conv_bn(planes, planes, 3)
        self.downsample = (
            conv_bn(cin, planes, 1, stride) if stride != 1 or cin != planes else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv2(torch.relu(self.conv1(x)))
        return torch.relu(out + self.downsample(x))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [conv_bn(cin, hidden, 1), nn.ReLU6()]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6()]
        layers.append(conv_bn(hidden, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2, width 1.0 (the classifier's dropout is a no-op in eval)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 32, 3, 2), nn.ReLU6()]
        cin = 32
        for expand, cout, repeats, first_stride in MOBILENETV2_SETTINGS:
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, first_stride if i == 0 else 1, expand))
                cin = cout
        layers += [conv_bn(cin, 1280, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.fc(torch.flatten(x, 1))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (the stride: v1.5, as torchvision), 1x1 expand by 4; the
    projection shortcut registered last, as ``models._bottleneck`` creates it."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = conv_bn(cin, planes, 1)
        self.conv2 = conv_bn(planes, planes, 3, stride)
        self.conv3 = conv_bn(planes, cout, 1)
        self.downsample = (
            conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return torch.relu(self.conv3(out) + self.downsample(x))


class ResNet(nn.Module):
    """7x7/2 stem, 3x3/2 max pool, stages of ``counts`` blocks (64, 128, 256, 512 planes
    times ``block.expansion`` out; the first block of each later stage strided), average
    pool, fc: ResNet-18 and ResNet-50 differ only in ``block`` and ``counts``."""

    def __init__(
        self, block: type[BasicBlock | Bottleneck], counts: Sequence[int], classes: int
    ) -> None:
        super().__init__()
        self.stem = conv_bn(3, 64, 7, 2)
        blocks: list[nn.Module] = []
        cin = 64
        for stage, count in enumerate(counts):
            planes = 64 * 2**stage
            for i in range(count):
                blocks.append(block(cin, planes, 2 if (i == 0 and stage > 0) else 1))
                cin = planes * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.stem(x)), 3, 2, 1)
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet18(ResNet):
    """Basic blocks [2, 2, 2, 2], fc 1000."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__(BasicBlock, (2, 2, 2, 2), classes)


class ResNet50(ResNet):
    """Bottleneck blocks [3, 4, 6, 3], fc 1000."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__(Bottleneck, (3, 4, 6, 3), classes)


# ---- BERT ---------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, s, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask
        )
        return self.out(ctx.transpose(1, 2).reshape(b, s, h))


class EncoderLayer(nn.Module):
    """Post-norm: ``LN(x + attn(x))``, then ``LN(x + fc2(gelu(fc1(x))))``."""

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, mask))
        return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))


class BertEncoder(nn.Module):
    """Word + position + token-type embeddings, LayerNorm, ``layers`` encoder layers."""

    def __init__(
        self,
        seq: int = 128,
        layers: int = 4,
        hidden: int = 256,
        heads: int = 4,
        vocab: int = 30522,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(512, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, heads, 4 * hidden, eps) for _ in range(layers)
        )
        self.register_buffer("positions", torch.arange(seq)[None, :], persistent=False)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.word(input_ids) + self.position(self.positions)
        x = self.norm(x + self.token_type(torch.zeros_like(self.positions)))
        mask = None
        if attention_mask is not None:  # Hugging Face's additive mask, [b, 1, 1, s]
            # in the activations' type: scaled_dot_product_attention takes no float32
            # mask for float16 queries (the module in half precision, gpu_vulkan.py)
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x


# ---- registry and weights -----------------------------------------------------------

TORCH_MODELS: dict[str, type[nn.Module]] = {
    "mlp": MLP,
    "resnet18": ResNet18,
    "resnet50": ResNet50,
    "mobilenetv2": MobileNetV2,
    "bert_encoder": BertEncoder,
}


def build_torch_model(name: str, **kwargs: Any) -> nn.Module:
    """The eval-mode module mirroring ``name``; ``kwargs`` are the builder's size
    arguments that change parameter shapes (``seq``, ``layers``... for the encoder)."""
    return TORCH_MODELS[name](**kwargs).eval()


def load_onnx_weights(module: nn.Module, onnx_model: Any) -> None:
    """Copy the ONNX model's weights into ``module`` by position.

    The weights are the float initializers of rank >= 1 (scalars and int64 shapes are
    graph constants, not parameters); each pairs with the next parameter or BatchNorm
    statistic of ``module`` in registration order. An initializer read as MatMul's
    right-hand side is stored [in, out], which torch's Linear keeps as [out, in].
    """
    from onnx import numpy_helper

    graph = onnx_model.graph
    matmul_rhs = {n.input[1] for n in graph.node if n.op_type == "MatMul"}
    weights = [
        (init.name, numpy_helper.to_array(init))
        for init in graph.initializer
        if init.data_type == 1 and len(init.dims) >= 1  # float32
    ]
    targets = [
        (name, t)
        for name, t in module.state_dict(keep_vars=True).items()
        if not name.endswith("num_batches_tracked")
    ]
    if len(weights) != len(targets):
        raise ValueError(f"{len(weights)} ONNX weights for {len(targets)} torch tensors")
    with torch.no_grad():
        for (onnx_name, array), (torch_name, tensor) in zip(weights, targets):
            if onnx_name in matmul_rhs:
                array = array.T
            if tuple(array.shape) != tuple(tensor.shape):
                raise ValueError(
                    f"{onnx_name} {array.shape} does not fit {torch_name} {tuple(tensor.shape)}"
                )
            tensor.copy_(torch.tensor(array))
