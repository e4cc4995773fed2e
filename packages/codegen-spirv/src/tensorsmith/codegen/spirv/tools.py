"""SPIRV-Tools, when installed: ``spirv-val`` to check modules, ``spirv-dis`` to read them.

The emitter does not need them; they are how tests prove every module is valid for
Vulkan 1.1 and how ``get_source("spirv")`` shows readable assembly. Debian/Ubuntu:
``apt-get install spirv-tools``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from tensorsmith.ir.errors import TargetError

TARGET_ENV = "vulkan1.1"


def find_tool(name: str) -> str | None:
    """The path of a SPIRV-Tools program (``$SPIRV_TOOLS_BIN/name`` first), or None."""
    directory = os.environ.get("SPIRV_TOOLS_BIN")
    if directory:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
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
        raise TargetError(f"SPIR-V module {name} is invalid:\n{result.stdout}{result.stderr}")


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
