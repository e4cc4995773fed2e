"""Reading and validating a model before any conversion.

Each failure is a :class:`ModelError` that names the file and what is wrong with it, so
``tensorsmith compile`` prints one useful line instead of a protobuf traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from tensorsmith.ir.errors import ModelError

from .registry import canonical_domain

MIN_OPSET = 1
"""Converters are registered per operator version (``since``), so an operator whose old
versions mean something else (Add's ``broadcast`` attribute before opset 7) has no
converter at those opsets and is reported as unsupported by name."""
MAX_OPSET = 28
"""The newest opset of onnx 1.23, whose node test cases (each at its operator's newest
version) run against the llvm target in CI: see docs/onnx-conformance.md."""


def load(model: onnx.ModelProto | str | os.PathLike[str]) -> tuple[onnx.ModelProto, str]:
    """The model proto and a label for messages (its path, or ``<model>``)."""
    if isinstance(model, onnx.ModelProto):
        return model, f"<model {model.graph.name!r}>" if model.graph.name else "<model>"
    if not isinstance(model, str | os.PathLike):
        raise ModelError(f"from_onnx takes an onnx.ModelProto or a path, got "
                         f"{type(model).__name__}")
    path = Path(model)
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path} is a directory, not an ONNX model")
    try:
        proto = onnx.load(str(path))
    except Exception as e:  # DecodeError, external-data OSError, ...
        raise ModelError(f"{path} is not an ONNX model ({type(e).__name__}: {e})") from None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        # protobuf parses many byte strings as an (empty) message without complaint
        raise ModelError(f"{path} is not an ONNX model (it parses to no graph and no IR "
                         "version)")
    return proto, str(path)


def check(proto: onnx.ModelProto, source: str) -> None:
    """Run onnx's checker (without full shape inference) and report its verdict."""
    # The proto in memory is checked (the checker serializes it: 2.3 s for GPT-2's 500 MB,
    # where reading the file again took 3.9 s); over 2 GB, which one protobuf message
    # cannot hold, the file it came from. Asking the proto its size first (ByteSize) cost
    # another 1.5-2.7 s.
    error = _checker_error(proto)
    if error is not None and "2GB" in str(error).replace(" ", ""):
        on_disk = not source.startswith("<") and Path(source).is_file()
        if not on_disk:
            raise ModelError(
                f"{source} is over 2 GB, the most one protobuf message holds: save it with "
                "its weights as external data (onnx.save(model, path, "
                "save_as_external_data=True)) and import the file")
        error = _checker_error(source)
    if error is not None:
        raise ModelError(f"{source} is not a valid ONNX model: the ONNX checker says: "
                         f"{str(error).strip()}")


def _checker_error(model: onnx.ModelProto | str) -> Exception | None:
    """What onnx's checker raises for ``model`` (a proto or a path), or None."""
    try:
        onnx.checker.check_model(model, full_check=False)
    except Exception as e:  # onnx.checker.ValidationError and friends
        return e
    return None


def opsets(proto: onnx.ModelProto, source: str) -> dict[str, int]:
    """Opset per domain ('' for the default one), after checking the default's range."""
    result = {canonical_domain(o.domain): int(o.version) for o in proto.opset_import}
    default = result.get("")
    if default is None:
        raise ModelError(f"{source} imports no opset of the default ONNX domain")
    if not MIN_OPSET <= default <= MAX_OPSET:
        raise ModelError(
            f"{source} uses opset {default} of the default ONNX domain; tensorsmith imports "
            f"opsets {MIN_OPSET} to {MAX_OPSET}. Convert the model first, e.g. "
            "onnx.version_converter.convert_version(model, 17)")
    return result
