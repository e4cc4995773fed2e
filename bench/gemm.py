"""The GEMM table: float32 matmul, tensorsmith (a one-MatMul graph compiled for llvm)
against numpy's BLAS, in GFLOP/s at the same thread count.

Each shape runs twice for tensorsmith: with ``b`` a second input (activations times
activations, as attention's products) and with ``b`` a constant (a layer's weights,
which the compiler stores as it likes at build time). numpy's ``b`` is the same array.

tensorsmith's inputs are set once and ``m.run()`` is timed (it also copies the output
out, m x n floats: small next to the 2mnk flops). numpy runs ``np.matmul(a, b, out=c)``
in a subprocess (:mod:`bench.gemm_numpy`); the two engines' runs alternate in blocks, so a
change of the machine's other load shows in both columns, not in one.
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
from .measure import BlockTimer, Stats, call_timer, interleaved_blocks, relative_error, time_runs
from .models import matmul_model

__all__ = ["GemmResult", "GemmShape", "NumpyGemm", "bench_gemm", "parse_shapes",
           "tensorsmith_gemm"]

ROOT = Path(__file__).resolve().parent.parent
# environment variables that can slow numpy's OpenBLAS down (forcing a core type or L2
# size unlike the machine's): removed for the numpy subprocess only
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: Seconds between blocks of runs: longer than OpenBLAS's threads keep polling after a
#: call (2^28 cycles by default, 0.11 s of a core measured on Zen 3).
NUMPY_SETTLE_S = 0.25
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
    shape: GemmShape,
    workdir: Path,
    *,
    repeat: int,
    warmup: int,
    threads: int,
    max_seconds: float,
    numpy: NumpyGemm | None = None,
) -> GemmResult:
    """Compile ``a @ b`` at ``shape`` and time it, alternating blocks of runs with
    ``numpy``'s when given; failures are recorded in the result."""
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
            if numpy is None:
                result.tensorsmith = time_runs(
                    m.run, repeat=repeat, warmup=warmup, max_seconds=max_seconds
                )
            else:
                # as many runs as fit max_seconds per engine, judged by one timed run;
                # blocks apart by more than OpenBLAS's threads poll after a call (about
                # 0.1 s of a core, which would slow the next block of tensorsmith down)
                once = time_runs(m.run, repeat=1, warmup=0).median_ms / 1e3
                runs = max(3, min(repeat, int(max_seconds / max(once, 1e-9))))
                result.tensorsmith, result.numpy = interleaved_blocks(
                    [call_timer(m.run), numpy.timer(shape)], repeat=runs, warmup=warmup,
                    block=max(1, min(10, runs // 3)), settle_s=NUMPY_SETTLE_S,
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


class NumpyGemm:
    """numpy's GEMM in :mod:`bench.gemm_numpy`'s process, timed block by block on request."""

    def __init__(self, threads: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.gemm_numpy", str(threads)],
            env=numpy_env(threads), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        self.info: dict[str, Any] = self._reply()

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"the numpy GEMM subprocess failed:\n{err.strip()}")
        return json.loads(line)

    def timer(self, shape: GemmShape) -> BlockTimer:
        """A block timer (see ``measure.interleaved_blocks``) of ``shape`` in numpy."""

        def run_block(count: int, untimed: int) -> list[float]:
            assert self.proc.stdin is not None
            request = {"m": shape.m, "n": shape.n, "k": shape.k, "count": count,
                       "untimed": untimed}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return list(self._reply()["times_ms"])

        return run_block

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def bench_gemm(
    shapes: list[GemmShape],
    workdir: Path,
    *,
    repeat: int,
    warmup: int,
    threads: int,
    max_seconds: float = 20.0,
) -> tuple[list[GemmResult], dict[str, Any]]:
    """Every shape through tensorsmith and numpy, their runs alternating in blocks; the
    results and numpy's BLAS info (tensorsmith alone when numpy's process fails)."""
    numpy: NumpyGemm | None = None
    info: dict[str, Any] = {}
    try:
        numpy = NumpyGemm(threads)
        info = numpy.info
    except Exception as exc:
        info = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        results = [
            tensorsmith_gemm(shape, workdir, repeat=repeat, warmup=warmup, threads=threads,
                             max_seconds=max_seconds, numpy=numpy)
            for shape in shapes
        ]
    finally:
        if numpy is not None:
            numpy.close()
    return results, info
