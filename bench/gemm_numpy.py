"""numpy's column of the GEMM table, meant to run in its own process.

    OPENBLAS_NUM_THREADS=2 python -m bench.gemm_numpy '{"shapes": [[512, 512, 512]], ...}'

:func:`bench.gemm.numpy_gemm` starts it with the BLAS thread variables set (and
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` removed) before numpy is imported, which is
the only moment they take effect. threadpoolctl, when installed, limits the threads too.
Prints one JSON object: ``{"results": {"MxNxK": Stats}, "blas": [threadpool info]}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from .measure import time_runs


def _limit_threads(threads: int) -> tuple[Any, list[dict[str, Any]]]:
    """threadpoolctl's limiter (kept alive by the caller) and the BLAS libraries seen."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return None, []
    limiter = threadpool_limits(limits=threads)
    return limiter, threadpool_info()


def main(argv: list[str]) -> int:
    args = json.loads(argv[1])
    threads: int = args["threads"]
    limiter, blas = _limit_threads(threads)
    results: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for m, n, k in args["shapes"]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), dtype=np.float32)
        stats = time_runs(
            lambda a=a, b=b, c=c: np.matmul(a, b, out=c),
            repeat=args["repeat"],
            warmup=args["warmup"],
            max_seconds=args.get("max_seconds"),
        )
        results[f"{m}x{n}x{k}"] = stats.as_dict()
    print(json.dumps({"results": results, "blas": blas, "limited_by_threadpoolctl": bool(limiter)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
