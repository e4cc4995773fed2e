"""Whether this CPU has the instruction-set extensions a CPU artifact was compiled for.

The kernels of a CPU artifact are compiled for one processor (by default the build
host's) and use whatever vector instructions it has. Run on a CPU without them, the
process dies of SIGILL ("Illegal instruction") at the first kernel, with no word about
why. So the compiler records, in the metadata's ``cpu_features``, the extensions the code
may use, by LLVM's names (``avx2``, ``avx512f``, ``amx-tile``), and the loader compares
them with this CPU before the library is loaded.

This CPU's extensions come from the ``flags`` of Linux's /proc/cpuinfo, which lists what
both the processor and the kernel support (AVX-512 is not listed under a kernel that does
not save its registers), so the runtime needs no native code of its own to ask CPUID.
Where they cannot be read (no /proc, or a machine whose cpuinfo has no ``flags``), or for
a feature this runtime has no flag name for (recorded by a newer compiler), nothing is
refused: the check exists to turn a crash into a message, never to stop a model that
would run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.errors import UnsupportedCpuError

__all__ = [
    "CHECKED_FEATURES",
    "check_cpu_features",
    "cpuinfo_flags",
    "host_flags",
    "missing_features",
    "x86_64_level",
]

#: Extensions whose cpuinfo flag is LLVM's name for them.
_SAME_NAME = (
    "sse", "sse2", "ssse3", "sse4a", "avx", "avx2", "fma", "fma4", "xop", "f16c", "bmi2",
    "popcnt", "movbe", "adx", "aes", "gfni", "vaes", "vpclmulqdq", "avx512f", "avx512cd",
    "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
)  # fmt: skip
#: Extensions Linux names otherwise: SSE3 by its old name (Prescott New Instructions),
#: LZCNT under AMD's "abm" group on every vendor, "1" after BMI, the SHA and carry-less
#: multiply instructions by their longer names, and the newer AVX-512, AVX and AMX
#: extensions with an underscore after the family.
_RENAMED = {
    "sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "lzcnt": "abm", "bmi": "bmi1",
    "pclmul": "pclmulqdq", "sha": "sha_ni", "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avx512vp2intersect": "avx512_vp2intersect",
    "avxvnni": "avx_vnni", "amx-tile": "amx_tile", "amx-bf16": "amx_bf16",
    "amx-int8": "amx_int8",
}  # fmt: skip
_FLAG = {**{name: name for name in _SAME_NAME}, **_RENAMED}

CHECKED_FEATURES: frozenset[str] = frozenset(_FLAG)
"""The extensions (LLVM's names) this runtime can test: the compiler records only these."""

#: The x86-64 microarchitecture levels, newest first, by what each adds that the code may
#: use: the advice of a refusal names the newest this CPU has.
_LEVELS = (
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    ("x86-64-v3", ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")),
    ("x86-64-v2", ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt")),
)


def cpuinfo_flags(cpuinfo: str) -> frozenset[str] | None:
    """The ``flags`` of the first processor in the text of /proc/cpuinfo, or None where
    there are none (other architectures name theirs ``Features``)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return None


@functools.cache
def host_flags() -> frozenset[str] | None:
    """This machine's cpuinfo flags, or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return cpuinfo_flags(f.read())
    except OSError:
        return None


def missing_features(required: Iterable[str], flags: frozenset[str]) -> list[str]:
    """The features of ``required`` that this runtime can test and ``flags`` lacks."""
    return sorted({f for f in required if f in _FLAG and _FLAG[f] not in flags})


def x86_64_level(flags: frozenset[str]) -> str:
    """The newest x86-64 level (an LLVM ``-mcpu`` name) whose extensions ``flags`` has."""
    for name, features in _LEVELS:
        if not missing_features(features, flags):
            return name
    return "x86-64"


def check_cpu_features(artifact: Artifact, flags: frozenset[str] | None = None) -> None:
    """Refuse, before dlopen, an artifact compiled for extensions this CPU lacks (``flags``:
    this machine's cpuinfo flags unless given). An artifact without ``cpu_features``
    (written before they were recorded) is loaded as before."""
    required = artifact.metadata.get("cpu_features")
    flags = host_flags() if flags is None else flags
    if not required or flags is None:
        return
    missing = missing_features(required, flags)
    if missing:
        level = x86_64_level(flags)
        raise UnsupportedCpuError(
            f"artifact '{artifact.path}' was compiled for CPU features this machine lacks: "
            f"{', '.join(missing)} (its code would stop with an illegal instruction). "
            "Compile the model again for this machine: with --target llvm on it, or "
            f'anywhere with --target "llvm -mcpu={level}" (the newest x86-64 level this '
            'CPU has) or "llvm -mcpu=<this CPU\'s name>"',
            missing,
        )
