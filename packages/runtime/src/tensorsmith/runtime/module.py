"""GraphModule: the user's handle on a loaded model, the same for every device.

This is where inputs are checked in terms a user understands -- names, dtypes, shapes --
before any byte reaches native code, and where results become fresh NumPy arrays. The
device executor below it (cpu.CpuModel today) only moves bytes.

A model with dynamic shapes (its plan has ``symbols``) takes inputs whose symbolic axes
have any size: their rank and fixed axes are checked here, and the library learns the
symbols from the shapes and checks that the inputs agree (its message, in an
InputError, names the input, the axis and both sizes). Outputs take the shape the
library reports after each run. A lock makes each call
atomic, so one module shared between threads serializes instead of racing; for parallel
runs, load one module per thread. The same lock orders close() after any call in
progress, and every call after close() is refused: the native model is gone by then.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.cpu import CpuModel, TensorSpec
from tensorsmith.runtime.device import Device
from tensorsmith.runtime.dtypes import numpy_dtype
from tensorsmith.runtime.errors import ArtifactError, InputError
from tensorsmith.runtime.profiling import ProfileReport, summarize

__all__ = ["GraphModule"]

Key = str | int


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]  # the library's at load (with dynamic shapes: every symbol 1)
    nbytes: int
    #: as the plan states it: ints, and the text of each size known only at run time
    declared: tuple[int | str, ...] = ()

    @property
    def symbolic(self) -> bool:
        return any(isinstance(d, str) for d in self.declared)

    def shape_text(self) -> str:
        return "[" + ", ".join(str(d) for d in self.declared) + "]"


class GraphModule:
    """A model ready to run: ``run``, ``set_input``/``get_output``, ``profile``."""

    def __init__(self, artifact: Artifact, executor: CpuModel, device: Device) -> None:
        self.artifact = artifact
        self.device = device
        self._executor = executor
        self._inputs = _tensors(artifact, executor.inputs, "inputs")
        self._outputs = _tensors(artifact, executor.outputs, "outputs")
        self._input_index = {t.name: i for i, t in enumerate(self._inputs)}
        self._output_index = {t.name: i for i, t in enumerate(self._outputs)}
        # the shapes now: an input's as last set, an output's as the last run made it
        self._input_shapes = [t.shape for t in self._inputs]
        self._output_shapes = [t.shape for t in self._outputs]
        self._is_set = [False] * len(self._inputs)
        self._has_run = False
        self._closed = False
        self._lock = threading.Lock()

    # ---- description ------------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        return self.artifact.metadata

    @property
    def input_info(self) -> list[dict[str, Any]]:
        """``{"name", "shape", "dtype"}`` of each input, in the graph's order. A size known
        only at run time is its text in the shape (``("batch", 16)``)."""
        return [_info(t) for t in self._inputs]

    @property
    def output_info(self) -> list[dict[str, Any]]:
        """``{"name", "shape", "dtype"}`` of each output, in the graph's order (sizes known
        only at run time as their text: ``("batch", 10)``)."""
        return [_info(t) for t in self._outputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype}{t.shape_text()}" for t in self._inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}{t.shape_text()}" for t in self._outputs)
        closed = " (closed)" if self._closed else ""
        return (
            f"<GraphModule '{self.artifact.path}' on {self.device}{closed} ({ins}) -> ({outs})>"
        )

    # ---- running ----------------------------------------------------------------------

    def set_input(self, key: Key, value: Any) -> None:
        """Set one input by name or index; it keeps its value across runs."""
        index = self._input(key)
        array = _as_input_array(value, self._inputs[index])
        with self._open():
            self._set(index, array)

    def run(self, inputs: Mapping[Key, Any] | Sequence[str] | None = None,
            input_feed: Mapping[Key, Any] | None = None) -> list[np.ndarray]:
        """Run the model, after setting `inputs` if given; return every output, in order.

        Inputs not in `inputs` keep the values set before. All given inputs are checked
        before any is set, so a bad one changes nothing.

        ONNX Runtime's call works too, so code written for it runs unchanged:
        ``run(output_names, input_feed)``, `output_names` None for every output or a list
        of output names, returned in that order.
        """
        if input_feed is not None:
            return self._run_named(inputs, input_feed)
        prepared = self._prepare(inputs or {})  # type: ignore[arg-type]
        with self._open():
            for index, array in prepared:
                self._set(index, array)
            self._check_all_set()
            self._executor.run()
            self._ran()
            return [self._get(i, None) for i in range(len(self._outputs))]

    def _run_named(self, names: object, feed: Mapping[Key, Any]) -> list[np.ndarray]:
        """ONNX Runtime's ``run(output_names, input_feed)``."""
        if names is not None and (isinstance(names, str | bytes | Mapping)
                                  or not isinstance(names, Sequence)
                                  or not all(isinstance(n, str) for n in names)):
            raise InputError("run(output_names, input_feed): output_names must be None or "
                             f"a list of output names, got {type(names).__name__}")
        picked = None if names is None else [self._output(n) for n in names]
        outputs = self.run(feed)
        return outputs if picked is None else [outputs[i] for i in picked]

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        """``m(x)`` or ``m(input=x)``: positional inputs in graph order, or by name."""
        if len(args) > len(self._inputs):
            raise InputError(
                f"the model takes {len(self._inputs)} inputs and got {len(args)} positional ones"
            )
        inputs: dict[Key, Any] = {self._inputs[i].name: v for i, v in enumerate(args)}
        for name, value in kwargs.items():
            if name in inputs:
                raise InputError(f"input {name!r} was given both by position and by name")
            inputs[name] = value
        return self.run(inputs)

    def get_output(self, key: Key, out: np.ndarray | None = None) -> np.ndarray:
        """An output of the last run, by name or index, as a fresh array (or into `out`)."""
        index = self._output(key)
        with self._open():
            return self._get(index, out)

    def profile(self, inputs: Mapping[Key, Any] | None = None, repeat: int = 10,
                warmup: bool = True) -> ProfileReport:
        """Time each step over `repeat` runs (after one warm-up run, unless `warmup` is
        False: the auto-tuner times cold runs after evicting the caches itself).

        Returns one ``{"name", "calls", "total_ms", "mean_ms", "percent"}`` per step name,
        in execution order; the report's ``run_ms`` holds the wall time of each run.
        """
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        prepared = self._prepare(inputs or {})
        runs: list[list[float]] = []
        run_ms: list[float] = []
        with self._open():
            for index, array in prepared:
                self._set(index, array)
            self._check_all_set()
            if warmup:
                self._executor.run()
            for _ in range(repeat):
                start = time.perf_counter()
                runs.append(self._executor.run_profiled())
                run_ms.append((time.perf_counter() - start) * 1e3)
            self._ran()
        return summarize(self._executor.step_names, runs, run_ms)

    def set_num_threads(self, n: int) -> None:
        """Threads for parallel loops of this artifact's models (0 = one per core)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"the thread count must be an int >= 0 (0 = one per core), got {n!r}")
        with self._open():
            self._executor.set_num_threads(n)

    def close(self) -> None:
        """Free the model now rather than when it is garbage-collected: its memory and, once
        no other module uses it, its library and that library's threads.

        Waits for a call in progress on another thread; closing twice is harmless. Every
        call afterwards raises InputError (the native model no longer exists).
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                self._executor.close()

    @property
    def closed(self) -> bool:
        """Whether close() was called (or a ``with`` block around the module ended)."""
        return self._closed

    def __enter__(self) -> GraphModule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals (callers hold the lock where it matters) ---------------------------

    @contextmanager
    def _open(self) -> Iterator[None]:
        """Hold the lock of a module that is not closed: native calls are safe inside."""
        with self._lock:
            if self._closed:
                raise InputError(
                    f"the model of '{self.artifact.path}' was closed; load it again with "
                    "tensorsmith.runtime.load(path)"
                )
            yield

    def _input(self, key: Key) -> int:
        return _resolve(key, self._input_index, len(self._inputs), "input")

    def _output(self, key: Key) -> int:
        return _resolve(key, self._output_index, len(self._outputs), "output")

    def _prepare(self, inputs: Mapping[Key, Any]) -> list[tuple[int, np.ndarray]]:
        if not isinstance(inputs, Mapping):
            raise InputError(
                f"inputs must be a mapping of input name to array, got {type(inputs).__name__}"
                " (ONNX Runtime's form is run(output_names, input_feed))"
            )
        prepared = []
        for key, value in inputs.items():
            index = self._input(key)
            prepared.append((index, _as_input_array(value, self._inputs[index])))
        return prepared

    def _set(self, index: int, array: np.ndarray) -> None:
        if array.shape != self._input_shapes[index]:  # a symbolic axis changed its size
            self._executor.set_input_shape(index, array.shape)
            self._input_shapes[index] = array.shape
            self._is_set[index] = False
            self._has_run = False  # the library may have dropped the last run's outputs
        self._executor.set_input(index, array.ctypes.data, array.nbytes)
        self._is_set[index] = True

    def _ran(self) -> None:
        """After a run: the outputs have values, in the shapes the library reports."""
        self._has_run = True
        for i, t in enumerate(self._outputs):
            if t.symbolic:
                self._output_shapes[i] = self._executor.output_shape(i)

    def _check_all_set(self) -> None:
        missing = [t.name for t, done in zip(self._inputs, self._is_set, strict=True) if not done]
        if missing:
            names = ", ".join(repr(n) for n in missing)
            raise InputError(
                f"input{'s' if len(missing) > 1 else ''} {names} never set; pass "
                f"{'them' if len(missing) > 1 else 'it'} to run({{{missing[0]!r}: ...}}) or "
                f"call set_input({missing[0]!r}, ...) first"
            )

    def _get(self, index: int, out: np.ndarray | None) -> np.ndarray:
        spec, shape = self._outputs[index], self._output_shapes[index]
        if not self._has_run:
            raise InputError(f"output {spec.name!r} has no value yet; call run() first")
        if out is None:
            out = np.empty(shape, spec.dtype)
        elif (
            not isinstance(out, np.ndarray)
            or out.dtype != spec.dtype
            or out.shape != shape
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise InputError(
                f"out= for output {spec.name!r} must be a writeable C-contiguous {spec.dtype} "
                f"array of shape {shape}"
            )
        self._executor.get_output(index, out.ctypes.data, out.nbytes)
        return out


def _tensors(artifact: Artifact, specs: list[TensorSpec], kind: str) -> list[_Tensor]:
    """The library's inputs or outputs, checked against the file's metadata."""
    described = artifact.metadata.get(kind)
    tensors = []
    for i, spec in enumerate(specs):
        where = f"{kind[:-1]} {spec.name!r} of artifact '{artifact.path}'"
        dtype = numpy_dtype(spec.dtype, where)
        _check_nbytes(spec, dtype, where)
        declared = spec.shape
        if described is not None:
            entry = described[i] if isinstance(described, list) and i < len(described) else {}
            declared = tuple(entry.get("shape") or ())
            meta = (entry.get("name"), entry.get("dtype"), declared)
            # a size known only at run time is its text in the metadata: any size here
            library_shape = tuple(d if isinstance(d, str) else s
                                  for d, s in zip(declared, spec.shape, strict=False))
            if meta != (spec.name, spec.dtype, library_shape) or len(declared) != len(spec.shape):
                raise ArtifactError(
                    f"artifact '{artifact.path}' is inconsistent: its metadata describes "
                    f"{kind[:-1]} {i} as {meta}, its library as "
                    f"{(spec.name, spec.dtype, spec.shape)}; re-export it"
                )
        tensors.append(_Tensor(spec.name, dtype, spec.shape, spec.nbytes, declared))
    if isinstance(described, list) and len(described) != len(specs):
        raise ArtifactError(
            f"artifact '{artifact.path}' is inconsistent: its metadata lists {len(described)} "
            f"{kind}, its library {len(specs)}; re-export it"
        )
    return tensors


def _check_nbytes(spec: TensorSpec, dtype: np.dtype, where: str) -> None:
    """The library's byte count must be its shape's, computed in Python ints: a product in
    int64 wraps, and a shape that wrapped to the library's count would pass."""
    if any(d < 0 for d in spec.shape):
        raise ArtifactError(f"{where} has a negative dimension in its shape {spec.shape}")
    expected = math.prod(spec.shape) * dtype.itemsize
    if spec.nbytes != expected:
        raise ArtifactError(
            f"{where} has {spec.nbytes} bytes, which its shape {spec.shape} contradicts "
            f"({expected} bytes); the artifact is damaged: re-export it"
        )


def _info(t: _Tensor) -> dict[str, Any]:
    return {"name": t.name, "shape": t.declared, "dtype": str(t.dtype)}


def _resolve(key: Key, index: dict[str, int], count: int, kind: str) -> int:
    if isinstance(key, str):
        if key in index:
            return index[key]
        names = ", ".join(repr(n) for n in index) or "none"
        raise InputError(f"the model has no {kind} {key!r}; its {kind}s are: {names}")
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        if 0 <= key < count:
            return int(key)
        raise InputError(f"{kind} index {key} is out of range: the model has {count} {kind}s")
    raise InputError(f"a {kind} is named by its name (str) or index (int), not {key!r}")


def _as_input_array(value: Any, spec: _Tensor) -> np.ndarray:
    """A C-contiguous array of exactly the input's dtype and shape, or an InputError.

    Arrays must already have the right dtype: a silent cast would hide a mistake
    (float64 data fed to a float32 model) and cost a copy on every run. Python scalars
    and lists have no dtype of their own, so they are converted -- unless that would
    drop fractions or overflow.
    """
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, bool | int | float | list | tuple) and not isinstance(value, np.generic):
        array = _from_python(value, spec)
    elif hasattr(value, "__dlpack__"):
        # PyTorch tensors, CuPy/JAX host arrays...: a zero-copy view where the producer
        # allows it (CPU memory); a device tensor must be moved to the CPU first.
        try:
            array = np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError) as e:
            raise InputError(f"input {spec.name!r}: cannot view it through DLPack ({e}); "
                             "pass a CPU tensor, e.g. t.cpu()") from None
    else:
        array = np.asarray(value)
    if array.dtype != spec.dtype:
        raise InputError(
            f"input {spec.name!r} has dtype {array.dtype} but the model expects {spec.dtype}; "
            f"convert it first, e.g. x.astype(np.{spec.dtype})"
        )
    if spec.symbolic:
        # the library checks the symbolic axes against each other when it runs
        if array.ndim != len(spec.declared) or any(
                isinstance(d, int) and d != n for d, n in zip(spec.declared, array.shape)):
            raise InputError(
                f"input {spec.name!r} has shape {array.shape} but the model expects "
                f"{spec.shape_text()}")
    elif array.shape != spec.shape:
        raise InputError(
            f"input {spec.name!r} has shape {array.shape} but the model expects {spec.shape}"
        )
    # (np.ascontiguousarray would make a 0-d array 1-d: another shape)
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _from_python(value: Any, spec: _Tensor) -> np.ndarray:
    try:
        plain = np.asarray(value)
        if plain.dtype.kind == "f" and spec.dtype.kind in "iub":
            raise InputError(
                f"input {spec.name!r} takes {spec.dtype} and got floating-point values; "
                "round them explicitly"
            )
        return np.asarray(value, dtype=spec.dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise InputError(f"input {spec.name!r} cannot be made a {spec.dtype} array: {e}") from None
