"""What the whole-model tests share: a case (a builder of bench.models and its arguments),
its ONNX model and ONNX Runtime reference built once per process, compiling and running it
on one target, and the comparison.

The tolerance is ``max |ours - ort| / max |ort| < 1e-4`` on every output, for every target:
the same check whether the model ran on the CPU (llvm), Vulkan or OpenCL.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import tensorsmith.runtime as rt
from bench.measure import relative_error
from bench.models import MODELS, input_shapes, sample_inputs
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, build

__all__ = [
    "RTOL",
    "Case",
    "assert_matches",
    "device_of",
    "onnx_model",
    "reference",
    "run_on",
]

RTOL = 1e-4  # max abs error relative to the largest output magnitude

_KwargItems = tuple[tuple[str, Any], ...]


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

    @property
    def key(self) -> tuple[str, int, _KwargItems]:
        """A hashable form (``kwargs`` is a dict), for the per-process caches."""
        return self.builder, self.opset, tuple(sorted(self.kwargs.items()))


def onnx_model(case: Case) -> onnx.ModelProto:
    """The case's model, built once per process (weights seeded, so every worker agrees)."""
    return _onnx_model(*case.key)


def reference(case: Case) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Seeded inputs and ONNX Runtime's outputs for them, computed once per process."""
    return _reference(*case.key)


@functools.cache
def _onnx_model(builder: str, opset: int, kwargs: _KwargItems) -> onnx.ModelProto:
    return MODELS[builder](opset=opset, **dict(kwargs))


@functools.cache
def _reference(
    builder: str, opset: int, kwargs: _KwargItems
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    model = _onnx_model(builder, opset, kwargs)
    feeds = sample_inputs(model, seed=1)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return feeds, session.run(None, feeds)


def device_of(target: str) -> str:
    """The runtime device that runs ``target``'s artifacts (the first of its kind), as the
    target's plug-in says."""
    return Target.parse(target).info.device


def run_on(case: Case, target: str, tmp_path: Path) -> list[np.ndarray]:
    """Import the case's model, compile it for ``target``, export the artifact, load it on
    that target's device and run it on the reference inputs."""
    model = onnx_model(case)
    feeds, _ = reference(case)
    mod, params = from_onnx(model, shape=input_shapes(model))
    artifact = tmp_path / f"{case.builder}{Target.parse(target).info.suffix}"
    build(mod, target=target, params=params).export_library(artifact)
    with rt.load(artifact, device=device_of(target)) as module:
        return module.run(feeds)


def assert_matches(case: Case, got: list[np.ndarray]) -> None:
    """Every output has ONNX Runtime's shape and is within ``RTOL`` of it."""
    model = onnx_model(case)
    _, want = reference(case)
    assert len(got) == len(want)
    for out, g, w in zip(model.graph.output, got, want):
        assert g.shape == w.shape, f"{out.name}: shape {g.shape}, ONNX Runtime {w.shape}"
        err = relative_error(g, w)
        assert err < RTOL, f"{out.name}: max abs error / max abs output = {err:.3g}"
