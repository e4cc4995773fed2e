"""Pieces shared by the subcommands: the user-error type and small argument helpers."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class CliError(Exception):
    """A mistake of the user's (bad file, bad value): reported as ``error: <message>``, exit 2."""


def existing_file(path: str, what: str) -> Path:
    """Return ``path`` as a Path, or raise CliError saying plainly what is wrong with it."""
    p = Path(path)
    if not p.exists():
        raise CliError(f"{what} '{path}' does not exist")
    if p.is_dir():
        raise CliError(f"{what} '{path}' is a directory, not a file")
    return p


def writable_file(path: str, what: str) -> Path:
    """Return ``path`` as a Path after checking that its folder exists."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CliError(f"cannot write {what} '{path}': folder '{parent}' does not exist")
    if p.is_dir():
        raise CliError(f"cannot write {what} '{path}': it is a directory")
    return p


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def describe(info: dict) -> str:
    """'name float32[1,784]' for an entry of input_info / output_info."""
    shape = ",".join(str(d) for d in info.get("shape", ()))
    return f"{info.get('name')} {info.get('dtype')}[{shape}]"


def summarize(name: str, array: np.ndarray, count: int = 5) -> str:
    """One line: name, dtype[shape], and the first few values."""
    flat = np.asarray(array).reshape(-1)
    head = ", ".join(_fmt(v) for v in flat[:count])
    more = ", ..." if flat.size > count else ""
    shape = ",".join(str(d) for d in np.shape(array))
    return f"  {name}  {np.asarray(array).dtype}[{shape}]  [{head}{more}]"


def _fmt(value: object) -> str:
    if isinstance(value, np.floating | float):
        return f"{float(value):.6g}"
    return str(value)


def named_kernels(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The kernels of an artifact's metadata (or a build's plan), each ``{"name", "symbol",
    "ops", "nodes"}``: ``name`` is the one ``run --profile`` and ``tune`` print too
    (:mod:`tensorsmith.runtime.kernel_names`), ``symbol`` its function in the artifact."""
    from tensorsmith.runtime.kernel_names import kernel_labels

    labels = kernel_labels(metadata)
    kernels = metadata.get("kernels")
    return [{"name": labels.get(str(k.get("name")), k.get("name")), "symbol": k.get("name"),
             "ops": list(k.get("ops") or []), "nodes": list(k.get("nodes") or [])}
            for k in (kernels if isinstance(kernels, list) else []) if isinstance(k, dict)]


def kernel_lines(kernels: list[dict], nodes_shown: int = 6) -> list[str]:
    """One line per kernel of an artifact's metadata: name, fused ops, model node names.

    ``tensorsmith inspect`` and ``compile --verbose`` print kernels the same way."""
    width = max([len(str(k.get("name"))) for k in kernels] or [0])
    lines = []
    for k in kernels:
        ops, nodes = list(k.get("ops") or []), list(k.get("nodes") or [])
        more = f", +{len(nodes) - nodes_shown} more" if len(nodes) > nodes_shown else ""
        shown = f"  [{', '.join(nodes[:nodes_shown])}{more}]" if nodes else ""
        lines.append(f"  {k.get('name')!s:<{width}}  {'+'.join(ops) or '-'}{shown}")
    return lines
