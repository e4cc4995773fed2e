"""Re-run one ONNX node alone, fed ONNX Runtime's values for its inputs.

The first output out of tolerance is not always a wrong op: an ill-conditioned one
(Softmax over attention scores of magnitude 1e4, where one float32 ulp of the input is
0.001) turns an input difference far inside tolerance into an output difference outside
it. Running the node by itself on the reference's inputs separates the two cases: if it
still diverges, its lowering is wrong; if it matches, it amplified a difference that
reached it.

The one-node model takes the node's floating-point inputs as graph inputs (so they are
computed by the compiled kernel, not folded away at build time) and its other inputs
(shapes, axes, indices) as initializers, which the frontend needs as constants anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tensorsmith.cli.tensor_diff import Diff, diff


@dataclass(frozen=True)
class Isolation:
    """The node alone: ``diffs`` per output name, or ``error`` when it could not be run."""

    diffs: dict[str, Diff]
    error: str = ""

    @property
    def ok(self) -> bool | None:
        """True: it matches alone; False: it diverges alone; None: not run."""
        if self.error:
            return None
        return all(d.ok for d in self.diffs.values())


def one_node_model(
    model: onnx.ModelProto, index: int, values: Mapping[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Node ``index`` of ``model`` as a model of its own, and the feed for its inputs.

    ``values`` holds the reference's value of every tensor the node reads (model inputs
    and node outputs) and of the node's outputs (their types come from them).
    """
    node = model.graph.node[index]
    initializers = {t.name: t for t in model.graph.initializer}
    inputs, inits, feed = [], [], {}
    for name in dict.fromkeys(n for n in node.input if n):
        if name in initializers:
            inits.append(initializers[name])
            continue
        array = np.asarray(values[name])
        if array.dtype.kind == "f":
            elem = helper.np_dtype_to_tensor_dtype(array.dtype)
            inputs.append(helper.make_tensor_value_info(name, elem, list(array.shape)))
            feed[name] = array
        else:
            inits.append(numpy_helper.from_array(array, name))
    outputs = []
    for name in (o for o in node.output if o):
        array = np.asarray(values[name])
        elem = helper.np_dtype_to_tensor_dtype(array.dtype)
        outputs.append(helper.make_tensor_value_info(name, elem, list(array.shape)))
    graph = helper.make_graph([node], f"isolated_{node.name or index}", inputs, outputs, inits)
    isolated = helper.make_model(graph, opset_imports=list(model.opset_import))
    isolated.ir_version = model.ir_version
    return isolated, feed


def isolate(
    model: onnx.ModelProto,
    index: int,
    values: Mapping[str, np.ndarray],
    target: str,
    device: str,
    rtol: float,
    atol: float,
) -> Isolation:
    """Compile node ``index`` alone for ``target``, run it on the reference's inputs on
    ``device`` and compare its outputs with the reference's."""
    from tensorsmith.cli.compare import run_compiled
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.runtime.errors import TensorsmithError

    try:
        isolated, feed = one_node_model(model, index, values)
        graph, params = from_onnx(isolated)
        got = run_compiled(graph, params, target, device, feed)
    except (TensorsmithError, KeyError, ValueError, TypeError) as e:
        return Isolation({}, f"{type(e).__name__}: {e}")
    outputs = [o for o in model.graph.node[index].output if o]
    return Isolation({name: diff(got[name], values[name], rtol, atol) for name in outputs})
