"""Targets: what to compile for, parsed from strings like ``"llvm -mcpu=znver4"``."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TargetError
from .targets import TargetInfo, installed_kinds, target_info


@dataclass(frozen=True)
class CpuResources:
    """The facts of a CPU that the default schedules size their tiles by.

    A register tile of ``rows`` x ``cols`` accumulators must fit the vector register
    file with room for the row of the other operand and a broadcast, or every
    multiply-add spills to the stack; the widest vector decides how many lanes a
    register holds. These come from the codegen plug-in that compiles for the CPU (its
    target record's ``describe_cpu``, see ``codegen.target_resources``), so they
    describe the machine the code is compiled for, not a guess.
    """

    cpu: str
    vector_bits: int
    vector_registers: int
    l2_bytes: int = 512 * 1024
    l1_bytes: int = 32 * 1024  # data cache
    #: an instruction for four-byte integer dot products (x86's VNNI ``vpdpbusd``), what
    #: makes integer convolutions and products faster than float ones (without it they
    #: are exact but slower: passes/integer_products.py)
    int8_dot: bool = False

    def lanes(self, element_bytes: int = 4) -> int:
        """Elements of ``element_bytes`` in one vector register."""
        return max(1, self.vector_bits // (8 * element_bytes))


@dataclass(frozen=True)
class MatrixShape:
    """One shape of cooperative (subgroup-wide) matrix product a GPU offers:
    ``C[m, n] += A[m, k] * B[k, n]`` on ``a``/``b`` inputs with a ``c`` accumulator, one
    subgroup holding each operand spread over its invocations."""

    m: int
    n: int
    k: int
    a: str = "float16"
    b: str = "float16"
    c: str = "float32"

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.a}*{self.b}+{self.c}"


@dataclass(frozen=True)
class WorkgroupMatrix:
    """Cooperative matrices a whole workgroup holds (NVIDIA's VK_NV_cooperative_matrix2,
    workgroup scope with flexible dimensions): ``C[M, N] += A[M, K] * B[K, N]`` for any
    M, N, K that are multiples of the granularities ``m``, ``n``, ``k`` up to
    ``max_dimension``, in workgroups of exactly ``invocations``. The driver stages the
    operands through shared memory itself, so a kernel states only the block product."""

    m: int
    n: int
    k: int
    invocations: int
    max_dimension: int
    a: str = "float16"
    c: str = "float32"

    def __str__(self) -> str:
        return (f"{self.m}x{self.n}x{self.k}/{self.invocations} up to {self.max_dimension} "
                f"{self.a}*{self.a}+{self.c}")


@dataclass(frozen=True)
class GpuResources:
    """The facts of a GPU that a schedule may depend on beyond what every device of its
    API offers. The code is compiled on a build host that need not have the GPU, so
    these come from the target string (its codegen plug-in's ``describe_gpu``, see
    ``codegen.gpu_resources``), and the runtime refuses an artifact whose kernels need
    what the device it is loaded on lacks.

    ``matrix_shapes``: the cooperative-matrix products kernels may use (none: plain
    arithmetic only); ``subgroup_size``: invocations of a subgroup (the unit that holds
    one cooperative matrix); ``shared_bytes``: workgroup memory a kernel may declare;
    ``float16_arithmetic``: float16 values are computed in float16 (the device has
    float16 arithmetic, Vulkan's shaderFloat16) rather than widened to float32;
    ``max_invocations``: invocations of one workgroup at most (every Vulkan device
    takes 256; NVIDIA's take 1024); ``workgroup_matrices``: the workgroup-held
    cooperative matrices kernels may use (:class:`WorkgroupMatrix`, none: only
    subgroup-held ones); ``integer_dot_product``: an instruction for the dot of two
    words of four bytes (Vulkan's shaderIntegerDotProduct), what the integer ops'
    reductions are written for (ops/integer.py).
    """

    matrix_shapes: tuple[MatrixShape, ...] = ()
    subgroup_size: int = 32
    shared_bytes: int = 16384
    float16_arithmetic: bool = False
    max_invocations: int = 256
    workgroup_matrices: tuple[WorkgroupMatrix, ...] = ()
    integer_dot_product: bool = False

    def matrix_shape(self, a: str, c: str) -> MatrixShape | None:
        """The first offered shape multiplying ``a`` inputs (both) into ``c``, or None."""
        for shape in self.matrix_shapes:
            if shape.a == shape.b == a and shape.c == c:
                return shape
        return None


#: What a GPU target has when its plug-in says nothing: what every Vulkan 1.1 device
#: offers (16 KiB of workgroup memory, no cooperative matrices).
BASELINE_GPU = GpuResources()


#: What a CPU target is assumed to have when no plug-in describes it: x86-64-v3 (AVX2,
#: FMA, 16 ymm registers), the most common vector unit of current x86 servers.
BASELINE_CPU = CpuResources("x86-64-v3", vector_bits=256, vector_registers=16)


@dataclass(frozen=True)
class Target:
    """A target kind and its options; what the kind means is its plug-in's record
    (:attr:`info`, targets.py)."""

    kind: str
    options: dict[str, str] = field(default_factory=dict, hash=False)

    @staticmethod
    def parse(text: str | Target, *, installed: bool = True) -> Target:
        """``"kind -key=value ..."``. The kind must be one an installed codegen plug-in
        provides, unless ``installed`` is False: for reading what was written for
        targets this machine may lack (the tuning records of every target, in one file)."""
        if isinstance(text, Target):
            return text
        parts = str(text).split()
        if not parts:
            raise TargetError("empty target string; installed targets: "
                              + (", ".join(installed_kinds()) or "none"))
        kind = parts[0]
        if installed:
            target_info(kind)  # a TargetError saying what to install
        options: dict[str, str] = {}
        for p in parts[1:]:
            if not p.startswith("-"):
                raise TargetError(f"target option {p!r} must look like -key=value")
            key, _, value = p.lstrip("-").partition("=")
            options[key] = value or "1"
        return Target(kind, options)

    def flag(self, key: str, default: bool = False) -> bool:
        """The on/off option ``-key=1`` (or 0, true/false, yes/no); ``default`` when not
        given. A TargetError names any other value, so a typo is not read as "off"."""
        value = self.options.get(key)
        if value is None:
            return default
        if value.lower() not in ("0", "1", "true", "false", "yes", "no"):
            raise TargetError(f"target '{self}': -{key}={value} is not 0 or 1")
        return value.lower() in ("1", "true", "yes")

    @property
    def info(self) -> TargetInfo:
        """The record of the plug-in that provides this target."""
        return target_info(self.kind)

    @property
    def family(self) -> str:
        """``cpu`` or ``gpu``: which default rules and passes apply (targets.FAMILIES)."""
        return self.info.family

    def __str__(self) -> str:
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.options.items())])


#: Activation layouts a CPU target's convolutions may run in (``-layout=``).
LAYOUTS = ("blocked", "nchw")


def activation_layout(target: Target) -> str:
    """``blocked`` (the default: channel blocks of the CPU's float lanes, see
    passes/blocked_layout.py) or ``nchw`` (``llvm -layout=nchw``: every convolution on
    NCHW, as imported)."""
    layout = target.options.get("layout", LAYOUTS[0])
    if layout not in LAYOUTS:
        raise TargetError(f"unknown layout {layout!r} in target '{target}'; use one of "
                          + ", ".join(LAYOUTS))
    return layout
