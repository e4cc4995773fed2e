"""export_library's failures are the project's errors, naming what the user gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorsmith.ir import GraphBuilder, build
from tensorsmith.runtime import ArtifactError


def relu(name: object = "r") -> object:
    b = GraphBuilder()
    x = b.input("x", (2, 3), "float32")
    return build(b.finish([b.add1("relu", [x], name=name)]), target="llvm")


def test_overlong_file_name_names_the_users_path(tmp_path: Path) -> None:
    path = tmp_path / ("m" * 300 + ".so")
    with pytest.raises(ArtifactError) as info:
        relu().export_library(path)
    assert f"'{path}'" in str(info.value) and "tsm-export" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_node_name_that_is_not_text_is_refused_at_export(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not UTF-8 text"):
        relu(b"bad\xffname").export_library(tmp_path / "m.so")
