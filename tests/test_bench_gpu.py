"""The GPU benchmark's float16 rows (bench/gpu_build.py, bench/gpu_vulkan.py): what
``build --precision fp16`` writes, that ``run`` reads it back on a Vulkan device with
the float16 error it should have, and the table's per-precision WRONG flag."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.gpu_build import COOP_TARGET, GPU_MODELS, build_one, default_target
from bench.gpu_vulkan import bench_model, table

MLP = next(s for s in GPU_MODELS if s.name == "mlp")


def test_fp16_defaults_to_the_cooperative_matrix_target() -> None:
    assert default_target("fp16") == COOP_TARGET
    assert "-float16-arithmetic=1" in COOP_TARGET
    assert default_target("fp32") == "vulkan"


@pytest.mark.vulkan
def test_fp16_artifact_runs_within_its_tolerance(tmp_path: Path) -> None:
    note = build_one(MLP, tmp_path, small=True, precision="fp16", target="vulkan")
    assert json.loads((tmp_path / "mlp_fp16.json").read_text()) == note
    assert (note["name"], note["model"], note["precision"]) == ("mlp_fp16", "mlp", "fp16")
    assert note["tensorized"] == [0, 3]  # plain vulkan: three matmul kernels, none tensorized
    args = argparse.Namespace(device="vulkan", repeat=1, warmup=0, torch=None)
    row = bench_model(tmp_path, "mlp_fp16", args)
    assert "error" not in row, row
    # rounded to float16 (so not float32's ~1e-7), but well within float16's 2e-2
    assert 1e-5 < row["rel_err"] < 2e-3, row
    assert row["precision"] == "fp16"


def test_table_judges_each_row_by_its_precision() -> None:
    rows = [{"model": "m", "shapes": {"x": [1, 4]}, "precision": p, "rel_err": e}
            for p, e in [("fp32", 5e-4), ("fp16", 5e-3), ("fp16", 3e-2)]]
    lines = table(rows, None, "header").splitlines()[4:]
    assert lines[0].startswith("| m | fp32 |") and lines[0].endswith("5.0e-04 WRONG |")
    assert lines[1].startswith("| m | fp16 |") and lines[1].endswith("5.0e-03 |")
    assert lines[2].endswith("3.0e-02 WRONG |")
