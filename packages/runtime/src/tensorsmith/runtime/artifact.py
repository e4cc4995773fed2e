"""The artifact container: one file holding a model for any target (docs/artifact.md).

Layout: ``[payload][sections ...][metadata JSON][footer]``. The footer sits at the end so
a CPU artifact can stay a plain ELF shared library (the loader ignores trailing bytes) and
so a reader finds everything from one small read at the end of the file. The footer's
magic and version fields never move, whatever later format versions change, so every
runtime can at least say "too new" rather than misreading a file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from tensorsmith.runtime._version import __version__
from tensorsmith.runtime.errors import ArtifactError
from tensorsmith.runtime.metadata_types import expect
from tensorsmith.runtime.plan import Plan

__all__ = [
    "FORMAT_VERSION", "Artifact", "open_artifact", "read_artifact", "read_artifact_file",
    "write_artifact",
]

FORMAT_VERSION = 2
"""The newest artifact format this runtime reads, and the one it writes."""
METADATA_CHECKSUM_SINCE = 2
"""From this format version on the checksum covers the metadata too (docs/artifact.md);
version 1 files, whose checksum covers the bytes before the metadata only, still load."""

MAGIC = b"TSMART\0\0"
FOOTER = struct.Struct("<8sIIQQ")  # magic, format_version, reserved, metadata offset, length
FOOTER_SIZE = FOOTER.size  # 32
CHUNK = 1 << 20  # checksum reads, so a large artifact never sits in memory at once

_FILLED_IN = ("format_version", "sections", "checksum")

#: A CPU artifact's weights follow its library as section ``params``, starting at a
#: multiple of this (every page size of x86-64 and AArch64 Linux divides it, so the
#: library maps them straight from the file), then section ``params.id``: the id of
#: ``PARAMS_ID_BYTES`` random bytes that the library's plan carries too, so a library
#: never runs with another build's weights (codegen-llvm's csrc/tsm_params.c).
PARAMS_ALIGN = 64 * 1024
PARAMS_ID_BYTES = 16


@dataclass(frozen=True)
class Artifact:
    """A validated artifact file: its metadata, and its sections read on demand."""

    path: Path
    metadata: dict[str, Any]
    payload_length: int
    #: the execution plan in ``metadata``, read and typed when the file was read
    plan: Plan = field(repr=False)
    _sections: dict[str, tuple[int, int]] = field(repr=False, default_factory=dict)

    @property
    def format_version(self) -> int:
        return int(self.metadata["format_version"])

    @property
    def target(self) -> str:
        """The target kind the artifact was compiled for ("llvm", "vulkan", ...)."""
        return self.plan.target_kind

    def section_names(self) -> list[str]:
        return list(self._sections)

    def section_length(self, name: str) -> int:
        """The length of one named section, without reading it."""
        return self._span(name)[1]

    def section(self, name: str) -> bytes:
        """The bytes of one named section (SPIR-V, OpenCL C, GPU parameters, ...)."""
        offset, length = self._span(name)
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        if len(data) != length:
            raise ArtifactError(f"artifact '{self.path}' is damaged: section {name!r} is cut short")
        return data

    def _span(self, name: str) -> tuple[int, int]:
        if name not in self._sections:
            have = ", ".join(repr(n) for n in self._sections) or "none"
            raise ArtifactError(
                f"artifact '{self.path}' has no section {name!r} (its sections: {have}); "
                "it was probably built for another target or by another tensorsmith version"
            )
        return self._sections[name]


def write_artifact(
    path: str | os.PathLike[str], payload: bytes, sections: dict[str, bytes], metadata: dict,
    align: dict[str, int] | None = None,
) -> None:
    """Write an artifact: the payload, then the sections in order, metadata and footer.

    Fills in ``format_version``, ``sections`` (name -> [offset, length]) and ``checksum``
    (SHA-256 of every byte before the metadata, then of the metadata: see
    :func:`canonical_metadata`); other metadata is written as given. The file is written
    beside its destination and renamed into place, so a reader never sees half a file and
    a process that has the old library mapped keeps running. ``align``: see
    :func:`finish_artifact`. An OS failure is an ArtifactError naming ``path``.
    """
    path = Path(path)
    # A short name of its own: the destination's name plus a suffix could pass the file
    # system's limit on a name that is itself fine.
    tmp = path.with_name(f".tsm-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    with export_errors(path):
        try:
            tmp.write_bytes(payload)
            finish_artifact(tmp, path, sections, metadata, align)
        finally:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def export_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an OS failure while writing the artifact at ``path`` into an ArtifactError that
    names ``path``: the OS names the temporary file it was writing, which the user never
    chose and cannot find."""
    try:
        yield
    except OSError as e:
        hint = ""
        if e.errno == errno.ENAMETOOLONG:
            size = len(os.fsencode(Path(path).name))
            hint = f" (its file name has {size} bytes; most file systems allow 255)"
        raise ArtifactError(
            f"cannot write artifact '{path}': {e.strerror or e}{hint}"
        ) from None


def canonical_metadata(metadata: dict[str, Any]) -> bytes:
    """The metadata as the checksum covers it: every key but ``checksum``, as JSON with
    sorted keys, no spaces and ASCII escapes, so a reader re-encodes exactly what the
    writer hashed whatever whitespace or key order the file has."""
    body = {k: v for k, v in metadata.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


def check_metadata_text(metadata: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Refuse metadata JSON cannot hold as UTF-8 text (a name given as bytes, or a str
    that is not valid Unicode), naming the field, before anything is compiled or written."""
    where = _untextual(metadata, "metadata")
    if where is not None:
        field_path, value = where
        raise ArtifactError(
            f"cannot write artifact '{path}': {field_path} is {value!r}, which is not "
            "UTF-8 text; name graph nodes and tensors with text (str) names"
        )


def _untextual(value: Any, where: str) -> tuple[str, Any] | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where, value
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{where} key", k
            found = _untextual(k, f"{where} key") or _untextual(v, f"{where}.{k}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _untextual(v, f"{where}[{i}]")
            if found:
                return found
    elif not (value is None or isinstance(value, bool | int | float)):
        return where, value
    return None


def finish_artifact(payload_file: str | os.PathLike[str], path: str | os.PathLike[str],
                    sections: dict[str, bytes], metadata: dict,
                    align: dict[str, int] | None = None) -> None:
    """Make ``payload_file`` (holding the payload alone) the artifact at ``path``, as
    :func:`write_artifact` would write it: the sections, metadata and footer are appended
    and the file renamed into place, so a large payload is hashed once and never copied.
    ``payload_file`` must be on ``path``'s file system.

    A section named in ``align`` starts at a multiple of that many bytes (zeros before
    it, covered by the checksum), so a runtime can map it straight from the file: a CPU
    artifact's weights."""
    payload_file = Path(payload_file)
    check_metadata_text(metadata, path)
    meta = {k: v for k, v in metadata.items() if k not in _FILLED_IN}
    with open(payload_file, "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
    layout: dict[str, list[int]] = {}
    pieces: list[bytes] = []
    offset = payload_file.stat().st_size
    for name, blob in sections.items():
        padding = -offset % (align or {}).get(name, 1)
        if padding:
            pieces.append(bytes(padding))
            offset += padding
        layout[name] = [offset, len(blob)]
        pieces.append(blob)
        offset += len(blob)
    for piece in pieces:
        digest.update(piece)
    meta = {"format_version": FORMAT_VERSION, **meta, "sections": layout}
    digest.update(canonical_metadata(meta))
    meta["checksum"] = digest.hexdigest()
    meta_bytes = json.dumps(meta, ensure_ascii=False).encode("utf-8")
    footer = FOOTER.pack(MAGIC, FORMAT_VERSION, 0, offset, len(meta_bytes))
    with open(payload_file, "ab") as f:
        for piece in pieces:
            f.write(piece)
        f.write(meta_bytes)
        f.write(footer)
    os.replace(payload_file, path)


def read_artifact(path: str | os.PathLike[str], *, verify_checksum: bool = True) -> Artifact:
    """Open and validate an artifact: footer, format version, metadata, checksum.

    Reads the 32-byte footer first, so a file that is no artifact is refused without
    reading it; the checksum is then streamed in 1 MiB chunks.
    """
    with open_artifact(path) as f:
        return read_artifact_file(f, Path(path), verify_checksum=verify_checksum)


def open_artifact(path: str | os.PathLike[str]) -> BinaryIO:
    """The artifact file opened for reading, or an ArtifactError saying why not. A loader
    that must run the very bytes it verified keeps this file open: see cpu.py."""
    path = Path(path)
    try:
        return open(path, "rb")  # noqa: SIM115 -- the caller closes it
    except FileNotFoundError:
        raise ArtifactError(f"no artifact at '{path}': the file does not exist") from None
    except IsADirectoryError:
        raise ArtifactError(f"'{path}' is a directory, not an artifact file") from None
    except OSError as e:
        raise ArtifactError(f"cannot read artifact '{path}': {e.strerror}") from None


def read_artifact_file(f: BinaryIO, path: Path, *, verify_checksum: bool = True) -> Artifact:
    """:func:`read_artifact` of an already-open file (`path` names it in messages)."""
    size = os.fstat(f.fileno()).st_size
    version, meta_offset, meta_length = _read_footer(f, path, size)
    f.seek(meta_offset)
    metadata = _parse_metadata(f.read(meta_length), path, version)
    sections = _section_layout(metadata, path, meta_offset)
    if verify_checksum:
        _verify_checksum(f, path, meta_offset, metadata)
    plan = _check_fields(metadata, path)
    payload_length = min([meta_offset] + [offset for offset, _ in sections.values()])
    return Artifact(path, metadata, payload_length, plan, sections)


def _damaged(path: Path, why: str) -> ArtifactError:
    return ArtifactError(
        f"artifact '{path}' is damaged: {why}; copy it again or re-export it from the model"
    )


def _too_new(path: Path, version: int) -> ArtifactError:
    return ArtifactError(
        f"artifact '{path}' has format version {version}, but this tensorsmith-runtime "
        f"({__version__}) reads format version {FORMAT_VERSION} at most; upgrade it "
        "(pip install -U tensorsmith-runtime) or export the model with a tensorsmith that "
        f"writes format version {FORMAT_VERSION}"
    )


def _read_footer(f: Any, path: Path, size: int) -> tuple[int, int, int]:
    if size < FOOTER_SIZE:
        raise _not_an_artifact(path, f"it has only {size} bytes")
    f.seek(size - FOOTER_SIZE)
    magic, version, reserved, meta_offset, meta_length = FOOTER.unpack(f.read(FOOTER_SIZE))
    if magic != MAGIC:
        raise _not_an_artifact(path, "it does not end with the tensorsmith footer")
    if version > FORMAT_VERSION:
        raise _too_new(path, version)
    if reserved != 0:
        raise _damaged(path, f"its footer's reserved field is {reserved}, not 0")
    if version < 1:
        raise _damaged(path, f"its footer says format version {version}, which never existed")
    if meta_offset + meta_length + FOOTER_SIZE != size:
        raise _damaged(
            path,
            f"its footer puts the metadata at bytes {meta_offset}..{meta_offset + meta_length} "
            f"and the file has {size} bytes (cut short or appended to?)",
        )
    return version, meta_offset, meta_length


def _not_an_artifact(path: Path, why: str) -> ArtifactError:
    return ArtifactError(
        f"'{path}' is not a tensorsmith artifact: {why}. Load a file written by "
        "module.export_library(); if this one was copied from an artifact, the copy is "
        "incomplete: copy it again"
    )


def _parse_metadata(raw: bytes, path: Path, footer_version: int) -> dict[str, Any]:
    text = ""
    try:
        text = raw.decode("utf-8")
        metadata = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _damaged(path, f"its metadata is not valid JSON ({e})") from None
    except RecursionError:
        raise _damaged(path, f"its metadata field {_deepest_field(text)!r} is nested too "
                             "deeply to read") from None
    if not isinstance(metadata, dict):
        raise _damaged(path, "its metadata is not a JSON object")
    version = metadata.get("format_version")
    if not isinstance(version, int):
        raise _damaged(path, "its metadata has no format_version")
    if version > FORMAT_VERSION:
        raise _too_new(path, version)
    if version != footer_version:
        raise _damaged(
            path, f"its metadata says format version {version} and its footer {footer_version}"
        )
    return metadata


def _section_layout(metadata: dict[str, Any], path: Path, limit: int) -> dict[str, tuple[int, int]]:
    raw = metadata.get("sections", {})
    if not isinstance(raw, dict):
        raise _damaged(path, "its metadata 'sections' is not an object")
    sections: dict[str, tuple[int, int]] = {}
    for name, entry in raw.items():
        ok = isinstance(entry, list) and len(entry) == 2 and all(type(v) is int for v in entry)
        if not ok or entry[0] < 0 or entry[1] < 0 or entry[0] + entry[1] > limit:
            raise _damaged(path, f"section {name!r} lies outside the file ({entry!r})")
        sections[name] = (entry[0], entry[1])
    return sections


def _deepest_field(text: str) -> str:
    """The top-level metadata key whose value holds the deepest nesting (only called
    after the JSON parser gave up, so the scan costs nothing on good files)."""
    depth, deepest, key, found = 0, 0, "", ""
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"\s*:?|[\[\]{}]', text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest, found = depth, key
        elif token in "]}":
            depth -= 1
        elif depth == 1 and token.endswith(":"):
            key = json.loads(token.rstrip(": \t\r\n"))
    return found or "(top level)"


def _verify_checksum(f: Any, path: Path, length: int, metadata: dict[str, Any]) -> None:
    expected = metadata.get("checksum")
    if not isinstance(expected, str):
        raise _damaged(path, "its metadata has no checksum")
    digest = hashlib.sha256()
    f.seek(0)
    remaining = length
    while remaining > 0:
        chunk = f.read(min(CHUNK, remaining))
        if not chunk:
            raise _damaged(path, "it ended while reading its contents")
        digest.update(chunk)
        remaining -= len(chunk)
    if metadata["format_version"] >= METADATA_CHECKSUM_SINCE:
        try:
            digest.update(canonical_metadata(metadata))
        except (RecursionError, ValueError):
            raise _damaged(path, "its metadata cannot be re-encoded to check it") from None
    if digest.hexdigest() != expected.lower():
        raise _damaged(
            path,
            f"its contents do not match its checksum (sha256 {digest.hexdigest()[:16]}..., "
            f"expected {expected[:16]}...)",
        )


#: Metadata keys outside the plan that the runtime reads, and their types.
_OTHER_KEYS = {"cpu_features": "strs"}


def _check_fields(metadata: dict[str, Any], path: Path) -> Plan:
    """The plan (every plan key typed, plan.py) after the other keys' types are checked:
    a key may be missing, but one that is there has its documented type, so a mistyped
    file is refused here, naming the field, rather than failing inside what reads it."""
    for key, kind in _OTHER_KEYS.items():
        if key in metadata:
            expect(metadata[key], kind, key, path)
    return Plan.from_json(metadata, path)
