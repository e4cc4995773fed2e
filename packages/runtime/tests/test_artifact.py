"""The container format of docs/artifact.md: writing, reading, and refusing bad files."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest

from tensorsmith.runtime import ArtifactError, TensorsmithError
from tensorsmith.runtime.artifact import (
    FOOTER,
    FORMAT_VERSION,
    MAGIC,
    canonical_metadata,
    read_artifact,
    write_artifact,
)

META = {"target": "vulkan", "inputs": [], "outputs": []}


def write(tmp_path: Path, payload: bytes = b"\x7fELF payload", **sections: bytes) -> Path:
    path = tmp_path / "a.tsm"
    write_artifact(path, payload, sections, META)
    return path


def rewrite_metadata(path: Path, change: dict, footer_version: int = FORMAT_VERSION) -> None:
    """Replace the metadata (and footer) of an artifact, keeping its checksum valid."""
    data = path.read_bytes()
    _, _, _, offset, length = FOOTER.unpack(data[-FOOTER.size :])
    meta = json.loads(data[offset : offset + length]) | change
    digest = hashlib.sha256(data[:offset])
    if meta["format_version"] >= 2:
        digest.update(canonical_metadata(meta))
    meta["checksum"] = digest.hexdigest()
    raw = json.dumps(meta).encode()
    path.write_bytes(data[:offset] + raw + FOOTER.pack(MAGIC, footer_version, 0, offset, len(raw)))


def test_round_trip_with_sections(tmp_path: Path) -> None:
    path = write(tmp_path, b"PAYLOAD", kernels=b"\x03\x02\x23\x07spirv", source=b"__kernel")
    art = read_artifact(path)
    assert art.payload_length == 7
    assert art.format_version == FORMAT_VERSION == 2
    assert art.target == "vulkan"
    assert art.section_names() == ["kernels", "source"]
    assert art.section("kernels") == b"\x03\x02\x23\x07spirv"
    assert art.section("source") == b"__kernel"
    assert art.metadata["sections"] == {"kernels": [7, 9], "source": [16, 8]}
    assert art.metadata["inputs"] == []
    body = path.read_bytes()[:24] + canonical_metadata(art.metadata)
    assert art.metadata["checksum"] == hashlib.sha256(body).hexdigest()


def test_footer_layout(tmp_path: Path) -> None:
    data = write(tmp_path, b"P").read_bytes()
    magic, version, reserved, offset, length = struct.unpack("<8sIIQQ", data[-32:])
    assert (magic, version, reserved) == (b"TSMART\0\0", FORMAT_VERSION, 0)
    assert offset == 1 and offset + length + 32 == len(data)
    assert json.loads(data[offset : offset + length])["format_version"] == FORMAT_VERSION


def test_writer_fills_in_its_fields_and_keeps_the_callers_dict(tmp_path: Path) -> None:
    meta = {"target": "llvm", "format_version": 7, "checksum": "x", "sections": {"a": [0, 1]}}
    write_artifact(tmp_path / "m.so", b"", {}, meta)
    art = read_artifact(tmp_path / "m.so")
    assert art.metadata["format_version"] == FORMAT_VERSION and art.metadata["sections"] == {}
    assert meta["format_version"] == 7  # not mutated
    assert art.payload_length == 0


def test_overwrite_replaces_atomically(tmp_path: Path) -> None:
    path = write(tmp_path, b"one")
    write_artifact(path, b"two!", {}, META)
    assert read_artifact(path).payload_length == 4
    assert [p.name for p in tmp_path.iterdir()] == ["a.tsm"]  # no temporary left behind


def test_missing_section_is_named(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match=r"no section 'spirv' \(its sections: 'a'\)"):
        read_artifact(write(tmp_path, a=b"1")).section("spirv")


def test_text_file_is_not_an_artifact(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is a text file and certainly no model\n")
    with pytest.raises(ArtifactError, match="is not a tensorsmith artifact"):
        read_artifact(path)


def test_tiny_and_empty_files_are_not_artifacts(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ArtifactError, match="not a tensorsmith artifact: it has only 0 bytes"):
        read_artifact(tmp_path / "empty")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="does not exist"):
        read_artifact(tmp_path / "nope.so")
    with pytest.raises(ArtifactError, match="is a directory"):
        read_artifact(tmp_path)


def test_truncated_artifact(tmp_path: Path) -> None:
    path = write(tmp_path, b"x" * 1000)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="copy is incomplete"):
        read_artifact(path)


def test_bytes_cut_from_the_middle_are_damage(tmp_path: Path) -> None:
    path = write(tmp_path, b"x" * 1000)
    data = path.read_bytes()
    path.write_bytes(data[:10] + data[11:])
    with pytest.raises(ArtifactError, match="is damaged: its footer puts the metadata"):
        read_artifact(path)


def test_flipped_byte_is_damage(tmp_path: Path) -> None:
    path = write(tmp_path, b"x" * 1000, s=b"section")
    data = bytearray(path.read_bytes())
    data[500] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="is damaged: its contents do not match its checksum"):
        read_artifact(path)
    assert read_artifact(path, verify_checksum=False).payload_length == 1000


def test_garbled_metadata_is_damage(tmp_path: Path) -> None:
    path = write(tmp_path)
    data = bytearray(path.read_bytes())
    _, _, _, offset, _ = FOOTER.unpack(data[-32:])
    data[offset] = ord("[")
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="is damaged: its metadata is not valid JSON"):
        read_artifact(path)


def test_newer_metadata_version_names_both_versions(tmp_path: Path) -> None:
    path = write(tmp_path)
    rewrite_metadata(path, {"format_version": 99})
    with pytest.raises(ArtifactError) as info:
        read_artifact(path)
    message = str(info.value)
    assert "format version 99" in message and "format version 2 at most" in message
    assert "upgrade" in message and "tensorsmith-runtime" in message


def test_newer_footer_version_is_refused_before_reading_metadata(tmp_path: Path) -> None:
    path = write(tmp_path)
    rewrite_metadata(path, {"format_version": 3, "layout": "unknown"}, footer_version=3)
    with pytest.raises(ArtifactError, match=r"format version 3, but .* reads format version 2"):
        read_artifact(path)


def test_disagreeing_versions_are_damage(tmp_path: Path) -> None:
    path = write(tmp_path)
    rewrite_metadata(path, {"format_version": 0})
    with pytest.raises(ArtifactError, match="metadata says format version 0 and its footer 2"):
        read_artifact(path)


def test_section_outside_the_file_is_damage(tmp_path: Path) -> None:
    path = write(tmp_path)
    rewrite_metadata(path, {"sections": {"k": [5, 10**9]}})
    with pytest.raises(ArtifactError, match="section 'k' lies outside the file"):
        read_artifact(path)


def test_errors_share_the_project_base() -> None:
    assert issubclass(ArtifactError, TensorsmithError)
