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

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the model builders live in bench/, shared with the benchmark
    sys.path.insert(0, str(ROOT))

from bench.measure import relative_error  # noqa: E402
from bench.models import MODELS, input_shapes, sample_inputs  # noqa: E402

RTOL = 1e-4  # max abs error relative to the largest output magnitude


@dataclass(frozen=True)
class Case:
    """One model variant: a builder of bench.models and its keyword arguments."""

    builder: str
    opset: int
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        extra = "-".join(f"{k}{'' if v is True else v}" for k, v in self.kwargs.items())
        return f"{self.builder}-op{self.opset}" + (f"-{extra}" if extra else "")


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


CASES_BY_ID = {c.id: c for c in CASES}


def onnx_model(case: Case) -> onnx.ModelProto:
    """The case's model, built once per process (weights seeded, so every worker agrees)."""
    return _onnx_model(case.id)


def reference(case: Case) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Seeded inputs and ONNX Runtime's outputs for them, computed once per process."""
    return _reference(case.id)


@functools.cache
def _onnx_model(case_id: str) -> onnx.ModelProto:
    case = CASES_BY_ID[case_id]
    return MODELS[case.builder](opset=case.opset, **case.kwargs)


@functools.cache
def _reference(case_id: str) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    model = _onnx_model(case_id)
    feeds = sample_inputs(model, seed=1)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return feeds, session.run(None, feeds)


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
    model = onnx_model(case)
    feeds, want = reference(case)
    mod, params = from_onnx(model, shape=input_shapes(model))
    lib = build(mod, target="llvm", params=params)
    artifact = tmp_path / f"{case.builder}.so"
    lib.export_library(artifact)
    with rt.load(artifact, device="cpu") as m:
        got = m.run(feeds)
    assert len(got) == len(want)
    for out, g, w in zip(model.graph.output, got, want):
        assert g.shape == w.shape, f"{out.name}: shape {g.shape}, ONNX Runtime {w.shape}"
        err = relative_error(g, w)
        assert err < RTOL, f"{out.name}: max abs error / max abs output = {err:.3g}"
