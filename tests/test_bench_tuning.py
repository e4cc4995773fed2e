"""The tuning-study helpers and the tuned columns of the benchmark table: pure logic, no
compilation and no timing."""

from __future__ import annotations

import math

import numpy as np

from bench.measure import Stats
from bench.model_bench import ModelResult
from bench.report import model_table
from bench.study_search import best_so_far, first_reaching, random_curve, top_steps


def test_best_so_far_and_first_reaching() -> None:
    curve = best_so_far([3.0, math.inf, 2.0, 2.5, 1.0])
    assert curve.tolist() == [3.0, 3.0, 2.0, 2.0, 1.0]
    assert first_reaching(curve, 2.0) == 3 and first_reaching(curve, 0.5) is None


def test_random_curve_ends_at_the_minimum_and_never_rises() -> None:
    costs = list(np.random.default_rng(0).uniform(1, 10, 50))
    curve = random_curve(costs, orders=50)
    assert curve[-1] == min(costs) and np.all(np.diff(curve) <= 0)
    assert curve[0] > min(costs)  # one random draw is rarely the best


def test_top_steps_skips_failures_duplicates_and_the_empty_schedule() -> None:
    steps = [[["a"]], [], [["b"]], [["a"]], [["c"]]]
    costs = [2.0, 0.5, math.inf, 1.0, 3.0]
    assert top_steps(costs, steps, 2) == [[["a"]], [["c"]]]


def test_model_table_shows_tuned_columns_only_with_records() -> None:
    plain = ModelResult("m", {}, tensorsmith=Stats(2.0, 1.9, 3), onnxruntime=Stats(4.0, 3.9, 3),
                        max_rel_error=1e-6)
    assert "tuned" not in model_table([plain], 2)
    tuned = ModelResult("m", {}, tensorsmith=Stats(2.0, 1.9, 3), onnxruntime=Stats(4.0, 3.9, 3),
                        max_rel_error=1e-6, records="r.jsonl", tuned=Stats(1.0, 0.9, 3),
                        tuned_max_rel_error=1e-3)
    table = model_table([tuned], 2)
    header, _, row = table.splitlines()[1:]
    cells = dict(zip((c.strip() for c in header.split("|")), (c.strip() for c in row.split("|"))))
    assert cells["tuned ms"] == "1.00 (0.90)" and cells["tuned ratio"] == "4.00"
    assert cells["ratio"] == "2.00" and "WRONG" in cells["note"]
