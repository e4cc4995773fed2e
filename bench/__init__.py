"""tensorsmith benchmarks and the ONNX models they (and tests/test_models.py) use.

Importing this package keeps numpy's BLAS to one thread in the benchmark's own process.
numpy computes reference results with matrix products, and its BLAS threads poll for a
long while after each one. On a two-core machine that polling took the second core from
the kernels being timed: the GEMM table's 512 row read 36 GFLOP/s at the median, 88
without it (AVX2 host). numpy's own GEMM, the reference speed, runs in a subprocess with
its own thread count (bench/gemm.py).
"""

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # numpy not loaded yet: its BLAS starts so

try:  # numpy loaded already (an entry script imported it first): limit it in place
    from threadpoolctl import threadpool_limits
except ImportError:
    pass
else:
    threadpool_limits(1, user_api="blas")
