"""The OpenCL executor: runs an ``opencl`` artifact's plan with pyopencl.

An OpenCL artifact carries OpenCL C source, the weights and the plan (docs/artifact.md,
"OpenCL artifacts"); this module compiles the source for the chosen device once per
load (pyopencl and most drivers cache the binary per source, so later loads are fast),
gives every plan buffer its own device buffer (params filled once, here), and runs each
step as its dispatches enqueued in order on one in-order queue, which is the barrier
between them. It has the same interface as ``cpu.CpuModel``, so ``GraphModule`` above it
does the checking a user understands and this class only moves bytes.

One device buffer per plan buffer ignores the plan's workspace reuse (offsets): simpler
than sub-buffers, which need offsets aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN, and still
correct because a step only reads a plan buffer that an earlier step (or set_input)
wrote under the same index.

A model with dynamic shapes (its plan has symbols) learns them from the inputs' shapes
at each run (shapes.Binder: the CPU library's checks and messages). The buffers whose
size depends on them are cl.Buffers grown when a binding needs more and kept otherwise
(shapes.grown_size), the symbols' values are written to the plan's symbols buffers (the
kernels' trailing argument) and the launches' global sizes are counted from the
dispatch table's size expressions (shapes.GridCounter). A run at the last shape does
none of that.

pyopencl is imported here, lazily, so ``tensorsmith.runtime`` itself needs only NumPy.
"""

from __future__ import annotations

import ctypes
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorsmith.runtime._version import __version__
from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.cpu import TensorSpec
from tensorsmith.runtime.device import Device
from tensorsmith.runtime.errors import ArtifactError, DeviceError, TensorsmithError
from tensorsmith.runtime.gpu_plan import (
    Declared,
    GpuDispatch,
    GpuStep,
    check_plan,
    raise_failed_check,
    run_checks,
)
from tensorsmith.runtime.plan import PARAMS_SECTION, Buffer, Plan, Step, Tensor
from tensorsmith.runtime.shapes import (
    Binder,
    Binding,
    GridCounter,
    grown_size,
    input_shape_bytes,
    symbol_buffers,
)
from tensorsmith.runtime.shapes import nbytes as tensor_bytes

__all__ = ["OpenCLModel", "list_devices"]

OPENCL_ENTRY_VERSION = 1
"""The newest version of the metadata's "opencl" entry this runtime reads."""
INSTALL_PYOPENCL = "pip install tensorsmith-runtime[opencl]"
INSTALL_DRIVER = (
    "install an OpenCL driver: PoCL runs on any CPU (apt-get install pocl-opencl-icd "
    "ocl-icd-libopencl1); for a GPU, install its vendor's OpenCL driver. Drivers register "
    "in /etc/OpenCL/vendors/*.icd (or the directory in OCL_ICD_VENDORS)"
)
#: A ``__kernel`` of the program: its reqd_work_group_size (if any), name and parameters.
_KERNEL = re.compile(r"__kernel\s+(?:__attribute__\(\(reqd_work_group_size\(\s*(\d+)\s*,"
                     r"\s*(\d+)\s*,\s*(\d+)\s*\)\)\)\s*)?void\s+(\w+)\s*\(([^)]*)\)")
_EXTENSION_USE = {"cl_khr_fp16": "float16 arithmetic", "cl_khr_fp64": "float64 arithmetic"}


def _pyopencl() -> Any:
    try:
        import pyopencl
    except ImportError as e:
        raise DeviceError(
            f"device 'opencl' needs the pyopencl package, which cannot be imported ({e}); "
            f"install it with: {INSTALL_PYOPENCL}"
        ) from None
    return pyopencl


def list_devices() -> list[Any]:
    """Every OpenCL device of every platform, in order: ``opencl:N`` is the N-th."""
    cl = _pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:  # the ICD loader found no platform at all
        raise DeviceError(f"no OpenCL platform found ({e}); {INSTALL_DRIVER}") from None
    devices: list[Any] = []
    for platform in platforms:
        try:
            devices += platform.get_devices()
        except cl.Error:  # a platform with no devices of any type
            continue
    if not devices:
        names = ", ".join(f"'{p.name}'" for p in platforms)
        raise DeviceError(
            f"no OpenCL device found: the OpenCL platforms on this machine ({names}) have no "
            f"devices; {INSTALL_DRIVER}"
        )
    return devices


def _select(device: Device) -> Any:
    devices = list_devices()
    if device.index >= len(devices):
        have = "; ".join(
            f"opencl:{i} = '{d.name.strip()}' ({d.platform.name.strip()})"
            for i, d in enumerate(devices)
        )
        raise DeviceError(
            f"device 'opencl:{device.index}' does not exist: this machine has "
            f"{len(devices)} OpenCL device{'s' if len(devices) != 1 else ''} ({have})"
        )
    return devices[device.index]


#: Workgroups per axis a launch may count with dynamic shapes (its global size, their
#: product with the workgroup, stays within a 64-bit size_t).
MAX_GROUPS = 2**31 - 1


@dataclass
class _Dispatch:
    kernel: Any  # pyopencl.Kernel with its buffer arguments set
    global_size: tuple[int, ...]  # (with dynamic shapes: of the last binding)
    local_size: tuple[int, ...]


class OpenCLModel:
    """One model instance (its own device buffers) of an OpenCL artifact on one device."""

    def __init__(self, artifact: Artifact, device: Device) -> None:
        cl = self._cl = _pyopencl()
        self.path = artifact.path
        self._meta = artifact.metadata
        self._plan = plan = artifact.plan
        self.cl_device = _select(device)
        self.device_name = f"opencl:{device.index} '{self.cl_device.name.strip()}'"
        info = self._opencl_entry()
        self._check_extensions(info.get("extensions", []))
        self._binder: Binder | None = None
        self._binding: Binding | None = None  # the last run's (dynamic shapes)
        self._placed: Binding | None = None  # the buffers' placement's (counts at bounds)
        self._values: dict[int, bytes] = {}  # inputs' values sizes are computed from
        if plan.is_symbolic:
            most = min(int(self.cl_device.max_mem_alloc_size), 2**48)
            self._binder = Binder(self.path, plan, most,
                                  f"on OpenCL device {self.device_name}")
        self.inputs = [self._spec(io, "input", i) for i, io in enumerate(plan.inputs)]
        self.outputs = [self._spec(io, "output", i) for i, io in enumerate(plan.outputs)]
        self._shapes = [t.shape for t in self.inputs]  # of the next run
        self._input_bytes = [t.nbytes for t in self.inputs]
        # the plan buffer of each input and output (each checked by _spec)
        self._input_buffers = [int(io.buffer or 0) for io in plan.inputs]
        self._output_buffers = [int(io.buffer or 0) for io in plan.outputs]
        self.step_names = [s.label for s in plan.steps]
        self._checks = run_checks(self.path, plan)

        self._context = cl.Context([self.cl_device])
        self._queue = cl.CommandQueue(
            self._context, self.cl_device,
            properties=cl.command_queue_properties.PROFILING_ENABLE,
        )
        source = artifact.section(info.get("source_section", "opencl.source"))
        params_section = info.get("params_section", PARAMS_SECTION)
        params_bytes = (artifact.section_length(params_section)
                        if params_section in artifact.section_names() else 0)
        gpu_steps = plan_steps(self.path, plan, info, source)
        check_plan(self.path, plan.buffers, gpu_steps,
                   params_bytes=params_bytes, workspace_bytes=plan.workspace_bytes)
        self._grids = GridCounter(gpu_steps)
        program = self._build(source, str(info.get("build_options", "")))
        self._buffers = self._allocate(artifact, info)
        self._steps = [self._bind(program, s, info["kernels"]) for s in plan.steps]
        self._closed = False
        if self._binder is not None:
            self._place(self._binder.at_ones())

    # ---- loading ----------------------------------------------------------------------

    def _opencl_entry(self) -> dict[str, Any]:
        info = self._meta.get("opencl")
        if not isinstance(info, dict) or not isinstance(info.get("kernels"), dict):
            raise ArtifactError(
                f"artifact '{self.path}' has no 'opencl' dispatch table in its metadata; it "
                "was not built for target 'opencl' by a compatible tensorsmith: re-export it"
            )
        version = info.get("version", 1)
        if not isinstance(version, int) or version > OPENCL_ENTRY_VERSION:
            raise ArtifactError(
                f"artifact '{self.path}' has an opencl dispatch table of version {version!r}, "
                f"and this tensorsmith-runtime ({__version__}) reads version "
                f"{OPENCL_ENTRY_VERSION}; upgrade it (pip install -U tensorsmith-runtime)"
            )
        return info

    def _check_extensions(self, needed: list[str]) -> None:
        have = set(self.cl_device.extensions.split())
        for ext in needed:
            if ext not in have:
                use = _EXTENSION_USE.get(ext, "its kernels")
                raise DeviceError(
                    f"artifact '{self.path}' needs the OpenCL extension {ext} ({use}), which "
                    f"device {self.device_name} does not have; run it on a device with {ext}"
                    + (", or compile it without -float16-arithmetic=1 (float16 then runs on "
                       "every device, computed in float)" if ext == "cl_khr_fp16" else "")
                )

    def _spec(self, io: Tensor, kind: str, index: int) -> TensorSpec:
        """An input's or output's spec as reported before any run: with dynamic shapes,
        its shape and bytes with every symbol 1 (as the CPU library reports them)."""
        buffer = self._buffer_entry(io.buffer, f"{kind} {io.name!r}")
        if self._binder is None:
            return TensorSpec(io.name, io.dtype, io.shape, buffer.nbytes)
        ones = self._binder.at_ones()
        shape = (ones.input_shapes if kind == "input" else ones.output_shapes)[index]
        return TensorSpec(io.name, io.dtype, shape, tensor_bytes(shape, io.dtype))

    def _buffer_entry(self, index: int | None, user: str) -> Buffer:
        buffers = self._plan.buffers
        if index is None or not 0 <= index < len(buffers):
            raise ArtifactError(
                f"artifact '{self.path}' is inconsistent: {user} uses buffer {index!r} and "
                f"the plan has {len(buffers)} buffers; re-export it"
            )
        return buffers[index]

    def _build(self, source: bytes, options: str) -> Any:
        cl = self._cl
        try:
            with warnings.catch_warnings():  # build logs of generated code are not actionable
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(self._context, source.decode("utf-8")).build(options=options)
        except cl.Error as e:
            raise DeviceError(
                f"the OpenCL compiler of device {self.device_name} rejected the program of "
                f"artifact '{self.path}': {str(e).strip()[-2000:]}"
            ) from None

    def _allocate(self, artifact: Artifact, info: dict[str, Any]) -> list[Any]:
        cl = self._cl
        mf = cl.mem_flags
        entries = self._plan.buffers
        params = b""
        if any(b.kind == "param" for b in entries):
            params = artifact.section(info.get("params_section", PARAMS_SECTION))
        buffers = []
        for b in entries:
            nbytes, offset = b.nbytes, b.offset
            if b.kind == "param" and nbytes > 0:  # within params: check_plan
                host = np.frombuffer(params, np.uint8, nbytes, offset)
                buffers.append(cl.Buffer(self._context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                                         hostbuf=host))
            else:  # zero-sized buffers still need a valid cl_mem to bind
                buffers.append(cl.Buffer(self._context, mf.READ_WRITE, size=max(nbytes, 4)))
        return buffers

    def _bind(self, program: Any, step: Step, table: dict[str, Any]) -> list[_Dispatch]:
        cl = self._cl
        name = step.kernel
        if name not in table:
            raise ArtifactError(
                f"artifact '{self.path}' is inconsistent: step kernel {name!r} has no entry "
                "in its opencl dispatch table; re-export it"
            )
        for i in step.args:
            self._buffer_entry(i, f"step {name!r}")
        args = [self._buffers[i] for i in step.args]
        dispatches = []
        for d in table[name]:
            grid, workgroup = _grid(d.get("grid")), _triple(d.get("workgroup"))
            if grid is None or workgroup is None:
                raise ArtifactError(f"artifact '{self.path}' has a bad dispatch for kernel "
                                    f"{name!r}: {d!r}; re-export it")
            kernel = cl.Kernel(program, str(d["entry"]))
            kernel.set_args(*args)
            self._check_workgroup(kernel, str(d["entry"]), workgroup)
            static = all(isinstance(g, int) for g in grid)  # else counted per binding
            dispatches.append(_Dispatch(
                kernel, tuple(int(g) * w for g, w in zip(grid, workgroup)) if static else (),
                workgroup))
        return dispatches

    def _check_workgroup(self, kernel: Any, entry: str, workgroup: tuple[int, ...]) -> None:
        limit = kernel.get_work_group_info(
            self._cl.kernel_work_group_info.WORK_GROUP_SIZE, self.cl_device)
        sizes = self.cl_device.max_work_item_sizes
        if math.prod(workgroup) > limit or any(w > s for w, s in zip(workgroup, sizes)):
            raise DeviceError(
                f"kernel {entry} of artifact '{self.path}' needs work-groups of "
                f"{list(workgroup)} work-items and device {self.device_name} allows at most "
                f"{limit} ({list(sizes)} per axis); compile it with a smaller GPU workgroup size"
            )

    # ---- the executor interface (the same as cpu.CpuModel) -------------------------

    def metadata(self) -> dict[str, Any]:
        """The artifact's metadata, less checksum and sections (like the CPU library's)."""
        return {k: v for k, v in self._meta.items() if k not in ("checksum", "sections")}

    def set_input(self, index: int, address: int, nbytes: int) -> None:
        spec = self._io(self.inputs, index, nbytes, "input")
        if self._binder is not None:  # its buffer holds the input's shape of the next run
            self._fit(self._input_buffers[index], nbytes)
            if index in self._binder.value_inputs:  # sizes are computed from its values
                self._values[index] = ctypes.string_at(address, nbytes)
        if nbytes:
            buffer = self._buffers[self._input_buffers[index]]
            self._copy(lambda: self._cl.enqueue_copy(
                self._queue, buffer, _host(address, nbytes), is_blocking=True),
                f"copying input {spec.name!r} to the device")

    def run(self) -> None:
        self._rebind()
        self._enqueue_all(record=False)
        self._test_checks()

    def run_profiled(self) -> list[float]:
        """Run once; the device time of each step (sum of its dispatches), in ms."""
        self._rebind()
        events = self._enqueue_all(record=True)
        self._test_checks()
        return [sum((e.profile.end - e.profile.start) * 1e-6 for e in step) for step in events]

    def get_output(self, index: int, address: int, nbytes: int) -> None:
        spec = self._io(self.outputs, index, nbytes, "output")
        if nbytes:
            buffer = self._buffers[self._output_buffers[index]]
            self._copy(lambda: self._cl.enqueue_copy(
                self._queue, _host(address, nbytes), buffer, is_blocking=True),
                f"copying output {spec.name!r} from the device")

    def set_num_threads(self, n: int) -> None:
        """Accepted for the common interface: the OpenCL driver decides its parallelism."""

    # ---- dynamic shapes -----------------------------------------------------------------

    def set_input_shape(self, index: int, shape: tuple[int, ...]) -> None:
        """The shape of input ``index`` for the next runs (a model with dynamic shapes); a
        shape the model cannot take raises InputError, as on the CPU."""
        self._check_open()
        self._input_bytes[index] = input_shape_bytes(self._binder, self.path, index, shape)
        self._shapes[index] = tuple(int(d) for d in shape)

    def output_shape(self, index: int) -> tuple[int, ...]:
        """Output ``index``'s shape in the last run (its static shape without symbols)."""
        if self._binding is None:
            return self.outputs[index].shape
        return self._binding.output_shapes[index]

    def _rebind(self) -> None:
        """Learn the symbols from the inputs' shapes; where they changed, place the
        buffers again, write the symbols' values and count the launches."""
        if self._binder is None:
            return
        binding = self._binder.bind(self._shapes, self._values.__getitem__)
        if self._placed is None or binding.values != self._placed.values:
            self._place(binding)
        elif binding.values != self._binding.values:  # the last run counted sizes
            self._launch(binding)

    def _place(self, binding: Binding) -> None:
        for k, n in binding.buffer_bytes.items():
            self._fit(k, n)
        self._placed = binding
        self._launch(binding)

    def _launch(self, binding: Binding) -> None:
        """The launches' sizes and the symbols' values of ``binding``."""
        grids = self._grids.count(binding, (MAX_GROUPS,) * 3, f"artifact '{self.path}'")
        for step, counts in zip(self._steps, grids):
            for d, grid in zip(step, counts):
                d.global_size = tuple(g * w for g, w in zip(grid, d.local_size))
        for k, names in symbol_buffers(self._plan.buffers).items():
            values = np.array([binding.symbols[n] for n in names], dtype=np.int64)
            self._copy(lambda k=k, values=values: self._cl.enqueue_copy(
                self._queue, self._buffers[k], values, is_blocking=True),
                "writing the sizes of the run to the device")
        self._binding = binding

    def _fit(self, k: int, size: int) -> None:
        """Make plan buffer ``k`` (of dynamic size) hold ``size`` bytes: kept where it
        does, else replaced by a larger one, which the kernels that take it then bind."""
        grown = grown_size(self._buffers[k].size, max(size, 4))
        if grown is None:
            return
        cl = self._cl
        try:
            new = cl.Buffer(self._context, cl.mem_flags.READ_WRITE, size=grown)
        except cl.Error as e:
            raise DeviceError(f"artifact '{self.path}': allocating {grown} bytes for buffer "
                              f"{k} on device {self.device_name} failed: {e}") from None
        self._buffers[k].release()
        self._buffers[k] = new
        for step, plan_step in zip(self._steps, self._plan.steps):
            if k in plan_step.args:
                args = [self._buffers[i] for i in plan_step.args]
                for d in step:
                    d.kernel.set_args(*args)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.finish()
        for buffer in self._buffers:
            buffer.release()
        self._buffers, self._steps = [], []

    # ---- internals ------------------------------------------------------------------

    def _io(self, specs: list[TensorSpec], index: int, nbytes: int, kind: str) -> TensorSpec:
        self._check_open()
        if not 0 <= index < len(specs):
            raise TensorsmithError(f"artifact '{self.path}': no {kind} {index}")
        spec = specs[index]
        want = spec.nbytes
        if self._binder is not None:
            want = (self._input_bytes[index] if kind == "input" else
                    tensor_bytes(self.output_shape(index), spec.dtype))
        if nbytes != want:
            raise TensorsmithError(
                f"artifact '{self.path}': {kind} {spec.name!r} has {want} bytes, got {nbytes}"
            )
        return spec

    def _enqueue_all(self, record: bool) -> list[list[Any]]:
        self._check_open()
        cl = self._cl
        events: list[list[Any]] = []
        current = "(waiting for the queue)"
        try:
            for index, step in enumerate(self._steps):
                current = self.step_names[index]
                step_events = [cl.enqueue_nd_range_kernel(self._queue, d.kernel, d.global_size,
                                                          d.local_size)
                               for d in step if 0 not in d.global_size]
                if record:
                    events.append(step_events)
                if self._binder is not None and index in self._binder.counting_steps:
                    self._launch(self._binder.count(self._binding, index, self._read_count))
            self._queue.finish()
        except cl.Error as e:
            raise TensorsmithError(
                f"artifact '{self.path}': running step {current!r} on device "
                f"{self.device_name} failed: {e}"
            ) from None
        return events

    def _read_count(self, buffer: int) -> int:
        """The int64 a kernel counted into plan buffer ``buffer`` (waits for it)."""
        count = np.zeros(1, dtype=np.int64)
        self._copy(lambda: self._cl.enqueue_copy(
            self._queue, count, self._buffers[buffer], is_blocking=True),
            "reading a count of the run from the device")
        return int(count[0])

    def _test_checks(self) -> None:
        flag = np.zeros(1, dtype=np.int32)

        def read_flag(_: int, check: Any) -> int:
            self._copy(lambda: self._cl.enqueue_copy(
                self._queue, flag, self._buffers[check.buffer], is_blocking=True),
                "reading a check of the run from the device")
            return int(flag[0])

        raise_failed_check(self.path, self._checks, read_flag)

    def _copy(self, action: Any, what: str) -> None:
        try:
            action()
        except self._cl.Error as e:
            raise TensorsmithError(
                f"artifact '{self.path}': {what} ({self.device_name}) failed: {e}"
            ) from None

    def _check_open(self) -> None:
        if self._closed:
            raise TensorsmithError(f"the model of artifact '{self.path}' is closed")


def plan_steps(path: Any, plan: Plan, info: dict[str, Any], source: bytes) -> list[GpuStep]:
    """The plan's steps in the shape check_plan takes, each dispatch with what its
    ``__kernel`` in the program declares (every step argument is a kernel argument)."""
    declared = _declarations(source.decode("utf-8", errors="replace"))
    steps = []
    for s in plan.steps:
        name = s.kernel
        table = info["kernels"].get(name)
        if not isinstance(table, list):
            raise ArtifactError(f"artifact '{path}' is inconsistent: step kernel {name!r} has "
                                "no entry in its opencl dispatch table; re-export it")
        dispatches = []
        for d in table:
            d = d if isinstance(d, dict) else {}
            entry = d.get("entry")
            grid, workgroup = _grid(d.get("grid")), _triple(d.get("workgroup"))
            if entry not in declared or grid is None or workgroup is None:
                raise ArtifactError(f"artifact '{path}' has a bad dispatch for kernel {name!r} "
                                    f"(no such __kernel in its program, or a bad grid): {d!r}; "
                                    "re-export it")
            dispatches.append(GpuDispatch(entry, grid, workgroup, None, declared[entry]))
        steps.append(GpuStep(s.label, s.args, tuple(dispatches)))
    return steps


def _declarations(source: str) -> dict[str, Declared]:
    """Each ``__kernel``'s compiled-in workgroup size and parameter numbers."""
    found = {}
    for m in _KERNEL.finditer(source):
        params = m.group(5).strip()
        count = 0 if params in ("", "void") else params.count(",") + 1
        size = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m.group(1) else None
        found[m.group(4)] = Declared(size, frozenset(range(count)))
    return found


def _host(address: int, nbytes: int) -> np.ndarray:
    """The caller's memory at ``address`` as a byte array (no copy)."""
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))


def _triple(value: Any) -> tuple[int, int, int] | None:
    ok = isinstance(value, list) and len(value) == 3
    if not ok or not all(isinstance(v, int) and v > 0 for v in value):
        return None
    return (value[0], value[1], value[2])


def _grid(value: Any) -> tuple[int | str, int | str, int | str] | None:
    """A dispatch's workgroup counts: positive ints, or (dynamic shapes) the text of a
    size expression, counted per run."""
    ok = isinstance(value, list) and len(value) == 3
    if not ok or not all(isinstance(v, str) or (isinstance(v, int) and v > 0) for v in value):
        return None
    return (value[0], value[1], value[2])
