"""Whole models through the full stack, against ONNX Runtime.

Each case builds an ONNX model in code (bench/models.py: ResNet-18/50, MobileNetV2, a
BERT encoder, a small ViT, an LSTM), imports it with ``from_onnx``, compiles it for
``llvm``, runs the artifact and compares every output with ONNX Runtime's:
``max |ours - ort| / max |ort| < 1e-4``.

Opset 13 and 17 variants differ in what the exporter writes (LayerNormalization op vs
its decomposition, Conv + BatchNormalization vs folded weights, Gather vs Slice), and
some use batch 2 or a smaller image to keep the whole file to a few minutes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from model_testing import Case, assert_matches, onnx_model, reference, run_on

CASES = [
    Case("resnet18", 13, {"bn": True, "image": 112, "batch": 2}),
    Case("resnet18", 17, {"image": 224}),
    Case("resnet50", 13, {"bn": True, "image": 112}),
    Case("resnet50", 17, {"image": 224}),  # the benchmark model
    Case("mobilenetv2", 13, {"bn": True, "image": 112}),
    Case("mobilenetv2", 17, {"image": 224}),
    Case("bert_encoder", 13, {"batch": 2}),  # LayerNorm decomposed, as torch exports it
    Case("bert_encoder", 17, {}),  # the LayerNormalization op
    Case("vit_small", 13, {"image": 112, "batch": 2}),  # class token by Slice + Squeeze
    Case("vit_small", 17, {"image": 224}),  # class token by Gather; 197 tokens
    Case("lstm_model", 13, {}),
    Case("lstm_model", 17, {}),
]


@pytest.fixture(params=CASES, ids=lambda c: c.id)
def case(request: pytest.FixtureRequest) -> Case:
    return request.param


def test_model_is_valid_and_runs_in_onnxruntime(case: Case) -> None:
    """The builders' own check: valid ONNX, and a reference output that is finite and
    not degenerate (so the comparison below means something)."""
    model = onnx_model(case)
    onnx.checker.check_model(model, full_check=True)
    _, outputs = reference(case)
    assert [tuple(o.shape) for o in outputs] == [
        tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output
    ]
    for out in outputs:
        assert np.isfinite(out).all()
        assert out.std() > 1e-3


def test_matches_onnxruntime(case: Case, tmp_path: Path) -> None:
    assert_matches(case, run_on(case, "llvm", tmp_path))
