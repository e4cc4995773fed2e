"""ResNet-18, MobileNetV2 and the BERT encoder on the GPU targets, against ONNX Runtime.

The same cases and check as tests/test_models.py (``model_testing``), compiled for
``vulkan`` (run on Mesa's lavapipe in CI) and ``opencl`` (run on PoCL). The MLP is covered
on both targets by the codegens' own tests.

Nothing here skips: a missing Vulkan or OpenCL driver (or the ``vulkan`` / ``pyopencl``
package) makes ``rt.load`` raise, and the test fails with the install hint in its message.

Sizes are smaller than the CPU cases: lavapipe and PoCL run on the CI machine's 2 cores,
and the six cases together must stay at a few minutes. ResNet-18 and MobileNetV2 use
both exporter forms (BatchNormalization folded, and kept as its own op), the encoder the
LayerNormalization op with an attention mask.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from model_testing import Case, assert_matches, run_on

GPU_CASES = [
    Case("resnet18", 17, {"image": 112}),
    Case("mobilenetv2", 13, {"bn": True, "image": 112}),
    Case("bert_encoder", 17, {"seq": 64}),
]

TARGETS = [
    pytest.param("vulkan", marks=pytest.mark.vulkan),
    pytest.param("opencl", marks=pytest.mark.opencl),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.id)
def test_matches_onnxruntime_on_gpu_target(case: Case, target: str, tmp_path: Path) -> None:
    assert_matches(case, run_on(case, target, tmp_path))
