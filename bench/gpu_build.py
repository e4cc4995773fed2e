"""The build half of the GPU model benchmark: Vulkan artifacts plus what ``run`` checks.

The GPU host may have no compiler, ONNX Runtime's reference is computed here, and the
weights never travel twice; so for each model this writes, into one folder:

    NAME.tsm    the artifact for target "vulkan"
    NAME.npz    the inputs (``in.<input name>``) and ONNX Runtime's outputs (``out.<i>``)
    NAME.json   what ``run`` needs to know: input order, the torch module's arguments, and
                the result of checking that module against the ONNX model here (below)

When torch is importable here, the torch module that ``run`` times (bench/torch_models.py)
is given the ONNX model's weights and run on the CPU against the same reference, so the
eager baseline is known to compute the same function as the artifact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from bench.measure import relative_error
from bench.models import MODELS, input_shapes, sample_inputs

__all__ = ["GPU_MODELS", "ModelSpec", "build_models"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ModelSpec:
    """One benchmark model: its ONNX builder's arguments (full size and a small size for
    trying the benchmark on a CPU Vulkan driver) and the torch module's arguments."""

    name: str
    kwargs: dict[str, Any]
    small: dict[str, Any] = field(default_factory=dict)
    torch_kwargs: tuple[str, ...] = ()  # builder arguments the torch module takes too

    def onnx_model(self, small: bool) -> onnx.ModelProto:
        if self.name == "mlp":
            return onnx.load(ROOT / "examples" / "mlp.onnx")
        return MODELS[self.name](**{**self.kwargs, **(self.small if small else {})})

    def torch_arguments(self, small: bool) -> dict[str, Any]:
        kwargs = {**self.kwargs, **(self.small if small else {})}
        return {k: kwargs[k] for k in self.torch_kwargs if k in kwargs}


# Conv + BatchNormalization kept in the ONNX graphs (bn=True): the same layers torch runs
# in eager mode; folding them is the compiler's job.
GPU_MODELS = [
    ModelSpec("mlp", {}),
    ModelSpec("resnet18", {"opset": 17, "bn": True, "image": 224}, {"image": 64}),
    ModelSpec("mobilenetv2", {"opset": 17, "bn": True, "image": 224}, {"image": 64}),
    ModelSpec("bert_encoder", {"opset": 17, "seq": 128}, {"seq": 32}, ("seq",)),
]


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Input shapes, with examples/mlp.onnx's symbolic batch set to 1."""
    return {k: tuple(d or 1 for d in v) for k, v in input_shapes(model).items()}


def _mlp_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in _static_shapes(model).items()}


def _torch_mirror_error(
    spec: ModelSpec,
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    want: np.ndarray,
    small: bool,
) -> float | None:
    """Relative error of the torch module given the ONNX weights, or None without torch."""
    try:
        import torch

        from bench.torch_models import build_torch_model, load_onnx_weights
    except ImportError:
        return None
    module = build_torch_model(spec.name, **spec.torch_arguments(small))
    load_onnx_weights(module, model)
    with torch.inference_mode():
        got = module(*(torch.from_numpy(feeds[i.name]) for i in model.graph.input))
    return relative_error(got.numpy(), want)


def build_one(spec: ModelSpec, outdir: Path, small: bool) -> dict[str, Any]:
    """Compile one model for vulkan and write its artifact, feeds, reference and notes."""
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import build

    model = spec.onnx_model(small)
    shapes = _static_shapes(model)
    feeds = _mlp_inputs(model) if spec.name == "mlp" else sample_inputs(model, seed=1)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    mod, params = from_onnx(model, shape=shapes)
    build(mod, target="vulkan", params=params).export_library(outdir / f"{spec.name}.tsm")
    arrays = {f"in.{k}": v for k, v in feeds.items()}
    arrays.update({f"out.{i}": w for i, w in enumerate(want)})
    np.savez(outdir / f"{spec.name}.npz", **arrays)
    note = {
        "name": spec.name,
        "inputs": [i.name for i in model.graph.input],
        "shapes": {k: list(v) for k, v in shapes.items()},
        "builder": {**spec.kwargs, **(spec.small if small else {})},
        "torch_kwargs": spec.torch_arguments(small),
        "torch_mirror_rel_err": _torch_mirror_error(spec, model, feeds, want[0], small),
    }
    (outdir / f"{spec.name}.json").write_text(json.dumps(note, indent=1) + "\n")
    return note


def build_models(outdir: Path, names: list[str] | None = None, small: bool = False) -> None:
    """Build ``names`` (default: all of GPU_MODELS) into ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    for spec in GPU_MODELS:
        if names is None or spec.name in names:
            note = build_one(spec, outdir, small)
            mirror = note["torch_mirror_rel_err"]
            check = "torch not installed" if mirror is None else f"rel err {mirror:.2g}"
            print(f"built {spec.name} {note['shapes']}; torch module vs ONNX: {check}")
