"""Puts the repository root (for the model builders in bench/, shared with the benchmark)
and this folder (for ``model_testing``, the helpers the model tests share) on sys.path:
pytest's importlib mode adds neither."""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (str(HERE.parent), str(HERE)):
    if folder not in sys.path:
        sys.path.insert(0, folder)


#: Every target, Vulkan both through host-visible memory and through staging buffers (as
#: on a discrete GPU): the ``target`` fixture's parameters.
TARGETS = [pytest.param(("llvm", "0"), id="llvm"),
           pytest.param(("vulkan", "0"), id="vulkan-mapped", marks=pytest.mark.vulkan),
           pytest.param(("vulkan", "1"), id="vulkan-staging", marks=pytest.mark.vulkan),
           pytest.param(("opencl", "0"), id="opencl", marks=pytest.mark.opencl)]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test that takes ``target`` runs on every target (a module or a parametrize that
    names ``target`` itself takes precedence)."""
    name, staging = request.param
    monkeypatch.setenv("TSM_VULKAN_STAGING", staging)
    return name


@pytest.fixture(scope="session")
def c_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/c/run_model.c built with the command its README gives (plus warnings as
    errors): a plain C process that loads an artifact through the C ABI."""
    import shutil
    import subprocess

    import tensorsmith.runtime as rt

    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.fail(f"no C compiler ({cc}): install gcc")
    exe = tmp_path_factory.mktemp("c_example") / "run_model"
    cmd = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", rt.get_include(),
           str(HERE.parent / "examples" / "c" / "run_model.c"), "-o", str(exe), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return exe
