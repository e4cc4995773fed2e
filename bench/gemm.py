"""The GEMM table: square float32 matmul, tensorsmith (a one-MatMul graph compiled for llvm)
against numpy's BLAS, in GFLOP/s at the same thread count.

tensorsmith's inputs are set once and ``m.run()`` is timed (it also copies the output
out, n² floats: small next to the 2n³ flops). numpy runs ``np.matmul(a, b, out=c)`` in a
subprocess, see :mod:`bench.gemm_numpy`.
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

__all__ = ["GemmResult", "bench_gemm", "numpy_gemm", "tensorsmith_gemm"]

ROOT = Path(__file__).resolve().parent.parent
# environment variables that can slow numpy's OpenBLAS down (forcing a core type or L2
# size unlike the machine's): removed for the numpy subprocess only
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class GemmResult:
    """One size of the GEMM table."""

    n: int
    tensorsmith: Stats | None = None
    numpy: Stats | None = None
    max_rel_error: float | None = None
    error: str | None = None
    traceback: str | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.n**3

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
            "n": self.n,
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
    n: int, workdir: Path, *, repeat: int, warmup: int, threads: int, max_seconds: float
) -> GemmResult:
    """Compile ``a @ b`` at ``n`` and time it; failures are recorded in the result."""
    result = GemmResult(n)
    stage = "compile"
    try:
        model = matmul_model(n)
        mod, params = from_onnx(model, shape={"a": (n, n), "b": (n, n)})
        artifact = workdir / f"matmul_{n}.so"
        build(mod, target="llvm", params=params).export_library(artifact)
        stage = "run"
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        with rt.load(artifact, device="cpu", num_threads=threads) as m:
            m.set_input("a", a)
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
    sizes: list[int], *, repeat: int, warmup: int, threads: int, max_seconds: float
) -> dict[str, Any]:
    """Run :mod:`bench.gemm_numpy` in a subprocess; its JSON output, parsed."""
    args = {
        "sizes": sizes,
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
    sizes: list[int],
    workdir: Path,
    *,
    repeat: int,
    warmup: int,
    threads: int,
    max_seconds: float = 20.0,
) -> tuple[list[GemmResult], dict[str, Any]]:
    """Every size through tensorsmith, then numpy; the results and numpy's BLAS info."""
    results = [
        tensorsmith_gemm(
            n, workdir, repeat=repeat, warmup=warmup, threads=threads, max_seconds=max_seconds
        )
        for n in sizes
    ]
    info: dict[str, Any] = {}
    try:
        out = numpy_gemm(
            sizes, repeat=repeat, warmup=warmup, threads=threads, max_seconds=max_seconds
        )
        info = {"blas": out["blas"], "limited_by_threadpoolctl": out["limited_by_threadpoolctl"]}
        for r in results:
            r.numpy = Stats(**out["results"][str(r.n)])
    except Exception as exc:
        info = {"error": f"{type(exc).__name__}: {exc}"}
    return results, info
