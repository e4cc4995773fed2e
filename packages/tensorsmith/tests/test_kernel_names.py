"""One name per kernel: `tune`, `inspect` and `run --profile` (table and trace) print the
same string for each kernel of the example MLP, and its digits begin the kernel's
workload key in the tuning records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.onnx"
SHAPE = ("--input-shape", "input:1,784")


def tsm(*args: object) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "tensorsmith.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _first_words(lines: list[str], start: str, stop: str) -> list[str]:
    """The first word of each line after the one starting with ``start``, up to the one
    starting with ``stop``."""
    begin = next(i for i, line in enumerate(lines) if line.startswith(start)) + 1
    end = next(i for i in range(begin, len(lines)) if lines[i].startswith(stop))
    return [line.split()[0] for line in lines[begin:end]]


def test_tune_inspect_and_profile_name_kernels_alike(tmp_path) -> None:
    pytest.importorskip("tensorsmith.autotune", reason="needs tensorsmith-autotune")
    records = tmp_path / "mlp.jsonl"
    tuned = tsm("tune", MLP, *SHAPE, "--trials", 8, "--per-round", 2, "--min-repeat-ms", 2,
                "--confirm-top", 0, "--in-model-top", 0, "--records", records, "--no-plot")
    in_tune = _first_words(tuned.stdout.splitlines(), "kernel ", "model:")

    artifact = tmp_path / "mlp.so"
    tsm("compile", MLP, *SHAPE, "--records", records, "-o", artifact)
    in_inspect = _first_words(tsm("inspect", artifact).stdout.splitlines(), "kernels ",
                              "memory ")
    trace = tmp_path / "trace.json"
    profiled = tsm("run", artifact, "--profile", "--repeat", 3, "--trace", trace)
    in_profile = _first_words(profiled.stdout.splitlines(), "kernel ", "3 runs")
    in_trace = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]
                if e.get("cat") == "kernel"}

    assert len(in_tune) == 4 and all("#" in name for name in in_tune), tuned.stdout
    assert sorted(in_tune) == sorted(in_inspect) == sorted(in_profile) == sorted(in_trace)
    workloads = {json.loads(line)["workload"] for line in records.read_text().splitlines()}
    for name in in_tune:
        digits = name.split("#")[1]
        assert any(w.startswith(digits) for w in workloads), (name, workloads)
