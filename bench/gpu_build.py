"""The build half of the GPU model benchmark: Vulkan artifacts plus what ``run`` checks.

The GPU host may have no compiler, ONNX Runtime's reference is computed here, and the
weights never travel twice; so for each model this writes, into one folder:

    NAME.tsm    the artifact for target "vulkan"
    NAME.npz    the inputs (``in.<input name>``) and ONNX Runtime's outputs (``out.<i>``)
    NAME.json   what ``run`` needs to know: input order, the torch module's arguments, and
                the result of checking that module against the ONNX model here (below)

With ``precisions`` naming ``fp16``, a model is also built with ``precision="fp16"``
(passes/precision.py) as NAME_fp16.*: by default for :data:`COOP_TARGET`, the H100's
cooperative matrices and float16 arithmetic, where float16 products are tensorized. Its
reference stays ONNX Runtime's float32 output, so its error is the whole cost of the
precision; its note says ``"precision": "fp16"`` and names the model (``"model"``), so
``run`` times the torch module in half precision.

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

__all__ = ["COOP_TARGET", "GPU_MODELS", "ModelSpec", "build_models", "default_target"]

ROOT = Path(__file__).resolve().parent.parent

#: The GPU the float16 models are built for (an H100: cooperative matrices 16x16x16 of
#: float16 with float32 accumulators, shaderFloat16); the float32 models take plain
#: ``vulkan``, which every device runs. A CPU driver without cooperative matrices
#: (lavapipe) refuses this target's artifacts at load: ``build --target vulkan`` there.
COOP_TARGET = ("vulkan -cooperative-matrix=16x16x16,16x8x16,16x8x8 -subgroup-size=32 "
               "-shared-memory=49152 -max-invocations=1024 -float16-arithmetic=1")


def default_target(precision: str) -> str:
    """The target a model of ``precision`` is built for unless ``build --target`` says."""
    return COOP_TARGET if precision == "fp16" else "vulkan"


def artifact_name(model: str, precision: str) -> str:
    """``resnet50`` for float32, ``resnet50_fp16`` for float16: both fit one folder."""
    return model if precision == "fp32" else f"{model}_{precision}"


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
    ModelSpec("resnet50", {"opset": 17, "bn": True, "image": 224}, {"image": 64}),
    ModelSpec("bert_encoder", {"opset": 17, "seq": 128}, {"seq": 32}, ("seq",)),
]


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Input shapes, with examples/mlp.onnx's symbolic batch set to 1."""
    symbolic = {d.dim_param: 1 for i in model.graph.input
                for d in i.type.tensor_type.shape.dim if d.dim_param}
    return input_shapes(model, symbolic)


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


def build_one(
    spec: ModelSpec,
    outdir: Path,
    small: bool,
    precision: str = "fp32",
    target: str | None = None,
) -> dict[str, Any]:
    """Compile one model in ``precision`` for ``target`` (default: ``default_target``)
    and write its artifact, feeds, reference and notes under ``artifact_name``."""
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import build

    target = target or default_target(precision)
    name = artifact_name(spec.name, precision)
    model = spec.onnx_model(small)
    shapes = _static_shapes(model)
    feeds = _mlp_inputs(model) if spec.name == "mlp" else sample_inputs(model, seed=1)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    mod, params = from_onnx(model, shape=shapes)
    lib = build(mod, target=target, params=params, precision=precision)
    lib.export_library(outdir / f"{name}.tsm")
    arrays = {f"in.{k}": v for k, v in feeds.items()}
    arrays.update({f"out.{i}": w for i, w in enumerate(want)})
    np.savez(outdir / f"{name}.npz", **arrays)
    note = {
        "name": name,
        "model": spec.name,
        "precision": precision,
        "target": target,
        "tensorized": _tensorized(lib),
        "inputs": [i.name for i in model.graph.input],
        "shapes": {k: list(v) for k, v in shapes.items()},
        "builder": {**spec.kwargs, **(spec.small if small else {})},
        "torch_kwargs": spec.torch_arguments(small),
        "torch_mirror_rel_err": _torch_mirror_error(spec, model, feeds, want[0], small),
    }
    (outdir / f"{name}.json").write_text(json.dumps(note, indent=1) + "\n")
    return note


def _tensorized(lib: Any) -> list[int]:
    """Kernels tensorized / kernels computing a matmul or convolution: whether the
    products reached the cooperative matrices (``steps`` of each kernel)."""
    steps = [f.attrs.get("steps") or [] for f in lib.funcs]
    products = [s for s in steps
                if any(("matmul" in st[1] or "conv" in st[1]) for st in s if len(st) > 1)]
    return [sum(any(st[0] == "tensorize" for st in s) for s in products), len(products)]


def build_models(
    outdir: Path,
    names: list[str] | None = None,
    small: bool = False,
    precisions: tuple[str, ...] = ("fp32",),
    target: str | None = None,
) -> None:
    """Build ``names`` (default: all of GPU_MODELS) in each of ``precisions`` into
    ``outdir``, for ``target`` (default: ``default_target`` of the precision)."""
    outdir.mkdir(parents=True, exist_ok=True)
    for spec in GPU_MODELS:
        if names is None or spec.name in names:
            for precision in precisions:
                note = build_one(spec, outdir, small, precision, target)
                mirror = note["torch_mirror_rel_err"]
                check = "torch not installed" if mirror is None else f"rel err {mirror:.2g}"
                done, products = note["tensorized"]
                print(f"built {note['name']} {note['shapes']} for {note['target']!r}: "
                      f"{done} of {products} distinct product kernels on cooperative matrices; "
                      f"torch module vs ONNX: {check}")
