"""Exports the two small PyTorch models that test_symbolic_import.py imports, with
dynamic batch and sequence axes, into this folder. torch is a benchmark dependency only,
so the tests read these files instead of exporting. Run it again after changing a model:

    python packages/frontend-onnx/tests/data/export_torch_models.py
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

import onnx

HERE = Path(__file__).resolve().parent


def export(torch: Any, module: Any, args: tuple, names: list[str], axes: dict
           ) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buffer, dynamo=False, opset_version=17,
                          input_names=names, output_names=["y"], dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


def encoder_layer(torch: Any) -> Any:
    """torch's encoder layer, called with its input alone (tracing it directly passes a
    tensor where scaled_dot_product_attention wants a bool)."""

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.TransformerEncoderLayer(
                d_model=32, nhead=2, dim_feedforward=64, batch_first=True, dropout=0.0)

        def forward(self, x: Any) -> Any:
            return self.layer(x)

    return Encoder().eval()


def tiny_bert(torch: Any) -> Any:
    """Embeddings with positions from ``arange(seq)``, masked multi-head self-attention
    whose heads are split by reshapes to the input's own sizes, a GELU feed-forward."""
    nn = torch.nn

    class TinyBert(nn.Module):
        def __init__(self, vocab: int = 50, d: int = 32, heads: int = 2) -> None:
            super().__init__()
            self.h, self.dh = heads, d // heads
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(64, d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))

        def forward(self, ids: Any, mask: Any) -> Any:
            b, s = ids.shape
            x = self.tok(ids) + self.pos(torch.arange(s).unsqueeze(0).expand(b, -1))
            q, k, v = (t.reshape(b, s, self.h, self.dh).transpose(1, 2)
                       for t in self.qkv(x).chunk(3, dim=-1))
            scores = q @ k.transpose(-1, -2) / self.dh ** 0.5
            keep = mask[:, None, None, :].expand(-1, self.h, s, -1)
            scores = scores.masked_fill(keep == 0, -1e4)
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
            x = self.ln1(x + self.out(ctx))
            return self.ln2(x + self.ff(x))

    return TinyBert().eval()


def main() -> None:
    import torch

    torch.manual_seed(0)
    encoder = export(torch, encoder_layer(torch), (torch.randn(2, 5, 32),), ["x"],
                     {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    onnx.save(encoder, HERE / "torch_encoder_layer.onnx")
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 5))
    axes = {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"},
            "y": {0: "batch", 1: "seq"}}
    bert = export(torch, tiny_bert(torch), (ids, torch.ones_like(ids)), ["ids", "mask"], axes)
    onnx.save(bert, HERE / "torch_tiny_bert.onnx")


if __name__ == "__main__":
    main()
