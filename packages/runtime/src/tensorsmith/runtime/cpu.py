"""The CPU executor: the artifact's own C ABI (tensorsmith_runtime.h) called through ctypes.

A CPU artifact is a shared library that runs itself; Python only moves bytes in and out.
This module is the thin, checked binding: it declares every function's signature once,
turns nonzero returns into exceptions carrying tsm_last_error, and reads the library's
own description of its inputs and outputs. Validation a user can understand (names,
dtypes, shapes) happens above, in module.py; the C side checks sizes again regardless.
"""

from __future__ import annotations

import _ctypes
import ctypes
import json
import os
import platform
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.cpu_features import check_cpu_features
from tensorsmith.runtime.errors import ArtifactError, InputError, TensorsmithError

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
#: Functions that libraries written before them lack (bound as None there): only a model
#: with dynamic shapes calls them, and such a library always has them.
_OPTIONAL_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "tsm_model_set_input_shape": (_i, [_p, _i, _i, ctypes.POINTER(ctypes.c_int64)]),
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
    tsm_model_set_input_shape: Callable[..., Any] | None

    def __init__(self, dll: ctypes.CDLL, path: Path) -> None:
        self.dll = dll
        for name, (restype, argtypes) in {**_SIGNATURES, **_OPTIONAL_SIGNATURES}.items():
            try:
                fn = getattr(dll, name)
            except AttributeError:
                if name in _OPTIONAL_SIGNATURES:
                    setattr(self, name, None)
                    continue
                raise ArtifactError(
                    f"artifact '{path}' does not export {name} of the tensorsmith C ABI; it "
                    "was built by an incompatible compiler: re-export it"
                ) from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def last_error(self) -> str:
        message = self.tsm_last_error()
        return message.decode("utf-8", "replace") if message else "unknown error"


C_ABI_FORMAT_VERSIONS = frozenset({1, 2})
"""Artifact format versions whose CPU library exports the C ABI this binding declares
(version 2 changed what the checksum covers, not the library). A new format version must
be added here deliberately: until then its libraries are refused before dlopen."""


def check_abi(artifact: Artifact) -> None:
    """Refuse an artifact this binding cannot call, from its metadata alone: dlopen runs the
    library's constructors, so an incompatible library must never get that far."""
    if artifact.plan.runs_on != "cpu":
        raise ArtifactError(
            f"artifact '{artifact.path}' was compiled for target '{artifact.target}', which "
            "does not run on device 'cpu': it is not a CPU library"
        )
    if artifact.format_version not in C_ABI_FORMAT_VERSIONS:
        raise ArtifactError(
            f"artifact '{artifact.path}' has format version {artifact.format_version}, whose "
            "C ABI this tensorsmith-runtime does not know; upgrade tensorsmith-runtime or "
            "re-export the model"
        )


def check_architecture(artifact: Artifact) -> None:
    """Refuse, before dlopen, a library cross-compiled for another architecture (its
    target names one with ``-mtriple=``): dlopen's own message ("cannot open shared object
    file") does not say that the file is fine but meant for another machine. An artifact
    without ``-mtriple`` was built for its build host, which the metadata does not name."""
    target = artifact.metadata.get("target")
    options = target.split() if isinstance(target, str) else []
    triple = next((o.partition("=")[2] for o in options if o.startswith("-mtriple=")), "")
    if not triple:
        return
    aliases = {"arm64": "aarch64", "amd64": "x86_64", "armv7l": "armv7"}
    wanted = triple.split("-")[0].lower()
    here = platform.machine().lower()
    if aliases.get(wanted, wanted) != aliases.get(here, here):
        raise ArtifactError(
            f"artifact '{artifact.path}' was compiled for {triple} (target '{target}'), and "
            f"this machine is {here}: run it on {wanted} hardware, or compile the model "
            "again without -mtriple to run it here"
        )


# dlopen handle -> [live models, descriptors named by its /proc/self/fd paths]. glibc finds
# a loaded library by name before anything else, so a descriptor whose path named a
# library is closed only once that library is unloaded: a reused number must never name
# the old library for a new file.
_HELD: dict[int, tuple[list[int], list[int]]] = {}
_HELD_LOCK = threading.Lock()


def _fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _still_loaded(name: str) -> bool:
    """Whether a loaded library answers to `name` or has the inode it opens (RTLD_NOLOAD
    loads nothing)."""
    try:
        handle = _ctypes.dlopen(name, os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    _ctypes.dlclose(handle)
    return True


def open_library(artifact: Artifact, fd: int) -> tuple[ctypes.CDLL, int]:
    """dlopen the artifact through `fd`, the descriptor its checksum was verified from, so
    the bytes loaded are the bytes verified (a file swapped in at its path since is not
    loaded). Returns the library and the descriptor it holds until :func:`close_library`.

    A file with the same inode as an already-loaded library gets that library back (glibc
    compares inodes); a file rewritten at the same path is a new inode and a new library.
    """
    check_abi(artifact)
    check_architecture(artifact)
    check_cpu_features(artifact)  # its kernels would die of SIGILL
    if not os.path.isdir("/proc/self/fd"):
        raise ArtifactError(f"cannot load artifact '{artifact.path}': /proc is not mounted")
    own = os.dup(fd)  # a number no loaded library's name holds: see _HELD
    try:
        dll = ctypes.CDLL(_fd_path(own))
    except OSError as e:
        os.close(own)
        raise ArtifactError(
            f"cannot load artifact '{artifact.path}' as a shared library: {e}. It must be "
            "built for this machine's CPU architecture and operating system (target 'llvm')"
        ) from None
    with _HELD_LOCK:
        models, fds = _HELD.setdefault(dll._handle, ([0], []))
        models[0] += 1
        fds.append(own)
    return dll, own


def close_library(handle: int) -> None:
    """dlclose one reference to a library from :func:`open_library`; the last one unloads
    it (its destructors join the pool's threads and unmap the weights) and closes its
    descriptors, unless something else keeps it loaded: then they stay open."""
    with _HELD_LOCK:
        models, fds = _HELD[handle]
        models[0] -= 1
        _ctypes.dlclose(handle)
        if models[0] > 0:
            return
        del _HELD[handle]
        if any(_still_loaded(_fd_path(fd)) for fd in fds):
            return  # loaded by someone else too: its names must stay unique
        for fd in fds:
            os.close(fd)


def _release(lib: _Library, model: int) -> None:
    """Free a model, then its reference to the library (the model's memory first: its
    code is in the library)."""
    lib.tsm_model_destroy(model)
    close_library(lib.dll._handle)


class CpuModel:
    """One model instance (its own workspace) of a CPU artifact."""

    def __init__(self, artifact: Artifact, fd: int) -> None:
        """`fd`: the open artifact file that `artifact` was read and verified from."""
        self.path = path = artifact.path
        dll, _ = open_library(artifact, fd)
        try:
            self.lib = _Library(dll, path)
            handle = self.lib.tsm_model_create()
            if not handle:
                raise ArtifactError(
                    f"artifact '{path}' could not create a model: {self.lib.last_error()}"
                )
        except BaseException:
            close_library(dll._handle)
            raise
        self.handle: int = handle
        # Not at exit: a daemon thread may still be running the model then.
        self._finalizer = weakref.finalize(self, _release, self.lib, handle)
        self._finalizer.atexit = False
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

    def output_shape(self, index: int) -> tuple[int, ...]:
        """Output ``index``'s shape in the last run (with dynamic shapes, the library
        computes it from the sizes that run learned)."""
        return self._spec(index, "output").shape

    def set_input_shape(self, index: int, shape: tuple[int, ...]) -> None:
        """The shape of input ``index`` for the next runs (a model with dynamic shapes);
        a shape the model cannot take raises InputError with the library's message."""
        if self.lib.tsm_model_set_input_shape is None:
            raise ArtifactError(f"artifact '{self.path}' predates dynamic shapes: its inputs "
                                "take the shapes they were compiled for")
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._check(self.lib.tsm_model_set_input_shape(self.handle, index, len(shape), dims),
                    InputError)

    def _check(self, status: int, error: type[TensorsmithError] = TensorsmithError) -> None:
        if status != 0:
            raise error(f"artifact '{self.path}': {self.lib.last_error()}")

    def metadata(self) -> dict[str, Any]:
        """The metadata compiled into the library (no checksum or sections)."""
        return json.loads(self.lib.tsm_artifact_metadata().decode("utf-8"))

    def set_input(self, index: int, address: int, nbytes: int) -> None:
        self._check(self.lib.tsm_model_set_input(self.handle, index, address, nbytes))

    def run(self) -> None:
        self._check(self.lib.tsm_model_run(self.handle), InputError)

    def run_profiled(self) -> list[float]:
        times = (ctypes.c_double * max(len(self.step_names), 1))()
        self._check(self.lib.tsm_model_run_profiled(self.handle, times), InputError)
        return list(times[: len(self.step_names)])

    def get_output(self, index: int, address: int, nbytes: int) -> None:
        self._check(self.lib.tsm_model_get_output(self.handle, index, address, nbytes))

    def set_num_threads(self, n: int) -> None:
        self._check(self.lib.tsm_set_num_threads(n))

    def close(self) -> None:
        """Free the model and release the library; the caller makes sure no call is running
        and none follows (GraphModule's lock and closed flag)."""
        self._finalizer()
