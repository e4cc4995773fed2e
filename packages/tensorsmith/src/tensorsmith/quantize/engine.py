"""Running an ONNX model with tensorsmith's own compiler, some intermediates exposed.

Calibration needs the value of every tensor it quantizes, and the accuracy report needs
the float and the quantized model's outputs on many samples. Both compile the model once
(target ``llvm`` by default) and run the artifact per sample: a compiled run is fast, and
the compiler, not ONNX Runtime, is the engine this project ships.

The intermediates become extra ONNX graph outputs before import, so the importer gives
each a value of its own, kept out of fused kernels, whatever it does with the rest.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import onnx
from onnx import helper


def with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy of ``model`` that also returns ``names`` (graph inputs and names it already
    returns are skipped). Types come from ONNX shape inference where it knows them, else
    float32 of unknown shape (the importer works out the shape itself)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    skip = {v.name for v in copy.graph.output} | {v.name for v in copy.graph.input}
    wanted = [n for n in dict.fromkeys(names) if n not in skip]
    if not wanted:
        return copy
    try:
        inferred = onnx.shape_inference.infer_shapes(copy)
        known = {vi.name: vi for vi in inferred.graph.value_info}
    except Exception:  # inference only adds detail here
        known = {}
    for name in wanted:
        info = onnx.ValueInfoProto()
        if name in known and known[name].type.tensor_type.HasField("shape"):
            info.CopyFrom(known[name])
        else:
            info = helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
            info.type.tensor_type.shape.SetInParent()
        copy.graph.output.append(info)
    return copy


class CompiledModel:
    """``model`` compiled by tensorsmith for ``target`` at fixed input ``shapes``, with
    ``expose`` as extra outputs; :meth:`run` returns every output by name."""

    def __init__(self, model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]], *,
                 expose: Sequence[str] = (), target: str = "llvm",
                 device: str | None = None) -> None:
        import tensorsmith.runtime as rt
        from tensorsmith.frontend.onnx import from_onnx
        from tensorsmith.ir import build
        from tensorsmith.ir.target import Target

        proto = with_outputs(model, expose)
        graph, params = from_onnx(proto, {k: list(v) for k, v in shapes.items()}, static=True)
        self.output_names = [v.name for v in proto.graph.output]
        self.input_names = [v.name for v in graph.inputs]
        self._tmp = tempfile.TemporaryDirectory(prefix="tensorsmith-quantize-")
        path = Path(self._tmp.name) / "model.so"
        build(graph, target=target, params=params).export_library(path)
        self._module: Any = rt.load(path, device=device or Target.parse(target).info.device)

    def run(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self._module.run({k: feed[k] for k in self.input_names})
        return dict(zip(self.output_names, outputs, strict=True))

    def close(self) -> None:
        self._module.close()
        self._tmp.cleanup()

    def __enter__(self) -> CompiledModel:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
