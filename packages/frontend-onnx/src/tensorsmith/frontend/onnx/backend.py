"""tensorsmith as an ONNX backend (``onnx.backend.base.Backend``), for the ``llvm`` target.

ONNX's backend API is how ONNX's own conformance suite (``onnx.backend.test``) drives a
runtime: ``prepare(model, device)`` returns a rep, ``rep.run(inputs)`` the outputs. For a
compiler, ``prepare`` is the whole pipeline: import with :func:`from_onnx` (static shapes
from the model's inputs), ``build`` for the target, export the artifact to a temporary
directory and load it with ``tensorsmith.runtime``, exactly as a user's program would.

Operands that decide a shape and arrive as graph inputs (a Reshape's target, a
ReduceSum's axes, TopK's k, as the node tests feed them) are read at run time: the
converters that can take them turn them into sizes the runtime computes from the values
before each run (``ir/host_sizes.py``), so one artifact serves every value. Two kinds of
model still cannot be compiled by ``prepare`` alone:

* a converter that needs the *value* of such an input and cannot take it at run time
  (a Resize with antialiasing, an If's condition...);
* an input has no static shape in the model.

For those the rep compiles at ``run`` instead, specialized on the values (or shapes) it
is given: the needed inputs are frozen into initializers, and the artifact is cached per
distinct value, which is what freezing parameters does for a deployed model.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.host_sizes import RunTimeValueError
from tensorsmith.runtime.errors import InputError
from tensorsmith.runtime.shapes import value_reads

from .context import ConstantRequiredError
from .dtypes import ONNX_TO_NUMPY
from .importer import from_onnx
from .inputs import onnx_dims
from .run_time_values import input_entries

__all__ = ["TensorsmithBackend", "TensorsmithRep", "prepare", "run_model", "supports_device"]

_SHAPE_ONLY = ("Shape", "Size", "EyeLike")
_FREEZE_LIMIT = 64
"""How many inputs one model may need frozen before we give up (each costs an import)."""


class TensorsmithRep(BackendRep):
    """A prepared model: compiled now, or at the first ``run`` that brings needed values."""

    def __init__(self, model: onnx.ModelProto, target: str = "llvm",
                 workdir: str | None = None) -> None:
        self.model = model
        self.target = target
        initialized = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in initialized]
        self.output_names = [vi.name for vi in model.graph.output]
        self._tmp = tempfile.TemporaryDirectory(prefix="tsm-onnx-backend-", dir=workdir)
        self._frozen: list[str] = []  # inputs whose values specialize the artifact
        self._read_at_run_time: list[str] = []  # inputs the last build computes sizes from
        self._compiled: dict[str, Any] = {}  # specialization key -> loaded GraphModule
        self._shape_from_run = not all(_static(vi) for vi in model.graph.input
                                       if vi.name in self.input_names)
        if not self._shape_from_run:
            self._compile({})  # the common case: everything happens in prepare

    @property
    def frozen_inputs(self) -> tuple[str, ...]:
        """Inputs whose values the artifact is specialized on (see the module docstring)."""
        return tuple(self._frozen)

    # -- running ---------------------------------------------------------------------
    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Outputs in graph-output order, for inputs in graph-input order (or by name)."""
        feeds = self._feeds(inputs)
        module = self._compiled.get(self._key(feeds)) or self._compile(feeds)
        if module is None:
            missing = [n for n in self._frozen if n not in feeds]
            raise ModelError(f"input(s) {', '.join(missing)} must be given: the model is "
                             "compiled for their values")
        runtime = {n: v for n, v in feeds.items() if n not in self._frozen}
        try:
            return tuple(module.run(runtime))
        except InputError:
            # values the one artifact refuses (a slice that comes out empty: computed
            # sizes are at least 1): specialize on the inputs its sizes are computed from
            more = [n for n in self._read_at_run_time if n not in self._frozen]
            if not more:
                raise
            self._frozen += more
            return self.run(feeds)

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            items = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray | np.generic):
                inputs = [inputs]
            if len(inputs) != len(self.input_names):
                raise ModelError(f"the model takes {len(self.input_names)} inputs "
                                 f"({', '.join(self.input_names)}), got {len(inputs)}")
            items = dict(zip(self.input_names, inputs))
        # The in-memory node cases pass 0-d inputs as NumPy scalars (np.float32(...)).
        return {n: np.asarray(v) for n, v in items.items()}

    # -- compiling -------------------------------------------------------------------
    def _key(self, feeds: Mapping[str, np.ndarray]) -> str:
        """Identifies an artifact: the values of frozen inputs, the shapes if run-time."""
        h = hashlib.sha256()
        for name in self._frozen:
            a = feeds[name]
            h.update(f"{name}:{a.dtype}:{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        if self._shape_from_run:
            h.update(repr(sorted((n, a.shape) for n, a in feeds.items())).encode())
        return h.hexdigest()

    def _compile(self, feeds: Mapping[str, np.ndarray]) -> Any:
        """Import (freezing the inputs converters need as constants), build, export, load;
        None while that needs values ``feeds`` does not have (``prepare`` has none)."""
        while True:
            if any(n not in feeds for n in self._frozen):
                return None
            try:
                module = self._build(feeds)
            except (ConstantRequiredError, RunTimeValueError) as e:
                names = ([e.value_name] if isinstance(e, ConstantRequiredError)
                         else sorted(e.inputs))
                needed = [n for name in names
                          for n in feeding_inputs(self.model.graph, name, self.input_names)
                          if n not in self._frozen]
                needed = list(dict.fromkeys(needed))
                if not needed or len(self._frozen) + len(needed) > _FREEZE_LIMIT:
                    raise
                self._frozen += needed
                continue
            except ModelError:
                # a converter took a value at run time, but the graph after it cannot be
                # compiled that way (a check only a fixed size passes): specialize on
                # every input whose values are read at run time, as before they were
                more = [n for n in self._value_inputs() if n not in self._frozen]
                if not more:
                    raise
                self._frozen += more
                continue
            self._compiled[self._key(feeds)] = module
            return module

    def _value_inputs(self) -> list[str]:
        """The inputs whose values the importer reads at run time where a converter can
        (small numeric tensors: run_time_values.input_entries)."""
        out = []
        for vi in self.model.graph.input:
            dims = onnx_dims(vi)
            dtype = ONNX_TO_NUMPY.get(vi.type.tensor_type.elem_type)
            if (vi.name in self.input_names and dims is not None and dtype is not None
                    and all(isinstance(d, int) for d in dims)
                    and input_entries(vi.name, dims, dtype) is not None):
                out.append(vi.name)
        return out

    def _build(self, feeds: Mapping[str, np.ndarray]) -> Any:
        import tensorsmith.runtime as rt
        from tensorsmith.ir import build

        model = self.model
        if self._frozen:
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            model.graph.initializer.extend(numpy_helper.from_array(feeds[n], n)
                                           for n in self._frozen)
        shapes = ({n: a.shape for n, a in feeds.items() if n not in self._frozen}
                  if self._shape_from_run else None)
        graph, params = from_onnx(model, shapes)
        self._read_at_run_time = sorted({n for c in graph.computed for n in value_reads(c.expr)})
        lib = build(graph, target=self.target, params=params)
        path = Path(self._tmp.name) / f"model_{len(self._compiled)}.so"
        lib.export_library(path)
        return rt.load(path, device="cpu")


class TensorsmithBackend(Backend):
    """``onnx.backend.base.Backend`` for tensorsmith's ``llvm`` target (device ``CPU``)."""

    target = "llvm"

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any
                ) -> TensorsmithRep:
        """Compile ``model``; ``kwargs`` (BackendTest passes rtol/atol here) are ignored."""
        if not cls.supports_device(device):
            raise ModelError(f"tensorsmith's {cls.target} backend runs on CPU, not {device}")
        return TensorsmithRep(model, cls.target)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        raise NotImplementedError("tensorsmith compiles models: wrap the node in a model "
                                  "and use run_model")


def feeding_inputs(graph: onnx.GraphProto, name: str, inputs: Sequence[str]) -> list[str]:
    """The graph inputs ``name`` is computed from (itself when it is one), in input order;
    values inside subgraphs (If branches) count, and so does what a subgraph reads from
    the enclosing scope."""
    producer: dict[str, list[str]] = {}

    def visit(g: onnx.GraphProto) -> list[str]:
        """Record producers in ``g``; return every name ``g``'s nodes read."""
        reads: list[str] = []
        for node in g.node:
            # Shape, Size and EyeLike read only static shapes: their inputs stay run-time
            deps = [] if node.op_type in _SHAPE_ONLY else [i for i in node.input if i]
            for attr in node.attribute:
                subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else \
                    list(attr.graphs)
                for sub in subgraphs:
                    deps += visit(sub)
            for out in node.output:
                if out:
                    producer[out] = deps
            reads += deps
        return reads

    visit(graph)
    seen: set[str] = set()
    todo = [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo += producer.get(n, [])
    return [n for n in inputs if n in seen]


def _static(vi: onnx.ValueInfoProto) -> bool:
    dims = onnx_dims(vi)
    return dims is not None and all(isinstance(d, int) for d in dims)


prepare = TensorsmithBackend.prepare
run_model = TensorsmithBackend.run_model
supports_device = TensorsmithBackend.supports_device
