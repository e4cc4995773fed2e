"""The CPU an ``llvm`` target compiles for, described for the default schedules.

The vector width is asked of LLVM itself: a 16-lane float addition is compiled for the
target's CPU and the registers its assembly names (``zmm``, ``ymm``, otherwise 128-bit
ones) say how wide a register is. That holds for the host and for any ``-mcpu`` alike,
with no table of CPU names to keep. The L1 data and L2 cache sizes are read from the
host when the target is the host, and are typical values otherwise.
"""

from __future__ import annotations

import functools
import platform
import re
from pathlib import Path

from tensorsmith.ir.target import CpuResources, Target

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
    """The ``tensorsmith.resources`` entry point of the ``llvm`` target."""
    return _describe(target.options.get("mcpu", ""))


@functools.cache
def _describe(mcpu: str) -> CpuResources:
    import llvmlite.binding as llvm

    from .target_machine import target_machine

    tm = target_machine(mcpu)
    host = not mcpu or mcpu == "native"
    name = llvm.get_host_cpu_name() if host else mcpu
    bits = _vector_bits(tm)
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686")
    registers = 32 if bits >= 512 or not x86 else 16
    if not host:
        return CpuResources(name, bits, registers, l2_bytes=1024 * 1024, l1_bytes=32 * 1024)
    return CpuResources(name, bits, registers, l2_bytes=_host_cache(2, 512 * 1024),
                        l1_bytes=_host_cache(1, 32 * 1024))


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
            if (int((index / "level").read_text()) == level
                    and (index / "type").read_text().strip() in ("Data", "Unified")):
                return _parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
    return typical


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
