"""``compare``: find the first ONNX node whose output tensorsmith computes differently.

Both sides run the model on the same inputs with every intermediate observable: ONNX
Runtime on a copy of the model that returns every node output (onnx_reference.py), and
tensorsmith on a copy of the imported graph that returns the value of every ONNX node
output (``tensorsmith.ir.debug.expose``; the frontend names the value it makes for an ONNX
output after it). Then the ONNX nodes are walked in their (topological) order and each
output is compared (tensor_diff.py); the first one out of tolerance is where things
started going wrong -- everything after it inherits the error.

The core is this function, not the command, so tests (and users debugging a new op) can
call it in the same process, with an op's compute patched, say.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tensorsmith.cli.isolate import Isolation
from tensorsmith.cli.onnx_reference import node_outputs, run_reference
from tensorsmith.cli.tensor_diff import Diff, Stats, diff, json_number


@dataclass(frozen=True)
class Comparison:
    """One ONNX node output: the reference's statistics, ours, and how they differ."""

    node: str
    op_type: str
    output: str
    node_index: int
    reference: Stats
    actual: Stats
    diff: Diff

    @property
    def ok(self) -> bool:
        return self.diff.ok

    def to_json(self) -> dict[str, Any]:
        d = self.diff
        return {
            "node": self.node, "op_type": self.op_type, "output": self.output,
            "node_index": self.node_index, "ok": d.ok, "reason": d.reason,
            "max_abs_diff": json_number(d.max_abs_diff), "tolerance": d.tolerance,
            "worst_index": list(d.worst_index) if d.worst_index is not None else None,
            "reference_at_worst": json_number(d.reference_at_worst),
            "actual_at_worst": json_number(d.actual_at_worst),
            "reference": self.reference.to_json(), "actual": self.actual.to_json(),
        }  # fmt: skip


@dataclass
class Report:
    """Every compared output in node order, and those that could not be compared."""

    model: str
    target: str
    device: str
    rtol: float
    atol: float
    compared: list[Comparison] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # node, output, why
    isolation: Isolation | None = None  # the first divergence's node run alone

    @property
    def first_divergence(self) -> Comparison | None:
        return next((c for c in self.compared if not c.ok), None)

    @property
    def diverged(self) -> list[Comparison]:
        return [c for c in self.compared if not c.ok]

    @property
    def ok(self) -> bool:
        return self.first_divergence is None

    def to_json(self) -> dict[str, Any]:
        first = self.first_divergence
        return {
            "model": self.model, "target": self.target, "device": self.device,
            "rtol": self.rtol, "atol": self.atol, "ok": self.ok,
            "first_divergence": first.to_json() if first else None,
            "isolated": None if self.isolation is None else {
                "ok": self.isolation.ok, "error": self.isolation.error or None,
                "max_abs_diff": {name: json_number(d.max_abs_diff)
                                 for name, d in self.isolation.diffs.items()},
            },
            "compared": [c.to_json() for c in self.compared],
            "skipped": [{"node": n, "output": o, "why": w} for n, o, w in self.skipped],
        }  # fmt: skip


def compare(
    model: onnx.ModelProto | str | os.PathLike[str],
    target: str = "llvm",
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    device: str | None = None,
    opt_level: int = 2,
    seed: int = 0,
    isolate: bool = True,
) -> Report:
    """Run ``model`` through ONNX Runtime and through tensorsmith (compiled for ``target``,
    run on ``device``, by default the target's own) and compare every node output.

    ``inputs`` by name, else seeded random ones of the imported graph's shapes. With
    ``isolate``, the first diverging node is also run alone on ONNX Runtime's values for
    its inputs (isolate.py), which tells a wrong lowering from an amplified difference.
    Raises onnx_reference.ReferenceUnavailable without onnxruntime; errors of import,
    compilation or the runtime propagate as they are (TensorsmithError subclasses).
    """
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir.target import Target

    proto, label = _load(model)
    device = device or Target.parse(target).info.device
    graph, params = from_onnx(proto, input_shapes, static=True)  # random inputs need sizes
    feed = _checked(graph, inputs) if inputs is not None else _random_inputs(graph, seed)
    reference = run_reference(proto, feed)
    actual = _run_exposed(graph, params, node_outputs(proto), target, device, opt_level, feed)

    report = Report(label, target, device, rtol, atol)
    for index, node in enumerate(proto.graph.node):
        name = node.name or f"#{index}"
        for out in (o for o in node.output if o):
            if out not in actual:
                why = "tensorsmith has no value of its own for it (passed through or folded)"
                report.skipped.append((name, out, why))
            elif out not in reference:
                report.skipped.append((name, out, "ONNX Runtime did not return it"))
            else:
                ref, ours = reference[out], actual[out]
                report.compared.append(Comparison(
                    name, node.op_type, out, index, Stats.of(ref), Stats.of(ours),
                    diff(ours, ref, rtol, atol)))  # fmt: skip
    first = report.first_divergence
    if isolate and first is not None:
        from tensorsmith.cli.isolate import isolate as run_alone

        values = {**feed, **reference}
        report.isolation = run_alone(proto, first.node_index, values, target, device, rtol, atol)
    return report


def _load(model: onnx.ModelProto | str | os.PathLike[str]) -> tuple[onnx.ModelProto, str]:
    """The proto (read once, for both engines) and a label for messages."""
    from tensorsmith.frontend.onnx import loader

    return loader.load(model)


def _checked(graph: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The given inputs, each of the imported graph's shape and dtype (or an InputError)."""
    from tensorsmith.runtime.errors import InputError

    names = [v.name for v in graph.inputs]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"inputs missing for {', '.join(map(repr, missing))}; the model's "
                         f"inputs are {', '.join(map(repr, names))}")  # fmt: skip
    feed = {}
    for v in graph.inputs:
        array = np.asarray(inputs[v.name])
        if tuple(array.shape) != tuple(v.shape):
            raise InputError(f"input {v.name!r} has shape {list(array.shape)}, the model "
                             f"expects {list(v.shape)} (set it with --input-shape)")  # fmt: skip
        if str(array.dtype) != v.dtype:
            if not np.can_cast(array.dtype, v.dtype, casting="same_kind"):
                raise InputError(f"input {v.name!r} is {array.dtype}, the model expects "
                                 f"{v.dtype}")  # fmt: skip
            array = array.astype(v.dtype)
        feed[v.name] = np.ascontiguousarray(array)
    return feed


def _random_inputs(graph: Any, seed: int) -> dict[str, np.ndarray]:
    from tensorsmith.cli.run_cmd import random_inputs

    infos = [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in graph.inputs]
    return random_inputs(infos, seed)


def _run_exposed(
    graph: Any,
    params: Mapping[str, np.ndarray],
    names: list[str],
    target: str,
    device: str,
    opt_level: int,
    feed: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """tensorsmith's value of each of ``names`` it has, by name: the graph compiled with
    those values as extra outputs (``tensorsmith.ir.debug.expose``) and run."""
    from tensorsmith.ir.debug import expose

    exposed = expose(graph, names)
    outputs = run_compiled(exposed.graph, params, target, device, feed, opt_level, by_name=False)
    values = dict(zip((v.name for v in graph.outputs), outputs[: exposed.num_original]))
    values.update(zip(exposed.names, outputs[exposed.num_original :], strict=True))
    return values


def run_compiled(
    graph: Any,
    params: Mapping[str, np.ndarray],
    target: str,
    device: str,
    feed: Mapping[str, np.ndarray],
    opt_level: int = 2,
    *,
    by_name: bool = True,
) -> Any:
    """Build ``graph`` for ``target``, export it to a temporary file, load it on ``device``
    and run it: the outputs by the graph's output names, or as a list in output order."""
    import tensorsmith.runtime as rt
    from tensorsmith.ir import build

    lib = build(graph, target=target, params=params, opt_level=opt_level)
    wanted = {v.name for v in graph.inputs}
    with tempfile.TemporaryDirectory(prefix="tensorsmith-compare-") as tmp:
        path = Path(tmp) / "model.so"
        lib.export_library(path)
        with rt.load(path, device=device) as module:
            outputs = module.run({k: v for k, v in feed.items() if k in wanted})
    if not by_name:
        return outputs
    return dict(zip((v.name for v in graph.outputs), outputs, strict=True))
