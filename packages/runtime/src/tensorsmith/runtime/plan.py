"""The execution plan: what an executor runs, the same data for every target.

``build`` (tensorsmith-ir) and the auto-tuner's candidate builder write a :class:`Plan`;
the codegen plug-in that exports the artifact stores ``Plan.to_json()``'s keys at the top
level of the metadata, beside its own (the target string, ``cpu_features``, the
``vulkan`` or ``opencl`` dispatch table); the runtime reads them back with
:meth:`Plan.from_json` when it reads the file (docs/artifact.md, "Metadata"). The type
lives in the runtime because the runtime executes it and imports nothing of the compiler.

Reading checks each field's type once, naming the field, so an executor never meets a
mistyped value. Fields that artifacts written by older versions lack are optional here,
so those artifacts keep loading; a field that is there always has its documented type.
Whether the indices and sizes fit together is each executor's check (the CPU library's
C code; ``gpu_plan.check_plan`` for the GPUs), since it depends on the kernels too.

A plan whose graph has sizes known only at run time (``symbols``: ``batch``, ``seq``)
names them, writes those sizes as expressions of them (``"batch"``, ``"seq + 1"``), and
leaves the workspace buffers whose size depends on them to the executor, which places
them once it knows the symbols (docs/artifact.md, "Dynamic shapes"). The CPU library does
that, and so does the Vulkan executor (shapes.py, vulkan/shaped.py); the OpenCL one
refuses such a plan for now.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from tensorsmith.runtime.metadata_types import expect, malformed

__all__ = ["PARAMS_SECTION", "PLAN_KEYS", "Assumption", "Buffer", "Check", "ComputedSize",
           "CountedSize", "Kernel", "Plan", "Step", "Tensor", "target_kind"]

PARAMS_SECTION = "params"
"""The artifact section holding the weights: a ``param`` buffer is ``nbytes`` at ``offset``
in it."""

#: The runtime device each target an artifact could name ran on before plans recorded
#: their device (``Plan.device``). A record of the past, never extended: every plan
#: written since names its device, whatever plug-in provided its target.
_DEVICE_BEFORE_PLANS_NAMED_IT = {"llvm": "cpu", "vulkan": "vulkan", "opencl": "opencl"}

#: The artifact file a plan is read from, named in errors (None: not from a file).
FilePath = str | os.PathLike[str] | None


class _Entry:
    """An entry of one of the plan's lists, read from and written as a JSON object.

    ``FIELDS`` names each JSON field and its type (metadata_types.TYPES); the fields
    without a default are required."""

    FIELDS: ClassVar[dict[str, str]]

    @classmethod
    def from_json(cls, raw: Any, field_path: str, path: FilePath = None) -> Any:
        """The entry ``raw`` (the JSON object at ``field_path``), its fields typed."""
        expect(raw, "object", field_path, path)
        for name, kind in cls.FIELDS.items():
            if name in raw:
                expect(raw[name], kind, f"{field_path}.{name}", path)
        for f in fields(cls):  # type: ignore[arg-type]
            if f.default is MISSING and f.name not in raw:
                raise malformed(path, f"{field_path}.{f.name}", "is missing")
        return cls(**{name: _frozen(raw[name]) for name in cls.FIELDS if name in raw})

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object, the fields it lacks (None) left out."""
        out = {}
        for name in self.FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Buffer(_Entry):
    """A byte range of the weights (``kind`` "param": in section ``params``) or of the
    one workspace (``"workspace"``).

    A workspace buffer whose size depends on the symbols has ``symbolic_nbytes`` (its byte
    count as an expression of them), ``offset`` and ``nbytes`` 0, and the steps that first
    and last use it: the executor places it per shape, by that lifetime, after the static
    workspace (a graph input's range is kept for the whole run and between runs; a result
    lives to ``last_step`` = the number of steps). A buffer with ``symbols`` is a static
    one of 8 bytes per symbol that the executor fills before each run with their values,
    as int64 in that order: the trailing argument of every kernel that takes sizes known
    only at run time."""

    FIELDS: ClassVar = {"kind": "str", "offset": "int", "nbytes": "int", "name": "str",
                        "symbolic_nbytes": "str", "first_step": "int", "last_step": "int",
                        "symbols": "strs"}
    kind: str
    offset: int
    nbytes: int
    name: str | None = None  # the weight's, for a param buffer
    symbolic_nbytes: str | None = None
    first_step: int | None = None
    last_step: int | None = None
    symbols: tuple[str, ...] | None = None

    @property
    def is_symbolic(self) -> bool:
        """Whether its size is known only at run time (the executor places it)."""
        return self.symbolic_nbytes is not None


@dataclass(frozen=True)
class Tensor(_Entry):
    """A graph input or output and the plan buffer that holds it."""

    FIELDS: ClassVar = {"name": "str", "shape": "dims", "dtype": "str", "buffer": "int",
                        "layout": "object"}
    name: str
    #: ints, and the text of each size known only at run time ("batch", "seq + 1")
    shape: tuple[int | str, ...]
    dtype: str
    buffer: int | None = None  # absent in hand-written CPU plans: the library knows it
    layout: dict[str, Any] | None = None  # a tuning candidate's: how its runner feeds it

    @property
    def is_symbolic(self) -> bool:
        """Whether some of its sizes are known only at run time."""
        return any(isinstance(d, str) for d in self.shape)


@dataclass(frozen=True)
class Kernel(_Entry):
    """A compiled kernel, with the ops it fuses and the graph nodes of its first step."""

    FIELDS: ClassVar = {"name": "str", "ops": "strs", "nodes": "strs"}
    name: str
    ops: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step(_Entry):
    """One call of a kernel: ``args`` are plan buffers, in the kernel's parameter order."""

    FIELDS: ClassVar = {"kernel": "str", "name": "str", "args": "ints", "nodes": "strs"}
    kernel: str
    args: tuple[int, ...]
    name: str | None = None
    nodes: tuple[str, ...] | None = None  # the graph nodes it runs

    @property
    def label(self) -> str:
        """The step's name in profiles and errors (its kernel's where it has none)."""
        return self.name if self.name is not None else self.kernel


@dataclass(frozen=True)
class Check(_Entry):
    """A check of every run: the int32 at the start of plan buffer ``buffer`` is nonzero
    after a run that must raise ``message`` (an index out of range, naming the node)
    instead of returning outputs."""

    FIELDS: ClassVar = {"buffer": "int", "message": "str"}
    buffer: int
    message: str


@dataclass(frozen=True)
class Assumption(_Entry):
    """An equality of two sizes (expressions of the symbols, as text) that the model only
    makes sense under, e.g. ``seq == min(512, seq)`` where a position table of 512 rows
    is added to a sequence: a run whose sizes break it fails with ``message``."""

    FIELDS: ClassVar = {"lhs": "str", "rhs": "str", "message": "str"}
    lhs: str
    rhs: str
    message: str


@dataclass(frozen=True)
class ComputedSize(_Entry):
    """Symbol ``name`` is not an input's size but ``expr``, computed before each run from
    the values of small inputs and the other symbols (a Reshape's target given as an
    input): text in the host-expression language of ``shapes.host_expr``. Computed sizes
    are listed in the order they are computed; each is at least 1, and a run whose inputs
    make one smaller fails with ``message`` (which names the node that needs it)."""

    FIELDS: ClassVar = {"name": "str", "expr": "str", "message": "str"}
    name: str
    expr: str
    message: str


@dataclass(frozen=True)
class CountedSize(_Entry):
    """Symbol ``name`` is one more than the int64 at the start of plan buffer ``buffer``
    once step ``step`` has run: a count that kernel wrote (the boxes NonMaxSuppression
    kept), so the symbol is at least 1 and shapes use ``name - 1``.

    Before that step the executor takes the symbol to be ``bound`` (an expression of the
    other symbols, known before the run) and places every buffer for it; after the step
    it sets the symbol to the count plus one, so the later kernels, and the outputs'
    shapes, use the count. A count outside ``0..bound - 1`` fails the run with
    ``message`` (which names the node)."""

    FIELDS: ClassVar = {"name": "str", "buffer": "int", "step": "int", "bound": "str",
                        "message": "str"}
    name: str
    buffer: int
    step: int
    bound: str
    message: str


#: The plan's lists: metadata key -> entry type.
_LISTS: dict[str, type[_Entry]] = {"inputs": Tensor, "outputs": Tensor, "checks": Check,
                                    "assumptions": Assumption, "computed": ComputedSize,
                                    "counted": CountedSize, "kernels": Kernel,
                                    "steps": Step, "buffers": Buffer}
#: The plan's other keys and their JSON types.
_SCALARS = {"target": "target", "device": "str", "symbols": "strs", "workspace_bytes": "int",
            "params_bytes": "int", "memory": "object", "producer": "object"}
#: Every metadata key the plan owns, in the order ``to_json`` writes them.
PLAN_KEYS = ("target", "device", "symbols", *_LISTS, "workspace_bytes", "params_bytes",
             "memory", "producer")


@dataclass(frozen=True)
class Plan:
    """Buffers, the steps that run kernels on them, the graph's inputs and outputs and the
    checks of every run. ``device`` is the runtime device kind whose executor runs it
    ("cpu", "vulkan", "opencl"), from the target's record at build time."""

    target: str | dict[str, Any] | None = None
    device: str | None = None
    #: the sizes known only at run time, sorted (empty: every size is static)
    symbols: tuple[str, ...] = ()
    inputs: tuple[Tensor, ...] = ()
    outputs: tuple[Tensor, ...] = ()
    checks: tuple[Check, ...] = ()
    #: what the sizes must satisfy at run time (plans with symbols only)
    assumptions: tuple[Assumption, ...] = ()
    #: the symbols computed from inputs' values, in the order a run computes them
    computed: tuple[ComputedSize, ...] = ()
    #: the symbols that kernels count during the run, in step order
    counted: tuple[CountedSize, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    steps: tuple[Step, ...] = ()
    buffers: tuple[Buffer, ...] = ()
    workspace_bytes: int = 0
    params_bytes: int = 0
    #: {"planned_bytes", "unplanned_bytes"}: the workspace with and without memory planning
    memory: dict[str, int] | None = None
    #: {distribution: version} of what built it
    producer: dict[str, str] | None = None

    @classmethod
    def from_json(cls, data: Any, path: FilePath = None) -> Plan:
        """The plan in ``data`` (an artifact's metadata, or ``to_json()``'s output): its
        own keys are read, others ignored. A mistyped field is an ArtifactError naming it
        and ``path`` (the artifact file, if it comes from one)."""
        expect(data, "object", "metadata", path)
        for key, kind in _SCALARS.items():
            if key in data:
                expect(data[key], kind, key, path)
        lists: dict[str, Any] = {}
        for key, entry in _LISTS.items():
            raw = data.get(key, [])
            expect(raw, "list", key, path)
            lists[key] = tuple(entry.from_json(e, f"{key}[{i}]", path) for i, e in enumerate(raw))
        scalars = {key: _frozen(data[key]) for key in _SCALARS if key in data}
        return cls(**scalars, **lists)

    def to_json(self) -> dict[str, Any]:
        """The plan as metadata keys (absent optional fields left out)."""
        out: dict[str, Any] = {}
        for key in PLAN_KEYS:
            value = getattr(self, key)
            if key in ("symbols", "assumptions", "computed", "counted"):
                if value:  # a static plan's metadata stays as it was before symbols
                    out[key] = list(value) if key == "symbols" else [e.to_json() for e in value]
            elif key in _LISTS:
                out[key] = [e.to_json() for e in value]
            elif value is not None:
                out[key] = value
        return out

    @property
    def is_symbolic(self) -> bool:
        """Whether some sizes are known only at run time (``symbols``)."""
        return bool(self.symbols)

    @property
    def target_kind(self) -> str:
        """The kind of the target it was built for ("llvm" of "llvm -mcpu=skylake")."""
        return target_kind(self.target)

    @property
    def runs_on(self) -> str | None:
        """The runtime device kind that runs it: ``device``, or for a plan written before
        plans named their device, the one its target ran on then (None: neither)."""
        if self.device is not None:
            return self.device
        return _DEVICE_BEFORE_PLANS_NAMED_IT.get(self.target_kind)


def target_kind(target: object) -> str:
    """The kind of a metadata target: "llvm" for "llvm -mcpu=skylake" or {"kind": "llvm"}."""
    if isinstance(target, dict):
        target = target.get("kind")
    if isinstance(target, str) and target.split():
        return target.split()[0]
    return "unknown"


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
