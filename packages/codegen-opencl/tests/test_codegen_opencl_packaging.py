"""tensorsmith-codegen-opencl packaging: namespace layout, version, and its `opencl` entry point."""

from importlib import metadata
from pathlib import Path

import pytest

import tensorsmith.codegen.opencl as cg

SRC = Path(__file__).resolve().parents[1] / "src"


def test_namespace_levels_have_no_init():
    assert not (SRC / "tensorsmith" / "__init__.py").exists()
    assert not (SRC / "tensorsmith" / "codegen" / "__init__.py").exists()


def test_version():
    assert isinstance(cg.__version__, str) and cg.__version__


def test_codegen_is_callable():
    assert callable(cg.codegen)


def test_entry_point_registered():
    eps = metadata.entry_points(group="tensorsmith.codegen")
    if "tensorsmith-codegen-opencl" not in {ep.dist.name for ep in eps if ep.dist is not None}:
        pytest.skip("tensorsmith-codegen-opencl is not installed")
    (ep,) = [ep for ep in eps if ep.name == "opencl"]
    assert ep.value == "tensorsmith.codegen.opencl:codegen"
    assert ep.load() is cg.codegen


def test_codegen_needs_no_opencl_binding():
    """Generating OpenCL C imports no OpenCL binding: a build host needs no driver."""
    import subprocess
    import sys

    code = ("import sys, tensorsmith.codegen.opencl as cg; cg.codegen([], 'opencl'); "
            "assert 'pyopencl' not in sys.modules, 'pyopencl imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
