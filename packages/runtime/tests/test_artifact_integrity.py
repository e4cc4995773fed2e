"""What the artifact reader and the GPU plan check refuse (docs/artifact.md, "Trust"):
edited metadata, a nonzero reserved field, malformed metadata, plans that leave their
buffers or do not fit their kernels, and an export to a path the OS refuses."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tensorsmith.runtime import ArtifactError, TensorsmithError
from tensorsmith.runtime.artifact import FOOTER, MAGIC, read_artifact, write_artifact
from tensorsmith.runtime.gpu_plan import Declared, GpuDispatch, GpuStep, check_plan
from tensorsmith.runtime.plan import Buffer, Plan

META = {"target": "vulkan", "inputs": [], "outputs": [],
        "buffers": [{"kind": "param", "offset": 0, "nbytes": 2400},
                    {"kind": "workspace", "offset": 256, "nbytes": 360}],
        "workspace_bytes": 640}


def write(tmp_path: Path, meta: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "a.tsm"
    write_artifact(path, b"payload", {"params": bytes(2400)}, meta or META)
    return path


def split(path: Path) -> tuple[bytes, bytes, tuple[Any, ...]]:
    data = path.read_bytes()
    footer = FOOTER.unpack(data[-FOOTER.size:])
    offset, length = footer[3], footer[4]
    return data[:offset], data[offset:offset + length], footer


def test_one_digit_of_an_offset_edited_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    body, meta, footer = split(path)
    edited = meta.replace(b'"offset": 256', b'"offset": 356')
    assert edited != meta and len(edited) == len(meta)
    path.write_bytes(body + edited + FOOTER.pack(*footer))
    with pytest.raises(ArtifactError, match="do not match its checksum"):
        read_artifact(path)


def test_whitespace_and_key_order_do_not_matter(tmp_path: Path) -> None:
    path = write(tmp_path)
    body, meta, footer = split(path)
    raw = json.dumps(dict(reversed(json.loads(meta).items())), indent=2).encode()
    path.write_bytes(body + raw + FOOTER.pack(MAGIC, footer[1], 0, len(body), len(raw)))
    assert read_artifact(path).metadata["workspace_bytes"] == 640


def test_format_1_artifacts_still_load(tmp_path: Path) -> None:
    """Version 1's checksum covers the bytes before the metadata only."""
    body = b"payload"
    meta = dict(META, format_version=1, sections={},
                checksum=hashlib.sha256(body).hexdigest())
    raw = json.dumps(meta).encode()
    path = tmp_path / "old.tsm"
    path.write_bytes(body + raw + FOOTER.pack(MAGIC, 1, 0, len(body), len(raw)))
    assert read_artifact(path).format_version == 1


def test_nonzero_reserved_field_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    body, meta, (magic, version, _, offset, length) = split(path)
    path.write_bytes(body + meta + FOOTER.pack(magic, version, 7, offset, length))
    with pytest.raises(ArtifactError, match=r"a\.tsm.*reserved field is 7"):
        read_artifact(path)


def test_deeply_nested_metadata_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path)
    body, meta, footer = split(path)
    raw = meta[:-1] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path.write_bytes(body + raw + FOOTER.pack(MAGIC, footer[1], 0, len(body), len(raw)))
    with pytest.raises(ArtifactError, match=r"a\.tsm.*field 'deep' is nested too deeply"):
        read_artifact(path)


@pytest.mark.parametrize("change, field", [
    ({"inputs": [3]}, r"inputs\[0\] should be an object"),
    ({"outputs": [{"name": "y", "shape": "3x4"}]}, r"outputs\[0\]\.shape should be a list"),
    ({"steps": {"a": 1}}, "steps should be a list"),
    ({"buffers": [{"kind": "param", "offset": -1, "nbytes": 4}]}, r"buffers\[0\]\.offset"),
    ({"producer": ["x"]}, "producer should be an object"),
])
def test_mistyped_metadata_names_the_field(tmp_path: Path, change: dict, field: str) -> None:
    path = write(tmp_path, META | change)
    with pytest.raises(ArtifactError, match=rf"a\.tsm' has malformed metadata: {field}"):
        read_artifact(path)


def test_names_that_are_not_text_are_refused_at_export(tmp_path: Path) -> None:
    for name in (b"bad\xffname", "bad\udcffname"):
        meta = META | {"steps": [{"kernel": "k", "name": "s", "args": [], "nodes": [name]}]}
        with pytest.raises(ArtifactError, match=r"steps\[0\]\.nodes\[0\].*not UTF-8 text"):
            write_artifact(tmp_path / "m.tsm", b"", {}, meta)


def test_export_to_an_overlong_name_names_the_users_path(tmp_path: Path) -> None:
    path = tmp_path / ("m" * 300 + ".tsm")
    with pytest.raises(ArtifactError) as info:
        write_artifact(path, b"payload", {}, META)
    message = str(info.value)
    assert f"'{path}'" in message and "File name too long" in message and ".tmp" not in message
    assert isinstance(info.value, TensorsmithError)
    assert list(tmp_path.iterdir()) == []


def test_export_to_a_missing_directory_names_the_users_path(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "m.tsm"
    with pytest.raises(ArtifactError, match=rf"cannot write artifact '{path}'"):
        write_artifact(path, b"", {}, META)


# ---- the GPU plan check, on plans built here ---------------------------------------

BUFFERS = [Buffer("param", 0, 2400), Buffer("param", 2432, 120), Buffer("workspace", 0, 240),
           Buffer("workspace", 256, 360)]
KERNEL = Declared((16, 4, 1), frozenset(range(4)))


def plan(grid: tuple[int, int, int] = (2, 1, 1), args: tuple[int, ...] = (2, 0, 1, 3),
         bindings: tuple[tuple[int, int], ...] | None = None) -> list[GpuStep]:
    dispatch = GpuDispatch("k_d0", grid, (16, 4, 1), bindings, KERNEL)
    return [GpuStep("fused", args, (dispatch,))]


def check(steps: list[GpuStep], buffers: list[Buffer] = BUFFERS) -> None:
    check_plan(Path("m.tsm"), buffers, steps, params_bytes=2560, workspace_bytes=640,
               max_grid=65535)


def test_a_consistent_plan_passes() -> None:
    check(plan())
    check(plan(bindings=((0, 0), (1, 1), (2, 2), (3, 3))))


def test_param_offset_past_the_weights_is_refused() -> None:
    moved = [BUFFERS[0], Buffer("param", 2532, 120), *BUFFERS[2:]]
    with pytest.raises(ArtifactError, match=r"param buffer 1 lies at bytes 2532\.\.2652 of a "
                                            r"2560-byte params section"):
        check(plan(), moved)


def test_workspace_buffer_past_the_workspace_is_refused() -> None:
    moved = [*BUFFERS[:3], Buffer("workspace", 356, 360)]
    with pytest.raises(ArtifactError, match=r"workspace buffer 3 lies at bytes 356\.\.716"):
        check(plan(), moved)


def test_oversized_grid_is_refused() -> None:
    with pytest.raises(ArtifactError, match=r"grid \[200000, 1, 1\], beyond the 65535"):
        check(plan(grid=(200_000, 1, 1)))


def test_workgroup_other_than_compiled_is_refused() -> None:
    step = GpuStep("fused", (2, 0, 1, 3),
                   (GpuDispatch("k_d0", (2, 1, 1), (32, 4, 1), None, KERNEL),))
    with pytest.raises(ArtifactError, match=r"workgroup \[32, 4, 1\].*compiled for \[16, 4, 1\]"):
        check([step])


def test_wrong_argument_lists_are_refused() -> None:
    with pytest.raises(ArtifactError, match=r"binds parameters \[0, 1, 2\] and its kernel "
                                            r"takes \[0, 1, 2, 3\]"):
        check(plan(args=(2, 0, 1)))
    with pytest.raises(ArtifactError, match="passes buffer 9"):
        check(plan(args=(2, 0, 1, 9)))
    with pytest.raises(ArtifactError, match="binds argument 4 of a step with 4 arguments"):
        check(plan(bindings=((0, 0), (1, 1), (2, 2), (3, 4))))


def test_opencl_kernel_declarations_come_from_the_source() -> None:
    from tensorsmith.runtime.opencl import plan_steps

    source = (b"__kernel __attribute__((reqd_work_group_size(16, 4, 1)))\n"
              b"void k_d0(\n    __global const float* restrict a,\n"
              b"    __global float* restrict b)\n{\n}\n")
    meta = Plan.from_json({"steps": [{"kernel": "k", "name": "s", "args": [2, 3, 0]}]})
    info = {"kernels": {"k": [{"entry": "k_d0", "grid": [2, 1, 1], "workgroup": [16, 4, 1]}]}}
    steps = plan_steps(Path("m.tsm"), meta, info, source)
    assert steps[0].dispatches[0].declared == Declared((16, 4, 1), frozenset({0, 1}))
    with pytest.raises(ArtifactError, match=r"binds parameters \[0, 1, 2\].*takes \[0, 1\]"):
        check(steps)
