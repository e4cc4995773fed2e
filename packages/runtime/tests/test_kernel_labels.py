"""Kernel names: the name of a kernel's steps (``fused_matmul_add_relu#40de``, as ``build``
writes them) wherever it is unambiguous, the symbol otherwise."""

from __future__ import annotations

from tensorsmith.runtime.kernel_names import kernel_label, kernel_labels
from tensorsmith.runtime.profiling import summarize


def _metadata(step_names: list[str | None]) -> dict:
    kernels = [{"name": "tsm_kernel_0", "ops": ["matmul"], "nodes": ["a"]},
               {"name": "tsm_kernel_1", "ops": ["matmul"], "nodes": ["b"]}]
    steps = [{"kernel": f"tsm_kernel_{i % 2}", **({"name": n} if n else {})}
             for i, n in enumerate(step_names)]
    return {"kernels": kernels, "steps": steps}


def test_label_is_ops_and_the_workload_keys_first_digits() -> None:
    assert kernel_label("fused_matmul_add", "40de3c818858a2c2:matmul(...)") == \
        "fused_matmul_add#40de"


def test_kernels_are_named_by_their_steps() -> None:
    metadata = _metadata(["fused_matmul#40de", "fused_matmul#7b70", "fused_matmul#40de"])
    assert kernel_labels(metadata) == {"tsm_kernel_0": "fused_matmul#40de",
                                       "tsm_kernel_1": "fused_matmul#7b70"}
    rows = summarize(["fused_matmul#40de", "fused_matmul#7b70", "fused_matmul#40de"],
                     [[1.0, 2.0, 3.0]], [6.0]).by_kernel(metadata)
    assert [(r["kernel"], r["symbol"], r["total_ms"]) for r in rows] == [
        ("fused_matmul#40de", "tsm_kernel_0", 4.0), ("fused_matmul#7b70", "tsm_kernel_1", 2.0)]


def test_ambiguous_or_missing_step_names_keep_the_symbols() -> None:
    # an artifact built before step names carried the digits: both kernels' steps alike
    assert kernel_labels(_metadata(["fused_matmul", "fused_matmul"])) == {
        "tsm_kernel_0": "tsm_kernel_0", "tsm_kernel_1": "tsm_kernel_1"}
    assert kernel_labels(_metadata([None, "fused_matmul#7b70"])) == {
        "tsm_kernel_0": "tsm_kernel_0", "tsm_kernel_1": "fused_matmul#7b70"}
    assert kernel_labels(None) == {} and kernel_labels({"kernels": 3}) == {}
