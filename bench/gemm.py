"""The GEMM table: float32 matmul, tensorsmith (a one-MatMul graph compiled for llvm)
against numpy's BLAS, in GFLOP/s at the same thread count.

Each shape runs twice for tensorsmith: with ``b`` a second input (activations times
activations, as attention's products) and with ``b`` a constant (a layer's weights,
which the compiler stores as it likes at build time). numpy's ``b`` is the same array.

tensorsmith's inputs are set once and ``m.run()`` is timed (it also copies the output
out, m x n floats: small next to the 2mnk flops). numpy runs ``np.matmul(a, b, out=c)``
in a subprocess, see :mod:`bench.gemm_numpy`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

from .errors import describe_failure
from .measure import Stats, relative_error, time_runs
from .models import matmul_model

__all__ = ["GemmResult", "GemmShape", "bench_gemm", "numpy_gemm", "parse_shapes",
           "tensorsmith_gemm"]

ROOT = Path(__file__).resolve().parent.parent
# environment variables that can slow numpy's OpenBLAS down (forcing a core type or L2
# size unlike the machine's): removed for the numpy subprocess only
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class GemmShape:
    """``[m, k] @ [k, n]``; ``weight``: ``b`` is a constant of the compiled model."""

    m: int
    n: int
    k: int
    weight: bool = False

    @property
    def label(self) -> str:
        size = str(self.n) if self.m == self.n == self.k else f"{self.m}x{self.n}x{self.k}"
        return f"{size} {'weight' if self.weight else 'input'}"

    @property
    def key(self) -> str:
        """The numpy subprocess's key: ``b`` is an array there either way."""
        return f"{self.m}x{self.n}x{self.k}"


def parse_shapes(text: str, b: str = "both") -> list[GemmShape]:
    """``"512,32x50257x768"`` (n, or MxNxK) into shapes; ``b`` is ``input``, ``weight``
    or ``both`` (each shape twice)."""
    shapes = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        dims = [int(d) for d in item.lower().split("x")]
        m, n, k = dims * 3 if len(dims) == 1 else dims
        for weight in {"input": (False,), "weight": (True,), "both": (False, True)}[b]:
            shapes.append(GemmShape(m, n, k, weight))
    return shapes


@dataclass
class GemmResult:
    """One row of the GEMM table."""

    shape: GemmShape
    tensorsmith: Stats | None = None
    numpy: Stats | None = None
    max_rel_error: float | None = None
    error: str | None = None
    traceback: str | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.shape.m * self.shape.n * self.shape.k

    def gflops(self, stats: Stats | None, best: bool = False) -> float | None:
        """GFLOP/s at the median time (at the min time with ``best``)."""
        if stats is None:
            return None
        return self.flops / ((stats.min_ms if best else stats.median_ms) * 1e-3) / 1e9

    @property
    def ratio(self) -> float | None:
        """tensorsmith GFLOP/s / numpy GFLOP/s: above 1 means tensorsmith is faster."""
        ours, theirs = self.gflops(self.tensorsmith), self.gflops(self.numpy)
        return None if ours is None or theirs is None else ours / theirs

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape.label,
            "m": self.shape.m,
            "n": self.shape.n,
            "k": self.shape.k,
            "b_is_weight": self.shape.weight,
            "tensorsmith": self.tensorsmith.as_dict() if self.tensorsmith else None,
            "numpy": self.numpy.as_dict() if self.numpy else None,
            "tensorsmith_gflops": self.gflops(self.tensorsmith),
            "numpy_gflops": self.gflops(self.numpy),
            "tensorsmith_gflops_best": self.gflops(self.tensorsmith, best=True),
            "numpy_gflops_best": self.gflops(self.numpy, best=True),
            "ratio_tensorsmith_over_numpy": self.ratio,
            "max_rel_error": self.max_rel_error,
            "error": self.error,
            "traceback": self.traceback,
        }


def tensorsmith_gemm(
    shape: GemmShape, workdir: Path, *, repeat: int, warmup: int, threads: int,
    max_seconds: float
) -> GemmResult:
    """Compile ``a @ b`` at ``shape`` and time it; failures are recorded in the result."""
    result = GemmResult(shape)
    stage = "compile"
    try:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((shape.m, shape.k), dtype=np.float32)
        b = rng.standard_normal((shape.k, shape.n), dtype=np.float32)
        model = matmul_model(shape.n, m=shape.m, k=shape.k, weight=b if shape.weight else None)
        mod, params = from_onnx(model)
        artifact = workdir / f"matmul_{shape.key}_{int(shape.weight)}.so"
        build(mod, target="llvm", params=params).export_library(artifact)
        stage = "run"
        with rt.load(artifact, device="cpu", num_threads=threads) as m:
            m.set_input("a", a)
            if not shape.weight:
                m.set_input("b", b)
            (c,) = m.run()
            result.max_rel_error = relative_error(c, a.astype(np.float64) @ b)
            stage = "time"
            result.tensorsmith = time_runs(
                m.run, repeat=repeat, warmup=warmup, max_seconds=max_seconds
            )
    except Exception as exc:
        result.error, result.traceback = describe_failure(stage, exc)
    return result


def numpy_env(threads: int) -> dict[str, str]:
    """The environment of the numpy subprocess: BLAS threads limited, overrides removed."""
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_OVERRIDES}
    env.update({k: str(threads) for k in THREAD_VARIABLES})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def numpy_gemm(
    shapes: list[GemmShape], *, repeat: int, warmup: int, threads: int, max_seconds: float
) -> dict[str, Any]:
    """Run :mod:`bench.gemm_numpy` in a subprocess; its JSON output, parsed."""
    args = {
        "shapes": sorted({(s.m, s.n, s.k) for s in shapes}),
        "repeat": repeat,
        "warmup": warmup,
        "threads": threads,
        "max_seconds": max_seconds,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "bench.gemm_numpy", json.dumps(args)],
        env=numpy_env(threads),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the numpy GEMM subprocess failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_gemm(
    shapes: list[GemmShape],
    workdir: Path,
    *,
    repeat: int,
    warmup: int,
    threads: int,
    max_seconds: float = 20.0,
) -> tuple[list[GemmResult], dict[str, Any]]:
    """Every shape through tensorsmith, then numpy; the results and numpy's BLAS info."""
    results = [
        tensorsmith_gemm(
            shape, workdir, repeat=repeat, warmup=warmup, threads=threads,
            max_seconds=max_seconds
        )
        for shape in shapes
    ]
    info: dict[str, Any] = {}
    try:
        out = numpy_gemm(
            shapes, repeat=repeat, warmup=warmup, threads=threads, max_seconds=max_seconds
        )
        info = {"blas": out["blas"], "limited_by_threadpoolctl": out["limited_by_threadpoolctl"]}
        for r in results:
            r.numpy = Stats(**out["results"][r.shape.key])
    except Exception as exc:
        info = {"error": f"{type(exc).__name__}: {exc}"}
    return results, info
