"""The CPU an ``llvm`` target compiles for, described for the default schedules.

The vector width is asked of LLVM itself: a 16-lane float addition is compiled for the
target's triple and CPU, and the registers its assembly names (``zmm``, ``ymm``, otherwise
128-bit ones such as SSE's ``xmm`` or NEON's ``v``) say how wide a register is. That holds
for the host, any ``-mcpu`` and any ``-mtriple`` alike, with no table of CPU names to
keep. The register count is the architecture's; the L1 data and L2 cache sizes are read
from the host when the code is for the host's own CPU, and are typical values otherwise.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from tensorsmith.ir.target import CpuResources, Target

from .target_options import LlvmTarget, llvm_target

_PROBE = """
define void @probe(<16 x float>* %a, <16 x float>* %b) {
  %x = load <16 x float>, <16 x float>* %a
  %y = load <16 x float>, <16 x float>* %b
  %z = fadd <16 x float> %x, %y
  store <16 x float> %z, <16 x float>* %a
  ret void
}
"""


def cpu_resources(target: Target) -> CpuResources:
    """The ``describe_cpu`` of the ``llvm`` target's record. The build asks it first of
    the plug-in, so a bad target option fails here, before any lowering."""
    return describe(llvm_target(target))


@functools.cache
def describe(target: LlvmTarget) -> CpuResources:
    from .cpu_features import compiled_features
    from .dot4 import dot_width
    from .target_machine import target_machine

    bits = _vector_bits(target_machine(target))
    registers = vector_registers(target.arch, bits)
    dots = dot_width(compiled_features(target)) > 0
    if not target.native:
        return CpuResources(target.cpu, bits, registers, l2_bytes=1024 * 1024,
                            l1_bytes=32 * 1024, int8_dot=dots)
    return CpuResources(
        target.cpu,
        bits,
        registers,
        l2_bytes=_host_cache(2, 512 * 1024),
        l1_bytes=_host_cache(1, 32 * 1024),
        int8_dot=dots,
    )


def vector_registers(arch: str, bits: int) -> int:
    """Vector registers the register tiles may fill: x86-64 has 16 (xmm/ymm), 32 with
    AVX-512 (zmm); AArch64 has 32 (NEON's v0-v31). Any other architecture is given 16, a
    tile that fits every vector unit LLVM targets rather than one that spills."""
    if arch in ("x86_64", "x86"):
        return 32 if bits >= 512 else 16
    if arch in ("aarch64", "aarch64_be"):
        return 32
    return 16


def _vector_bits(tm: object) -> int:
    import llvmlite.binding as llvm

    mod = llvm.parse_assembly(_PROBE)
    mod.triple = tm.triple  # type: ignore[attr-defined]
    mod.data_layout = str(tm.target_data)  # type: ignore[attr-defined]
    asm = tm.emit_assembly(mod)  # type: ignore[attr-defined]
    if "zmm" in asm:
        return 512
    if "ymm" in asm:
        return 256
    return 128


def _host_cache(level: int, typical: int) -> int:
    """Bytes of CPU 0's data (or unified) cache of ``level``, from sysfs; ``typical``
    where it says nothing."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if int((index / "level").read_text()) == level and kind in ("Data", "Unified"):
                return _parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
    return typical


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
