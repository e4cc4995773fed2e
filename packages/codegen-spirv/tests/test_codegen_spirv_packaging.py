"""tensorsmith-codegen-spirv packaging: namespace layout, version, and its `vulkan` entry point."""

from importlib import metadata
from pathlib import Path

import pytest

import tensorsmith.codegen.spirv as cg

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
    if "tensorsmith-codegen-spirv" not in {ep.dist.name for ep in eps if ep.dist is not None}:
        pytest.skip("tensorsmith-codegen-spirv is not installed")
    (ep,) = [ep for ep in eps if ep.name == "vulkan"]
    assert ep.value == "tensorsmith.codegen.spirv:codegen"
    assert ep.load() is cg.codegen
