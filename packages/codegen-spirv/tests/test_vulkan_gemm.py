"""Matrix products through the tiled GPU schedule (shared-memory tiles, register tiles,
fused epilogues) on Vulkan: every module passes spirv-val, results match the reference
interpreter on shapes no tile divides."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check, compile_vulkan, dense_bias_relu

from tensorsmith.ir import GraphBuilder

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("shape", [(197, 768, 192), (1, 512, 1000), (64, 64, 64),
                                   (130, 7, 33)])
def test_dense_bias_relu(shape: tuple[int, int, int], tmp_path: Path,
                         rng: np.random.Generator) -> None:
    graph, inputs = dense_bias_relu(*shape, rng)
    check(graph, inputs, tmp_path, 1e-3)


def test_batched_matmul_residual(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 4, 33, 20), "float32")
    y = b.input("y", (4, 20, 17), "float32")
    r = b.input("r", (2, 4, 33, 17), "float32")
    g = b.finish([b.add1("add", [b.add1("matmul", [x, y], name="bmm"), r], name="res")])
    check(g, {"x": rng.standard_normal((2, 4, 33, 20)).astype("float32"),
              "y": rng.standard_normal((4, 20, 17)).astype("float32"),
              "r": rng.standard_normal((2, 4, 33, 17)).astype("float32")}, tmp_path, 1e-4)


def test_gemm_uses_workgroup_memory(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (256, 128), "float32")
    y = b.input("y", (128, 256), "float32")
    lib, _ = compile_vulkan(b.finish([b.add1("matmul", [x, y], name="mm")]), tmp_path)
    (module,) = lib.kernels.modules()
    assert module.workgroup_size[0] * module.workgroup_size[1] >= 64
    assert module.grid[1] > 1  # a 2-D grid of output tiles
    text = str(lib.funcs[0])
    assert "shared" in text and "barrier" in text


def test_float16_matmul_accumulates_in_float32(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (37, 50), "float16")
    y = b.input("y", (50, 29), "float16")
    g = b.finish([b.add1("matmul", [x, y], name="mm")])
    check(g, {"x": rng.standard_normal((37, 50)).astype("float16"),
              "y": rng.standard_normal((50, 29)).astype("float16")}, tmp_path, 2e-2)


def test_manifest_reports_workgroup_memory(tmp_path: Path) -> None:
    import json

    b = GraphBuilder()
    x = b.input("x", (64, 48), "float32")
    y = b.input("y", (48, 80), "float32")
    g = b.finish([b.add1("relu", [b.add1("matmul", [x, y], name="mm")], name="r")])
    lib, _ = compile_vulkan(g, tmp_path)
    manifest = json.loads(lib.export_spirv(tmp_path / "spv").read_text())
    (dispatch,) = manifest["dispatches"]
    assert 0 < dispatch["workgroup_memory_bytes"] <= 16384
