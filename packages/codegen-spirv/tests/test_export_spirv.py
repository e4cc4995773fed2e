"""``export_spirv``: plain .spv files and a manifest another Vulkan host can run alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from manifest_host import run_manifest
from spirv_testing import compile_vulkan

from tensorsmith.codegen.spirv.tools import validate
from tensorsmith.ir import GraphBuilder, TargetError, build

pytestmark = pytest.mark.vulkan


def mlp_like(rng: np.random.Generator) -> object:
    """matmul+bias+relu, softmax (several dispatches, workspace reuse), a bool and an
    int64 output, and a constant output (a param buffer read by the host)."""
    b = GraphBuilder()
    x = b.input("x", (5, 40), "float32")
    w1 = b.constant("w1", rng.standard_normal((40, 30)).astype("float32"))
    b1 = b.constant("b1", rng.standard_normal((30,)).astype("float32"))
    w2 = b.constant("w2", rng.standard_normal((30, 10)).astype("float32"))
    h = b.add1("relu", [b.add1("add", [b.add1("matmul", [x, w1], name="mm1"), b1],
                               name="a1")], name="r1")
    y = b.add1("softmax", [b.add1("matmul", [h, w2], name="mm2")], {"axis": -1}, name="sm")
    big = b.add1("gt", [y, b.constant("t", np.array([0.1], "float32"))], name="big")
    idx = b.add1("cast", [b.add1("mul", [y, b.constant("k", np.array([100.0], "float32"))],
                                 name="scaled")], {"dtype": "int64"}, name="idx")
    return b.finish([y, big, idx, b1])


def test_manifest_host_matches_the_runtime(tmp_path: Path, rng: np.random.Generator) -> None:
    graph = mlp_like(rng)
    lib, module = compile_vulkan(graph, tmp_path)
    manifest_path = lib.export_spirv(tmp_path / "export")
    manifest = json.loads(manifest_path.read_text())
    x = rng.standard_normal((5, 40)).astype("float32")
    want = module.run({"x": x})
    got = run_manifest(tmp_path / "export", {"x": x})
    assert list(got) == [o["name"] for o in module.output_info]
    for g, w in zip(got.values(), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    # Every module on disk is what the artifact holds, and valid.
    for d in manifest["dispatches"]:
        validate((tmp_path / "export" / d["spv"]).read_bytes(), d["name"])


def test_manifest_schema(tmp_path: Path, rng: np.random.Generator) -> None:
    lib = build(mlp_like(rng), target="vulkan")
    manifest = json.loads(lib.export_spirv(tmp_path).read_text())
    assert manifest["schema"] == "tensorsmith.spirv-manifest" and manifest["version"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["manifest.json", "params.bin", *(d["spv"] for d in manifest["dispatches"])])
    assert (tmp_path / "params.bin").stat().st_size == manifest["params"]["nbytes"]
    assert "shaderInt64" in manifest["requirements"]["features"]
    assert "storageBuffer8BitAccess" in manifest["requirements"]["features"]
    kinds = {b["kind"] for b in manifest["buffers"]}
    assert kinds == {"param", "input", "output", "workspace"}
    buffers = {b["id"]: b for b in manifest["buffers"]}
    for i, d in enumerate(manifest["dispatches"]):
        assert d["index"] == i and d["push_constants"] == []
        assert d["barrier_after"]["src_access"] == ["SHADER_WRITE"]
        assert all(w > 0 for w in d["workgroup_size"])
        for binding in d["descriptor_sets"][0]["bindings"]:
            buf = buffers[binding["buffer"]]
            assert buf["first_dispatch"] <= i <= buf["last_dispatch"]
            assert binding["range"] <= buf["alloc_bytes"]
            if buf["kind"] == "param":
                assert binding["access"] == "read"
    # The constant output is a param the host reads back; the input is never written.
    outputs = [buffers[o["buffer"]] for o in manifest["outputs"]]
    assert outputs[-1]["kind"] == "param" and outputs[-1]["is_output"]
    (inp,) = [buffers[i["buffer"]] for i in manifest["inputs"]]
    assert inp["kind"] == "input"


def test_export_spirv_needs_the_vulkan_target(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    lib = build(b.finish([b.add1("exp", [x], name="e")]), target="llvm")
    with pytest.raises(TargetError, match="export_spirv needs a module built for target "
                                          "'vulkan'; this one was built for 'llvm'"):
        lib.export_spirv(tmp_path)
