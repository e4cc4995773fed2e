"""Linking a CPU artifact: kernels object + generated plan + C runtime -> shared library.

A C compiler does the linking (llvmlite has no linker); it is needed on the build host
only, never on the device that runs the artifact. For the host's triple that is the
system's ``cc``. For another triple (``llvm -mtriple=aarch64-linux-gnu``) it is a cross
toolchain: Zig's C compiler (the ``ziglang`` wheel, this package's ``cross`` extra),
which carries the C library of every Linux triple it targets and so needs no sysroot, or
else a GNU cross compiler named after the triple (``aarch64-linux-gnu-gcc``). The C
runtime (csrc/*.c) is the same for every artifact of a triple, and compiling it took
about 0.7 s of the 0.8 s a small model's link took: it is compiled once per process and
compiler command (so once per triple; again if its sources change) and each link then
only compiles the generated plan.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.binding as llvm

from tensorsmith.ir.errors import TargetError

if TYPE_CHECKING:
    from .target_options import LlvmTarget

CFLAGS = ["-O2", "-fPIC", "-std=c11", "-fvisibility=hidden"]


def find_cc() -> str:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise TargetError(
        "linking a CPU artifact needs a C compiler (cc, gcc or clang) on the "
        "build host; install one, e.g. `apt-get install gcc`"
    )


def compiler(target: LlvmTarget) -> list[str]:
    """The command that compiles and links C for ``target``: ``cc`` for the host's triple,
    otherwise a cross compiler (see the module's docstring), or a :class:`TargetError`
    saying what to install."""
    if target.host:
        return [find_cc()]
    parts = llvm.get_triple_parts(target.triple)
    # arch-os-abi, as Zig and GNU name triples (no vendor); LLVM's "unknown" is left out
    short = "-".join(p for p in (parts.Arch, parts.OS, parts.Env) if p and p != "unknown")
    if importlib.util.find_spec("ziglang") is not None:
        # -g0: Zig's cc writes debug information by default, the system cc does not
        return [sys.executable, "-m", "ziglang", "cc", "-target", short, "-g0"]
    gcc = shutil.which(f"{short}-gcc")
    if gcc:
        return [gcc]
    raise TargetError(
        f"linking an artifact for -mtriple={target.triple} needs a C toolchain for that "
        "triple on the build host: pip install 'tensorsmith-codegen-llvm[cross]' (Zig's C "
        f"compiler, from the ziglang wheel), or put {short}-gcc on PATH (Debian: apt-get "
        f"install gcc-{short})"
    )


def csrc_dir() -> Path:
    return Path(str(resources.files("tensorsmith.codegen.llvm") / "csrc"))


_RUNTIME_OBJECTS: dict[str, dict[str, bytes]] = {}  # key of cc + sources -> name -> .o


def runtime_objects(cc: list[str], csrc: Path, include: str) -> dict[str, bytes]:
    """csrc/*.c compiled with CFLAGS by the command ``cc`` (compiler and target flags, so
    one set per triple), as object files by name (``tsm_runtime.o``)."""
    sources = sorted(csrc.glob("*.c"))
    h = hashlib.sha256(f"{cc}|{CFLAGS}|{include}".encode())
    for p in sorted(csrc.glob("*.[ch]")):
        h.update(p.name.encode() + p.read_bytes())
    key = h.hexdigest()
    if key not in _RUNTIME_OBJECTS:
        objects: dict[str, bytes] = {}
        with tempfile.TemporaryDirectory(prefix="tsm-csrc-") as tmp:
            for src in sources:
                obj = Path(tmp) / f"{src.stem}.o"
                cmd = [*cc, *CFLAGS, "-I", str(csrc), "-I", include, "-c", str(src), "-o", str(obj)]
                result = subprocess.run(cmd, capture_output=True, text=True)
                if result.returncode != 0:
                    raise RuntimeError(
                        f"compiling the C runtime failed ({' '.join(cmd)}):\n"
                        f"{result.stderr[-4000:]}"
                    )
                objects[obj.name] = obj.read_bytes()
        _RUNTIME_OBJECTS[key] = objects
    return _RUNTIME_OBJECTS[key]


def link_shared(
    kernel_objects: Callable[[], list[bytes]],
    plan_c: str,
    out_path: Path,
    target: LlvmTarget | None = None,
) -> None:
    """Link the artifact's shared library for ``target`` (default: this host) at
    ``out_path``; the plan is compiled while ``kernel_objects()`` compiles the kernels.
    (The weights are not linked in: the artifact appends them to the library, see
    csrc/tsm_params.c.)"""
    from tensorsmith.runtime import get_include

    cc = compiler(target) if target is not None else [find_cc()]
    csrc = csrc_dir()
    runtime = runtime_objects(cc, csrc, get_include())
    with tempfile.TemporaryDirectory(prefix="tsm-link-") as tmp:
        d = Path(tmp)
        for name, data in runtime.items():
            (d / name).write_bytes(data)
        (d / "plan.c").write_text(plan_c)
        compile_cmd = [*cc, *CFLAGS, "-I", str(csrc), "-I", get_include(), "-c", "plan.c"]
        with subprocess.Popen(
            compile_cmd, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        ) as compiling:
            objects = kernel_objects()
            _, errors = compiling.communicate()
        _check(compiling.returncode, compile_cmd, errors)
        kernels = [f"kernels{i}.o" for i in range(len(objects))]
        for name, data in zip(kernels, objects, strict=True):
            (d / name).write_bytes(data)
        cmd = [
            *cc,
            *CFLAGS,
            "-shared",
            "plan.o",
            *sorted(runtime),
            *kernels,
            "-o",
            str(Path(out_path).resolve()),
            "-lpthread",
            "-lm",
        ]
        result = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        _check(result.returncode, cmd, result.stderr)


def _check(returncode: int, cmd: list[str], errors: str) -> None:
    if returncode != 0:
        raise RuntimeError(f"linking the artifact failed ({' '.join(cmd)}):\n{errors[-4000:]}")
