"""The CPU executor: the artifact's own C ABI (tensorsmith_runtime.h) called through ctypes.

A CPU artifact is a shared library that runs itself; Python only moves bytes in and out.
This module is the thin, checked binding: it declares every function's signature once,
turns nonzero returns into exceptions carrying tsm_last_error, and reads the library's
own description of its inputs and outputs. Validation a user can understand (names,
dtypes, shapes) happens above, in module.py; the C side checks sizes again regardless.
"""

from __future__ import annotations

import ctypes
import json
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorsmith.runtime.errors import ArtifactError, TensorsmithError

__all__ = ["CpuModel", "TensorSpec"]

_p, _i, _sz, _s = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "tsm_model_create": (_p, []),
    "tsm_model_destroy": (None, [_p]),
    "tsm_model_num_inputs": (_i, [_p]),
    "tsm_model_num_outputs": (_i, [_p]),
    "tsm_model_set_input": (_i, [_p, _i, _p, _sz]),
    "tsm_model_run": (_i, [_p]),
    "tsm_model_get_output": (_i, [_p, _i, _p, _sz]),
    "tsm_last_error": (_s, []),
    "tsm_model_input_name": (_s, [_p, _i]),
    "tsm_model_output_name": (_s, [_p, _i]),
    "tsm_model_input_dtype": (_s, [_p, _i]),
    "tsm_model_output_dtype": (_s, [_p, _i]),
    "tsm_model_input_ndim": (_i, [_p, _i]),
    "tsm_model_output_ndim": (_i, [_p, _i]),
    "tsm_model_input_shape": (_i, [_p, _i, ctypes.POINTER(ctypes.c_int64)]),
    "tsm_model_output_shape": (_i, [_p, _i, ctypes.POINTER(ctypes.c_int64)]),
    "tsm_model_input_nbytes": (_sz, [_p, _i]),
    "tsm_model_output_nbytes": (_sz, [_p, _i]),
    "tsm_artifact_metadata": (_s, []),
    "tsm_set_num_threads": (_i, [_i]),
    "tsm_model_num_steps": (_i, [_p]),
    "tsm_model_step_name": (_s, [_p, _i]),
    "tsm_model_run_profiled": (_i, [_p, ctypes.POINTER(ctypes.c_double)]),
}


@dataclass(frozen=True)
class TensorSpec:
    """An input or output as the library describes it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


class _Library:
    """The bound C ABI of one loaded artifact (one attribute per function of _SIGNATURES)."""

    tsm_model_create: Callable[..., Any]
    tsm_model_destroy: Callable[..., Any]
    tsm_model_num_inputs: Callable[..., Any]
    tsm_model_num_outputs: Callable[..., Any]
    tsm_model_set_input: Callable[..., Any]
    tsm_model_run: Callable[..., Any]
    tsm_model_get_output: Callable[..., Any]
    tsm_last_error: Callable[..., Any]
    tsm_model_input_name: Callable[..., Any]
    tsm_model_output_name: Callable[..., Any]
    tsm_model_input_dtype: Callable[..., Any]
    tsm_model_output_dtype: Callable[..., Any]
    tsm_model_input_ndim: Callable[..., Any]
    tsm_model_output_ndim: Callable[..., Any]
    tsm_model_input_shape: Callable[..., Any]
    tsm_model_output_shape: Callable[..., Any]
    tsm_model_input_nbytes: Callable[..., Any]
    tsm_model_output_nbytes: Callable[..., Any]
    tsm_artifact_metadata: Callable[..., Any]
    tsm_set_num_threads: Callable[..., Any]
    tsm_model_num_steps: Callable[..., Any]
    tsm_model_step_name: Callable[..., Any]
    tsm_model_run_profiled: Callable[..., Any]

    def __init__(self, path: Path) -> None:
        # An absolute path: dlopen searches the library path for a bare file name.
        loadable = _loadable_path(path)
        try:
            self.dll = ctypes.CDLL(loadable)
        except OSError as e:
            raise ArtifactError(
                f"cannot load artifact '{path}' as a shared library: {e}. It must be built "
                "for this machine's CPU architecture and operating system (target 'llvm')"
            ) from None
        finally:
            if loadable != str(path.resolve()):
                os.unlink(loadable)  # the mapping outlives the file
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                fn = getattr(self.dll, name)
            except AttributeError:
                raise ArtifactError(
                    f"artifact '{path}' does not export {name} of the tensorsmith C ABI; it "
                    "was built by an incompatible compiler: re-export it"
                ) from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def last_error(self) -> str:
        message = self.tsm_last_error()
        return message.decode("utf-8", "replace") if message else "unknown error"


_LOADED: dict[str, tuple[int, int]] = {}  # path -> (inode, mtime) of what dlopen holds


def _loadable_path(path: Path) -> str:
    """The path to dlopen: the file itself, or a private copy if this process already
    loaded a different file at the same path (dlopen would hand back the old library)."""
    import shutil
    import tempfile

    real = str(path.resolve())
    st = os.stat(real)
    identity = (st.st_ino, st.st_mtime_ns)
    seen = _LOADED.setdefault(real, identity)
    if seen == identity:
        return real
    fd, copy = tempfile.mkstemp(prefix="tsm-", suffix=".so")
    os.close(fd)
    shutil.copyfile(real, copy)
    return copy


class CpuModel:
    """One model instance (its own workspace) of a CPU artifact."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = _Library(path)
        handle = self.lib.tsm_model_create()
        if not handle:
            raise ArtifactError(
                f"artifact '{path}' could not create a model: {self.lib.last_error()}"
            )
        self.handle: int = handle
        self._finalizer = weakref.finalize(self, self.lib.tsm_model_destroy, handle)
        self.inputs = [self._spec(i, "input") for i in range(self.lib.tsm_model_num_inputs(handle))]
        self.outputs = [
            self._spec(i, "output") for i in range(self.lib.tsm_model_num_outputs(handle))
        ]
        num_steps = self.lib.tsm_model_num_steps(handle)
        self.step_names = [
            self.lib.tsm_model_step_name(handle, i).decode("utf-8") for i in range(num_steps)
        ]

    def _spec(self, index: int, kind: str) -> TensorSpec:
        call = {
            part: getattr(self.lib, f"tsm_model_{kind}_{part}")
            for part in ("name", "dtype", "ndim", "shape", "nbytes")
        }
        ndim = call["ndim"](self.handle, index)
        shape = (ctypes.c_int64 * max(ndim, 1))()
        self._check(call["shape"](self.handle, index, shape))
        return TensorSpec(
            name=call["name"](self.handle, index).decode("utf-8"),
            dtype=call["dtype"](self.handle, index).decode("utf-8"),
            shape=tuple(shape[:ndim]),
            nbytes=call["nbytes"](self.handle, index),
        )

    def _check(self, status: int, error: type[TensorsmithError] = TensorsmithError) -> None:
        if status != 0:
            raise error(f"artifact '{self.path}': {self.lib.last_error()}")

    def metadata(self) -> dict[str, Any]:
        """The metadata compiled into the library (no checksum or sections)."""
        return json.loads(self.lib.tsm_artifact_metadata().decode("utf-8"))

    def set_input(self, index: int, address: int, nbytes: int) -> None:
        self._check(self.lib.tsm_model_set_input(self.handle, index, address, nbytes))

    def run(self) -> None:
        self._check(self.lib.tsm_model_run(self.handle))

    def run_profiled(self) -> list[float]:
        times = (ctypes.c_double * max(len(self.step_names), 1))()
        self._check(self.lib.tsm_model_run_profiled(self.handle, times))
        return list(times[: len(self.step_names)])

    def get_output(self, index: int, address: int, nbytes: int) -> None:
        self._check(self.lib.tsm_model_get_output(self.handle, index, address, nbytes))

    def set_num_threads(self, n: int) -> None:
        self._check(self.lib.tsm_set_num_threads(n))

    def close(self) -> None:
        self._finalizer()
