"""Linking a CPU artifact: kernels object + generated plan + C runtime -> shared library.

The system C compiler does the linking (llvmlite has no linker); it is needed on the
build host only, never on the device that runs the artifact.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from tensorsmith.ir.errors import TargetError

CFLAGS = ["-O2", "-fPIC", "-std=c11", "-fvisibility=hidden"]


def find_cc() -> str:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise TargetError("linking a CPU artifact needs a C compiler (cc, gcc or clang) on the "
                      "build host; install one, e.g. `apt-get install gcc`")


def csrc_dir() -> Path:
    return Path(str(resources.files("tensorsmith.codegen.llvm") / "csrc"))


def link_shared(kernels_obj: bytes, plan_c: str, params: bytes, out_path: Path) -> None:
    from tensorsmith.runtime import get_include

    cc = find_cc()
    csrc = csrc_dir()
    with tempfile.TemporaryDirectory(prefix="tsm-link-") as tmp:
        d = Path(tmp)
        (d / "kernels.o").write_bytes(kernels_obj)
        (d / "plan.c").write_text(plan_c)
        (d / "params.bin").write_bytes(params)
        from .plan_c import PARAMS_ASM

        (d / "params.S").write_text(PARAMS_ASM)
        sources = sorted(str(p) for p in csrc.glob("*.c"))
        cmd = [cc, *CFLAGS, "-shared", "-I", str(csrc), "-I", get_include(), "plan.c",
               *sources, "kernels.o", "params.S", "-o", "model.so", "-lpthread", "-lm"]
        result = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"linking the artifact failed ({' '.join(cmd)}):\n"
                               f"{result.stderr[-4000:]}")
        shutil.copyfile(d / "model.so", out_path)
