"""tensorsmith-autotune: namespace layout and version."""

from pathlib import Path

import tensorsmith.autotune

SRC = Path(__file__).resolve().parents[1] / "src"


def test_namespace_level_has_no_init():
    assert not (SRC / "tensorsmith" / "__init__.py").exists()


def test_version():
    assert isinstance(tensorsmith.autotune.__version__, str)
    assert tensorsmith.autotune.__version__
