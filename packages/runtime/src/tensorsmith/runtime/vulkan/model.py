"""VulkanModel: the executor of ``vulkan`` artifacts, with the interface of cpu.CpuModel.

Load does all the work once: check the plan, pick the device, allocate the params and
workspace buffers (and staging buffers on discrete GPUs), upload the params, build the
pipelines and descriptor sets, record the one command buffer. A run is then one submit
and one fence wait; set_input/get_output are memory copies into or out of mapped
memory.

A model with dynamic shapes (its plan has symbols) learns them from the inputs' shapes
at each run (shapes.Binder: the CPU library's checks and messages). Its inputs wait in
host memory until then; when the symbols change, the buffers whose size depends on them
are placed again (shaped.py: grown when they need more room, kept otherwise), the
descriptor sets rewritten, the symbols' values written and the command buffer recorded
again with the new workgroup counts. A run at the last shape does none of that.

``GraphModule`` above does the checking a user understands; this class moves bytes and
reports device problems as DeviceError.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.cpu import TensorSpec
from tensorsmith.runtime.device import Device
from tensorsmith.runtime.errors import ArtifactError, DeviceError, TensorsmithError
from tensorsmith.runtime.gpu_plan import raise_failed_check
from tensorsmith.runtime.plan import PARAMS_SECTION
from tensorsmith.runtime.shapes import (
    Binder,
    Binding,
    GridCounter,
    grown_size,
    input_shape_bytes,
    nbytes,
    symbol_buffers,
)

from .commands import CommandRecorder, Copy, Submitter
from .context import DeviceContext, device_context
from .layout import Layout, place
from .memory import DOWNLOAD, UPLOAD, DeviceBuffer, choose_mode, create_buffer, destroy_buffer
from .pipelines import DescriptorSets, Pipelines
from .plan import VulkanPlan, held_shape, parse
from .shaped import ShapedLayout, Triple, shaped_layout
from .timestamps import StepTimer

__all__ = ["VulkanModel"]


class VulkanModel:
    """One model instance (its own buffers and command buffer) on one Vulkan device."""

    def __init__(self, artifact: Artifact, device: Device) -> None:
        self.path = artifact.path
        self._meta = artifact.metadata
        self.plan: VulkanPlan = parse(artifact)
        self.ctx: DeviceContext = device_context(device.index)
        self.device_name = self.ctx.name
        self._check_features()
        self.shaped: ShapedLayout | None = None  # the current binding (dynamic shapes)
        self._counted: Binding | None = None  # the last run's, where it counted sizes
        self.binder: Binder | None = None
        if artifact.plan.is_symbolic:
            limits = self.ctx.physical.limits
            # every size fits int32 (the kernels' indices) and one storage binding
            most = min(2**31 - 1, int(limits["maxStorageBufferRange"]))
            self.binder = Binder(artifact.path, artifact.plan, most,
                                 f"on Vulkan device {self.ctx.name}")
            self._grids = GridCounter(self.plan.steps)
            ones = self.binder.at_ones()
            self._shapes = list(ones.input_shapes)
        self.inputs: list[TensorSpec] = [self._spec(io.tensor, i, "in")
                                         for i, io in enumerate(self.plan.inputs)]
        self.outputs: list[TensorSpec] = [self._spec(io.tensor, i, "out")
                                          for i, io in enumerate(self.plan.outputs)]
        if self.binder is not None:
            self._input_bytes = [t.nbytes for t in self.inputs]
            self._host_inputs = [ctypes.create_string_buffer(max(t.nbytes, 1))
                                 for t in self.inputs]
        self.step_names = [s.name for s in self.plan.steps]
        self.mode = choose_mode(self.ctx)
        self._closed = False
        self._resources: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _release, self.ctx.handle, self._resources)
        try:
            self._load(artifact)
        except BaseException:
            self._finalizer()
            raise

    def _spec(self, spec: TensorSpec, index: int, kind: str) -> TensorSpec:
        """An input's or output's spec as reported before any run: with dynamic shapes,
        its shape and bytes with every symbol 1 (as the CPU library reports them)."""
        if self.binder is None:
            return spec
        ones = self.binder.at_ones()
        shape = (ones.input_shapes if kind == "in" else ones.output_shapes)[index]
        return TensorSpec(spec.name, spec.dtype, shape, nbytes(shape, spec.dtype))

    def _load(self, artifact: Artifact) -> None:
        where = f"artifact '{self.path}'"
        limits = self.ctx.physical.limits
        self.layout: Layout = place(self.plan.buffers, limits["minStorageBufferOffsetAlignment"],
                                    self.plan.workspace_bytes, self.plan.params_bytes)
        self._check_ranges(limits["maxStorageBufferRange"])
        self._allocate(artifact)
        self._resources["pipelines"] = self.pipelines = pipelines = Pipelines(
            self.ctx, self.plan.steps, artifact.section, where)
        if self.binder is not None:
            self._place(self.binder.at_ones())
        self._resources["sets"] = self.sets = sets = DescriptorSets(
            self.ctx, self.plan.steps, pipelines, self._resolve)
        self._resources["timer"] = self.timer = StepTimer(self.ctx, len(self.plan.steps))
        self._resources["submitter"] = self.submitter = Submitter(self.ctx)
        self._record(pipelines, sets)

    # ---- dynamic shapes -----------------------------------------------------------------

    def _place(self, binding: Any) -> None:
        """Place the buffers of ``binding`` (growing the dynamic region and the staging
        buffers where it needs more) and write the symbols' values."""
        limits = self.ctx.physical.limits
        grids = self._grids.count(binding, limits["maxComputeWorkGroupCount"],
                                  f"artifact '{self.path}'")
        shaped = shaped_layout(
            binding, self.plan.buffers, grids,
            [nbytes(s, t.dtype) for s, t in zip(binding.input_shapes, self.inputs)],
            [nbytes(s, t.dtype) for s, t in zip(binding.output_shapes, self.outputs)],
            len(self.plan.checks), limits["minStorageBufferOffsetAlignment"],
            len(self.binder.plan.counted) if self.binder is not None else 0)
        storage = "direct" if self.mode == "direct" else "storage"
        self._grow("dynamic", shaped.region_bytes, storage, "the buffers of dynamic size")
        if self.mode == "staging":
            self._grow("upload", shaped.upload_bytes, UPLOAD, "the input staging buffer")
            self._grow("download", shaped.download_bytes, DOWNLOAD, "the output staging buffer")
        self.shaped = shaped
        self._write_symbols(binding)

    def _write_symbols(self, binding: Binding) -> None:
        """The symbols' values of ``binding`` into the symbol buffers (with staging: into
        the upload buffer, which the next command buffer copies up)."""
        assert self.shaped is not None
        for k, names in symbol_buffers(self.plan.buffers).items():
            values = np.array([binding.symbols[n] for n in names], dtype=np.int64)
            if self.mode == "staging":
                buf, offset = self._resources["upload"], self.shaped.symbols_upload[k]
            else:
                p = self.layout.placements[k]
                buf, offset = self._resources[p.region], p.offset
            buf.write(offset, values.ctypes.data, values.nbytes)

    def _grow(self, name: str, size: int, kind: str, what: str) -> None:
        """Make buffer ``name`` hold ``size`` bytes: kept if it does, else replaced by one
        of half as much again (so that slowly growing shapes reallocate rarely)."""
        old = self._resources.get(name)
        grown = grown_size(None if old is None else old.size, size)
        if grown is None:
            return
        new = create_buffer(self.ctx, grown, kind, what)
        if old is not None:
            destroy_buffer(self.ctx.handle, old)
        self._resources[name] = new

    def _rebind(self) -> None:
        """Learn the symbols from the inputs' shapes; where they changed, move the buffers
        and record the command buffer again."""
        assert self.binder is not None and self.shaped is not None
        binding = self.binder.bind(
            self._shapes, lambda i: memoryview(self._host_inputs[i])[:self._input_bytes[i]])
        if binding.values == self.shaped.binding.values:
            return
        self._place(binding)
        self.sets.rewrite(self.plan.steps, self._resolve)
        self.submitter.reset()
        self._record(self.pipelines, self.sets)

    def set_input_shape(self, index: int, shape: tuple[int, ...]) -> None:
        """The shape of input ``index`` for the next runs (a model with dynamic shapes); a
        shape the model cannot take raises InputError, as on the CPU."""
        self._check_open()
        n = input_shape_bytes(self.binder, self.path, index, shape)
        self._shapes[index] = tuple(int(d) for d in shape)
        self._input_bytes[index] = n
        if len(self._host_inputs[index]) < n:
            self._host_inputs[index] = ctypes.create_string_buffer(n)

    def output_shape(self, index: int) -> tuple[int, ...]:
        """Output ``index``'s shape in the last run (its static shape without symbols)."""
        if self.shaped is None:
            return self.outputs[index].shape
        return self._run_binding().output_shapes[index]

    def _run_binding(self) -> Binding:
        """The binding of the last run: the placement's, or what its counts made of it."""
        assert self.shaped is not None
        return self._counted if self._counted is not None else self.shaped.binding

    # ---- loading ----------------------------------------------------------------------

    def _check_features(self) -> None:
        self._check_matrices()
        self._check_held_matrices()
        missing = [f for f in self.plan.features if f not in self.ctx.enabled]
        if missing:
            raise DeviceError(
                f"artifact '{self.path}' needs the Vulkan feature{'s' if len(missing) > 1 else ''}"
                f" {', '.join(missing)}, which device {self.ctx.name} does not have; run it "
                "on another device (see tensorsmith.runtime.vulkan.list_devices())")

    def _check_matrices(self) -> None:
        """An artifact built for cooperative matrices (``vulkan -cooperative-matrix=``)
        loads only where the device multiplies those shapes with subgroups of the size
        the kernels were built for."""
        needs = self.plan.cooperative_matrix
        if needs is None:
            return
        physical = self.ctx.physical
        rebuild = ("; build it for plain 'vulkan' to run here (`tensorsmith devices` lists "
                   "what each device offers)")
        if not physical.features.get("cooperativeMatrix"):
            raise DeviceError(
                f"artifact '{self.path}' was built for cooperative matrices (its kernels "
                f"multiply {', '.join(needs['shapes'])}), and device {self.ctx.name} has no "
                f"VK_KHR_cooperative_matrix{rebuild}")
        missing = [s for s in needs["shapes"] if s not in physical.matrix_shapes()]
        if missing:
            have = ", ".join(sorted(physical.matrix_shapes())) or "none at subgroup scope"
            raise DeviceError(
                f"artifact '{self.path}' multiplies cooperative matrices of {', '.join(missing)}"
                f", which device {self.ctx.name} does not offer (it offers {have}){rebuild}")
        if physical.subgroup_size and physical.subgroup_size != needs["subgroup_size"]:
            raise DeviceError(
                f"artifact '{self.path}' was built for subgroups of {needs['subgroup_size']} "
                f"invocations and device {self.ctx.name} has subgroups of "
                f"{physical.subgroup_size}; build it with -subgroup-size="
                f"{physical.subgroup_size}")

    def _check_held_matrices(self) -> None:
        """An artifact built for workgroup-held matrices (``-workgroup-matrix=``) loads
        only where the device computes each of its blocks in workgroups of its kernels'
        size."""
        needs = self.plan.workgroup_matrix
        if needs is None:
            return
        held = self.ctx.physical.workgroup_matrices
        rebuild = ("; build it without -workgroup-matrix to run here (`tensorsmith devices` "
                   "lists what each device offers)")
        if held is None:
            raise DeviceError(
                f"artifact '{self.path}' was built for matrices a workgroup holds (its "
                f"kernels multiply {', '.join(needs['shapes'])}), and device {self.ctx.name} "
                f"has no VK_NV_cooperative_matrix2 with workgroup scope{rebuild}")
        missing = []
        for text in needs["shapes"]:
            shape = held_shape(text)
            assert shape is not None  # checked by plan.parse
            m, n, k, invocations, a, c = shape
            if not held.fits(m, n, k, a, c, invocations):
                missing.append(text)
        if missing:
            offered = "; ".join(str(s) for s in held.shapes if s.usable) or "none usable"
            raise DeviceError(
                f"artifact '{self.path}' multiplies workgroup-held matrices of "
                f"{', '.join(missing)}, which device {self.ctx.name} does not offer (it "
                f"offers {offered}, dimensions up to {held.max_dimension}){rebuild}")

    def _check_ranges(self, most: int) -> None:
        for i, p in enumerate(self.layout.placements):
            if p.range > most:
                raise DeviceError(
                    f"buffer {i} of artifact '{self.path}' has {p.range} bytes and device "
                    f"{self.ctx.name} binds at most {most} bytes per storage buffer")

    def _allocate(self, artifact: Artifact) -> None:
        r, ctx = self._resources, self.ctx
        storage = "direct" if self.mode == "direct" else "storage"
        r["params"] = create_buffer(ctx, self.layout.params_size, storage, "the weights")
        r["workspace"] = create_buffer(ctx, self.layout.workspace_size, storage, "the workspace")
        has_params = any(b.kind == "param" for b in self.plan.buffers)
        params = artifact.section(PARAMS_SECTION) if has_params else b""
        self._upload_params(params)
        if self.mode == "staging" and self.binder is None:  # else sized per shape (_place)
            self._staging_offsets: dict[tuple[str, int], int] = {}
            up = self._pack("in", [io.tensor.nbytes for io in self.plan.inputs])
            # the checks' flags come back after the outputs (4 bytes each)
            down = self._pack("out", [io.tensor.nbytes for io in self.plan.outputs]
                              + [4] * len(self.plan.checks))
            r["upload"] = create_buffer(ctx, up, UPLOAD, "the input staging buffer")
            r["download"] = create_buffer(ctx, down, DOWNLOAD, "the output staging buffer")

    def _pack(self, kind: str, sizes: list[int]) -> int:
        offset = 0
        for i, n in enumerate(sizes):
            self._staging_offsets[(kind, i)] = offset
            offset += -(-n // 16) * 16
        return offset

    def _upload_params(self, params: bytes) -> None:
        """Put every param buffer's bytes at its placement in the params VkBuffer."""
        target: DeviceBuffer = self._resources["params"]
        pieces: list[tuple[int, bytes]] = []
        for i, (b, p) in enumerate(zip(self.plan.buffers, self.layout.placements)):
            if b.kind != "param" or b.nbytes == 0:
                continue
            if b.offset + b.nbytes > len(params):
                raise ArtifactError(
                    f"artifact '{self.path}' is inconsistent: param buffer {i} lies at bytes "
                    f"{b.offset}..{b.offset + b.nbytes} of a {len(params)}-byte params "
                    "section; re-export it")
            pieces.append((p.offset, params[b.offset:b.offset + b.nbytes]))
        if not self.layout.repacked and params:
            pieces = [(0, params)]
        if not pieces:
            return
        if target.address is not None:
            for offset, data in pieces:
                _memmove_in(target, offset, data)
            return
        size = max(o + len(d) for o, d in pieces)
        staging = create_buffer(self.ctx, size, UPLOAD, "uploading the weights")
        try:
            for offset, data in pieces:
                _memmove_in(staging, offset, data)
            submitter = Submitter(self.ctx)
            try:
                rec = CommandRecorder(submitter.cmd)
                rec.copies([(staging.buffer, target.buffer, o, o, len(d)) for o, d in pieces])
                rec.end()
                submitter.run(f"uploading the weights of artifact '{self.path}'")
            finally:
                submitter.destroy()
        finally:
            destroy_buffer(self.ctx.handle, staging)

    def _resolve(self, buffer: int) -> tuple[Any, int, int]:
        if self.shaped is not None and buffer in self.shaped.offsets:
            size = max(self.shaped.binding.buffer_bytes[buffer], 4)
            return self._resources["dynamic"].buffer, self.shaped.offsets[buffer], size
        p = self.layout.placements[buffer]
        return self._resources[p.region].buffer, p.offset, p.range

    def _record(self, pipelines: Pipelines, sets: DescriptorSets, start: int = 0,
                stop: int | None = None, grids: list[list[Triple]] | None = None,
                counts: bool = False) -> None:
        """Record steps ``start`` to ``stop`` (all of them by default) with ``grids`` (the
        placement's by default). A part that does not start the run waits for the parts
        before it and (staging) copies the symbols up first; a part that ends at a
        counting step (``counts``) ends with (staging) the count of its last step copied
        down (:meth:`_read_count`), the last part with the outputs."""
        steps = self.plan.steps
        stop = len(steps) if stop is None else stop
        if grids is None and self.shaped is not None:
            grids = self.shaped.grids
        rec = CommandRecorder(self.submitter.cmd)
        staging = self.mode == "staging"
        if start == 0:
            self.timer.reset(rec.cmd)
            if staging:
                rec.copies(self._input_copies())
                rec.barrier("transfer", "compute")
            self.timer.mark(rec.cmd, 0)
        else:
            rec.barrier("compute", "compute")  # the parts submitted before this one
            if staging:
                rec.copies(self._symbol_copies())
                rec.barrier("transfer", "compute")
        for i in range(start, stop):
            for j, (d, descriptor_set) in enumerate(zip(steps[i].dispatches, sets.sets[i])):
                p = pipelines.by_section[d.section]
                grid = d.grid if grids is None else grids[i][j]
                rec.dispatch(p.handle, p.layout, descriptor_set, grid)  # type: ignore[arg-type]
                rec.barrier("compute", "compute")
            self.timer.mark(rec.cmd, i + 1)
        if staging:
            rec.barrier("compute", "transfer")
            if counts:
                rec.copies(self._count_copies(stop - 1))
            else:
                rec.copies(self._output_copies())
            rec.barrier("transfer", "host")
        else:
            rec.barrier("compute", "host")
        rec.end()

    def _run_counting(self, where: str) -> None:
        """A run of a plan whose kernels count sizes: one submission up to each step that
        counts, then its counts read, the later steps' workgroups counted again and the
        symbols rewritten, and the next part recorded and submitted. Where the last step
        counts, the last part runs no step: it copies the outputs of the counted shapes."""
        assert self.binder is not None and self.shaped is not None
        binding, grids, start = self.shaped.binding, self.shaped.grids, 0
        self._counted = None
        limits = self.ctx.physical.limits["maxComputeWorkGroupCount"]
        stops = sorted(s + 1 for s in self.binder.counting_steps)
        for k, stop in enumerate([*stops, len(self.plan.steps)]):
            counts = k < len(stops)
            self.submitter.reset()
            self._record(self.pipelines, self.sets, start, stop, grids, counts)
            self.submitter.run(where)
            if counts:
                binding = self.binder.count(binding, stop - 1, self._read_count)
                grids = self._grids.count(binding, limits, where)
                self._write_symbols(binding)
                self._counted = binding  # (the last part copies the outputs of its shapes)
            start = stop
        self._write_symbols(self.shaped.binding)  # the placement's again, for the next run

    def _symbol_copies(self) -> list[Copy]:
        assert self.shaped is not None
        up = self._resources["upload"].buffer
        copies = []
        for k, at in self.shaped.symbols_upload.items():
            dst, offset, size = self._resolve(k)
            copies.append((up, dst, at, offset, size))
        return copies

    def _count_copies(self, step: int) -> list[Copy]:
        """The counts step ``step`` writes, down to the download buffer (free until the
        outputs come down): the k-th counted size's at 8 k bytes."""
        down = self._resources["download"].buffer
        copies = []
        for k, c in enumerate(self.binder.plan.counted if self.binder is not None else ()):
            if c.step == step:
                src, offset, _ = self._resolve(c.buffer)
                copies.append((src, down, offset, 8 * k, 8))
        return copies

    def _read_count(self, buffer: int) -> int:
        """The int64 a kernel counted into plan buffer ``buffer``, after its part ran."""
        count = np.zeros(1, dtype=np.int64)
        if self.mode == "staging":
            assert self.binder is not None
            k = next(k for k, c in enumerate(self.binder.plan.counted) if c.buffer == buffer)
            self._resources["download"].read(8 * k, count.ctypes.data, 8)
        else:
            p = self.layout.placements[buffer]
            self._resources[p.region].read(p.offset, count.ctypes.data, 8)
        return int(count[0])

    def _input_copies(self) -> list[Copy]:
        up = self._resources["upload"].buffer
        copies = []
        for i, io in enumerate(self.plan.inputs):
            dst, offset, _ = self._resolve(io.buffer)
            copies.append((up, dst, self._up_offset(i), offset, self._in_bytes(i)))
        if self.shaped is not None:
            copies += self._symbol_copies()
        return copies

    def _up_offset(self, i: int) -> int:
        return self._staging_offsets[("in", i)] if self.shaped is None else self.shaped.upload[i]

    def _down_offset(self, k: int) -> int:
        return (self._staging_offsets[("out", k)] if self.shaped is None
                else self.shaped.download[k])

    def _in_bytes(self, i: int) -> int:
        return self.inputs[i].nbytes if self.binder is None else self._input_bytes[i]

    def _out_bytes(self, i: int) -> int:
        if self.shaped is None:
            return self.outputs[i].nbytes
        return nbytes(self._run_binding().output_shapes[i], self.outputs[i].dtype)

    def _output_copies(self) -> list[Copy]:
        down = self._resources["download"].buffer
        copies = []
        for i, io in enumerate(self.plan.outputs):
            src, offset, _ = self._resolve(io.buffer)
            copies.append((src, down, offset, self._down_offset(i), self._out_bytes(i)))
        for k, check in enumerate(self.plan.checks, start=len(self.plan.outputs)):
            src, offset, _ = self._resolve(check.buffer)
            copies.append((src, down, offset, self._down_offset(k), 4))
        return copies

    # ---- the executor interface (the same as cpu.CpuModel) -----------------------------

    def metadata(self) -> dict[str, Any]:
        """The artifact's metadata, less checksum and sections (like the CPU library's)."""
        return {k: v for k, v in self._meta.items() if k not in ("checksum", "sections")}

    def set_input(self, index: int, address: int, nbytes: int) -> None:
        self._io(self.inputs, index, nbytes, "input")
        if self.binder is not None:  # placed once the run knows every input's shape
            ctypes.memmove(self._host_inputs[index], address, nbytes)
            return
        buf, offset = self._host_location("in", index, self.plan.inputs[index].buffer)
        buf.write(offset, address, nbytes)

    def run(self) -> None:
        self._check_open()
        if self.binder is not None:
            self._rebind()
            for i, io in enumerate(self.plan.inputs):
                buf, offset = self._host_location("in", i, io.buffer)
                buf.write(offset, ctypes.addressof(self._host_inputs[i]), self._input_bytes[i])
        if self.binder is not None and self.binder.counting_steps:
            self._run_counting(f"artifact '{self.path}'")
        else:
            self.submitter.run(f"artifact '{self.path}'")
        self._test_checks()

    def run_profiled(self) -> list[float]:
        """Run once; the device time of each step (sum of its dispatches), in ms."""
        self.run()
        return self.timer.step_ms(f"artifact '{self.path}'")

    def get_output(self, index: int, address: int, nbytes: int) -> None:
        self._io(self.outputs, index, nbytes, "output")
        buf, offset = self._host_location("out", index, self.plan.outputs[index].buffer)
        buf.read(offset, address, nbytes)

    def set_num_threads(self, n: int) -> None:
        """Accepted for the common interface: the Vulkan driver decides its parallelism."""

    def close(self) -> None:
        self._closed = True
        self._finalizer()

    # ---- internals --------------------------------------------------------------------

    def _test_checks(self) -> None:
        """The checks' flags come back after the outputs (see _allocate)."""
        flag = np.zeros(1, dtype=np.int32)

        def read_flag(k: int, check: Any) -> int:
            buf, offset = self._host_location("out", len(self.plan.outputs) + k, check.buffer)
            buf.read(offset, flag.ctypes.data, 4)
            return int(flag[0])

        raise_failed_check(self.path, self.plan.checks, read_flag)

    def _host_location(self, kind: str, index: int, buffer: int) -> tuple[DeviceBuffer, int]:
        if self.mode == "staging":
            if kind == "in":
                return self._resources["upload"], self._up_offset(index)
            return self._resources["download"], self._down_offset(index)
        if self.shaped is not None and buffer in self.shaped.offsets:
            return self._resources["dynamic"], self.shaped.offsets[buffer]
        p = self.layout.placements[buffer]
        return self._resources[p.region], p.offset

    def _io(self, specs: list[TensorSpec], index: int, nbytes: int, kind: str) -> None:
        self._check_open()
        if not 0 <= index < len(specs):
            raise TensorsmithError(f"artifact '{self.path}': no {kind} {index}")
        want = specs[index].nbytes
        if self.binder is not None:
            want = self._in_bytes(index) if kind == "input" else self._out_bytes(index)
        if nbytes != want:
            raise TensorsmithError(f"artifact '{self.path}': {kind} {specs[index].name!r} has "
                                   f"{want} bytes, got {nbytes}")

    def _check_open(self) -> None:
        if self._closed:
            raise TensorsmithError(f"the model of artifact '{self.path}' is closed")


def _memmove_in(buf: DeviceBuffer, offset: int, data: bytes) -> None:
    import ctypes

    source = ctypes.create_string_buffer(data, len(data))
    buf.write(offset, ctypes.addressof(source), len(data))


def _release(device: Any, resources: dict[str, Any]) -> None:
    """Free everything a model created (its finalizer: runs once, at close or collection)."""
    if not resources:
        return
    for name in ("submitter", "timer", "sets", "pipelines"):
        if name in resources:
            resources[name].destroy()
    for name in ("params", "workspace", "dynamic", "upload", "download"):
        if name in resources:
            destroy_buffer(device, resources[name])
    resources.clear()
