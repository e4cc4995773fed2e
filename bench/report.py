"""Printing and saving benchmark results: plain-text tables and one JSON file per run."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from .gemm import GemmResult
from .measure import Stats
from .model_bench import ModelResult

__all__ = [
    "environment",
    "format_table",
    "gemm_table",
    "load_average",
    "model_table",
    "per_op_tables",
    "write_json",
]

ACCURACY_LIMIT = 1e-4  # what tests/test_models.py requires; larger errors are flagged
ERROR_WIDTH = 110  # error messages are cut to this many characters in tables


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], notes: bool = False) -> str:
    """A ``|``-separated table: first column left-aligned, the others right-aligned.

    With ``notes``, the last column is free text, left unpadded.
    """
    padded_count = len(header) - 1 if notes else len(header)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(padded_count)]

    def line(cells: Sequence[str]) -> str:
        out = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return " | ".join(out + list(cells[padded_count:])).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    if notes:
        rule += "-+-" + "-" * len(header[-1])
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _ms(stats: Stats | None) -> str:
    return "-" if stats is None else f"{stats.median_ms:.2f} ({stats.min_ms:.2f})"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _gflops(r: GemmResult, stats: Stats | None) -> str:
    if stats is None:
        return "-"
    return f"{r.gflops(stats):.1f} ({r.gflops(stats, best=True):.1f})"


def _note(error: str | None, rel_error: float | None) -> str:
    if error:
        return error if len(error) <= ERROR_WIDTH else error[: ERROR_WIDTH - 3] + "..."
    if rel_error is not None and not rel_error < ACCURACY_LIMIT:
        return f"WRONG: error above {ACCURACY_LIMIT:g}"
    return ""


def model_table(results: Sequence[ModelResult], threads: int) -> str:
    header = [
        "model",
        "compile s",
        "tensorsmith ms",
        "ORT ms",
        "ratio",
        "max rel error",
        "note",
    ]
    rows = [
        [
            r.name,
            _num(r.compile_s, ".1f"),
            _ms(r.tensorsmith),
            _ms(r.onnxruntime),
            _num(r.ratio, ".2f"),
            _num(r.max_rel_error, ".1e"),
            _note(r.error, r.max_rel_error),
        ]
        for r in results
    ]
    if any(r.records for r in results):  # tuned builds: their own two columns
        header.insert(3, "tuned ms")
        header.insert(6, "tuned ratio")
        for r, row in zip(results, rows):
            row.insert(3, _ms(r.tuned))
            row.insert(6, _num(r.tuned_ratio, ".2f"))
            if r.tuned_max_rel_error is not None:  # the worse of the two builds
                worst = max(r.tuned_max_rel_error, r.max_rel_error or 0.0)
                row[-2], row[-1] = _num(worst, ".1e"), _note(r.error, worst)
    runs = max((r.onnxruntime.runs for r in results if r.onnxruntime), default=0)
    title = (
        f"Models: {threads} threads, batch 1, median (min) of {runs} runs, "
        "ratio = ORT / tensorsmith (> 1: tensorsmith faster)"
        + ("; tuned: built with the tuning records, tuned ratio = ORT / tuned"
           if any(r.records for r in results) else "")
    )
    return title + "\n" + format_table(header, rows, notes=True)


def gemm_table(results: Sequence[GemmResult], info: dict[str, Any], threads: int) -> str:
    header = ["shape, b", "tensorsmith GFLOP/s", "numpy GFLOP/s", "ratio", "max rel error",
              "note"]
    rows = [
        [
            r.shape.label,
            _gflops(r, r.tensorsmith),
            _gflops(r, r.numpy),
            _num(r.ratio, ".2f"),
            _num(r.max_rel_error, ".1e"),
            _note(r.error, r.max_rel_error),
        ]
        for r in results
    ]
    title = (
        f"GEMM: float32 [m, k] @ [k, n] (n alone: square), b a second input or a constant "
        f"weight, {threads} threads, GFLOP/s at the median (min) time, "
        "ratio = tensorsmith / numpy at the median (> 1: tensorsmith faster)"
    )
    lines = [title, format_table(header, rows, notes=True)]
    for lib in info.get("blas", []):
        lines.append(
            f"numpy BLAS: {lib.get('internal_api')} {lib.get('version')} "
            f"({lib.get('architecture', '?')}), {lib.get('num_threads')} threads"
        )
    if "error" in info:
        lines.append(f"numpy: {info['error']}")
    return "\n".join(lines)


def per_op_tables(results: Sequence[ModelResult]) -> str:
    """The slowest steps of each model's ``m.profile()``."""
    blocks = []
    for r in results:
        if not r.per_op:
            continue
        rows = [
            [
                e["name"],
                f"{e['calls_per_run']:g}",
                f"{e['ms_per_run']:.3f}",
                f"{e['percent']:.1f}",
            ]
            for e in r.per_op
        ]
        header = ["step", "calls per run", "ms per run", "% of steps"]
        title = f"{r.name}: slowest steps of m.profile(), summed per step name"
        blocks.append(title + "\n" + format_table(header, rows))
    return "\n\n".join(blocks)


def _versions() -> dict[str, str]:
    names = [
        "tensorsmith-runtime",
        "tensorsmith-ir",
        "tensorsmith-frontend-onnx",
        "tensorsmith-codegen-llvm",
        "onnx",
        "onnxruntime",
        "numpy",
        "llvmlite",
    ]
    found = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (``None`` where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def host_isa() -> str:
    """The widest x86 vector extension of this host ("avx512" or "avx2"), or the machine
    name elsewhere: every CPU figure is quoted with it."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return platform.machine()
    for isa in ("avx512f", "avx2"):
        if isa in flags:
            return isa.removesuffix("f")
    return platform.machine()


def environment(threads: int) -> dict[str, Any]:
    """Where the numbers come from: machine, versions, thread settings."""
    return {
        "isa": host_isa(),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "threads": threads,
        "load_average": load_average(),
        "versions": _versions(),
        "env": {
            k: os.environ[k]
            for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")
            if k in os.environ
        },
    }


def write_json(directory: Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``directory/<date and time>.json``; return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d_%H%M%S")
    path = directory / f"{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path
