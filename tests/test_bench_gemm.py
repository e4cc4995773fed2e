"""The GEMM table's plumbing: tensorsmith in this process and numpy in its own, their runs
alternating in blocks. Counts and errors only, never times."""

from __future__ import annotations

from pathlib import Path

from bench.gemm import GemmShape, NumpyGemm, bench_gemm
from bench.measure import call_timer, interleaved_blocks


def test_blocks_alternate_and_count_every_timed_run() -> None:
    calls: list[str] = []
    timers = [call_timer(lambda: calls.append("a")), call_timer(lambda: calls.append("b"))]
    a, b = interleaved_blocks(timers, repeat=5, warmup=2, block=2, settle_s=0.0)
    assert (a.runs, b.runs) == (5, 5)
    # warm-up 2 + 2, then per round one untimed call and the block, a's before b's
    assert calls[:4] == ["a", "a", "b", "b"]
    assert calls[4:10] == ["a"] * 3 + ["b"] * 3
    assert len(calls) == 4 + 5 * 2 + 3 * 2  # three rounds (2, 2, 1), one wake-up each


def test_numpy_process_times_the_blocks_it_is_asked_for() -> None:
    numpy = NumpyGemm(threads=1)
    try:
        times = numpy.timer(GemmShape(8, 8, 8))(3, 1)
        assert len(times) == 3 and all(t > 0 for t in times)
    finally:
        numpy.close()
    assert numpy.proc.returncode == 0


def test_gemm_table_has_both_engines_and_a_correct_result(tmp_path: Path) -> None:
    results, info = bench_gemm([GemmShape(16, 16, 16)], tmp_path, repeat=3, warmup=1,
                               threads=1)
    (r,) = results
    assert r.error is None and "error" not in info
    assert r.tensorsmith is not None and r.numpy is not None and r.ratio is not None
    assert r.max_rel_error is not None and r.max_rel_error < 1e-5
