"""numpy's column of the GEMM table, run in its own process and driven over a pipe.

    OPENBLAS_NUM_THREADS=2 python -m bench.gemm_numpy 2

:class:`bench.gemm.NumpyGemm` starts it with the BLAS thread variables set (and
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` removed) before numpy is imported, which is
the only moment they take effect; threadpoolctl, when installed, limits the threads too.
A process of its own keeps OpenBLAS's threads apart from tensorsmith's; being driven
block by block lets the two engines' runs alternate (see ``measure.interleaved_blocks``),
so both see the same machine, even one whose other load changes by the second.

Protocol, one JSON object per line: first it prints ``{"blas": [...], "limited_by_
threadpoolctl": bool}``; then for every request ``{"m", "n", "k", "count", "untimed"}``
read from stdin it runs ``np.matmul(a, b, out=c)`` ``untimed`` times, then ``count``
timed times, and prints ``{"times_ms": [...]}``. It exits at the end of stdin.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import Any

import numpy as np

from .measure import call_timer


def _limit_threads(threads: int) -> tuple[Any, list[dict[str, Any]]]:
    """threadpoolctl's limiter (kept alive by the caller) and the BLAS libraries seen."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return None, []
    limiter = threadpool_limits(limits=threads)
    return limiter, threadpool_info()


def main(argv: list[str]) -> int:
    limiter, blas = _limit_threads(int(argv[1]))
    print(json.dumps({"blas": blas, "limited_by_threadpoolctl": bool(limiter)}), flush=True)
    shape = None  # the operands of the last shape asked for (requests come shape by shape)
    for line in sys.stdin:
        req = json.loads(line)
        if (req["m"], req["n"], req["k"]) != shape:
            shape = m, n, k = req["m"], req["n"], req["k"]
            rng = np.random.default_rng(0)
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            c = np.empty((m, n), dtype=np.float32)
        times = call_timer(partial(np.matmul, a, b, out=c))(req["count"], req["untimed"])
        print(json.dumps({"times_ms": times}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
