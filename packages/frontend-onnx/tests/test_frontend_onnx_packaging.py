"""Packaging of tensorsmith-frontend-onnx: PEP 420 namespace layout and metadata."""

from importlib import metadata
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def test_namespace_levels_have_no_init():
    assert not (SRC / "tensorsmith" / "__init__.py").exists()
    assert not (SRC / "tensorsmith" / "frontend" / "__init__.py").exists()


def test_distribution_metadata():
    try:
        dist = metadata.distribution("tensorsmith-frontend-onnx")
    except metadata.PackageNotFoundError:
        pytest.skip("tensorsmith-frontend-onnx is not installed")
    requires = " ".join(dist.requires or [])
    assert "tensorsmith-ir" in requires
    assert "onnx" in requires


def test_conformance_harness_is_not_in_the_wheel_sources():
    """The ONNX node-test harness is how this repository checks the frontend; it lives in
    tests/onnx_conformance, so src/ (everything the wheel ships) must not hold it."""
    onnx_src = SRC / "tensorsmith" / "frontend" / "onnx"
    assert not (onnx_src / "conformance").exists()
    assert (Path(__file__).parent / "onnx_conformance" / "pool.py").is_file()
