"""A short slice of the fuzz session (``nox -s fuzz`` runs the long one): a few dozen
cases of each campaign with fixed seeds, none of which may crash, hang, raise an internal
error or compute a wrong result; and properties of the record checker over any JSON."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.runner import BAD, CAMPAIGN_NAMES, case_seeds, run_cases, summary
from tensorsmith.ir.record_checks import InvalidRecord, check_record, check_step

SLICE_CASES = 30
SLICE_SEED = 0

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)
STEP_KINDS = st.sampled_from(["split", "fuse", "reorder", "annotate", "layout", "cache_read",
                              "cache_write", "fuse_epilogue", "compute_inline"])


def test_fuzz_slice() -> None:
    cases = [(c, s) for c in CAMPAIGN_NAMES for s in case_seeds(SLICE_SEED, SLICE_CASES)]
    results = run_cases(cases, jobs=2)
    assert not [r for r in results if r.outcome in BAD], summary(results)


@given(JSON)
@settings(max_examples=300, deadline=None)
def test_any_json_line_is_a_record_or_invalid(value: Any) -> None:
    """Whatever a records line holds, checking it passes or names the field at fault."""
    with contextlib.suppress(InvalidRecord):
        check_record(value)


@given(st.one_of(JSON, st.tuples(STEP_KINDS | JSON, JSON, JSON).map(list)))
@settings(max_examples=300, deadline=None)
def test_any_step_is_valid_or_invalid(step: Any) -> None:
    with contextlib.suppress(InvalidRecord):
        check_step(step, "steps[0]")


@pytest.mark.parametrize("step", [
    [["split"], "t0_conv2d", ["t0_conv2d_i0", 4]],  # records:1000055 of the fuzz session
    ["layout", "t0_conv2d", ["in1", [0, 1, 2, 3], None, ["winograd_f2_3"]]],
], ids=["kind a list", "transform a list"])
def test_unhashable_step_values_are_invalid(step: list[Any]) -> None:
    """A list where the checker looked a name up in a dict was a TypeError (a bug)."""
    with pytest.raises(InvalidRecord):
        check_step(step, "steps[0]")


@pytest.mark.parametrize(("campaign", "seed"), [("onnx", 7000139), ("records", 85),
                                               ("records", 21000041), ("onnx", 12000111)])
def test_cases_the_long_session_found_now_pass(campaign: str, seed: int) -> None:
    """onnx:7000139, an MLP given a batch of 0 (a product with a fused epilogue over no
    rows left a stage neither inlined nor stored: KeyError in lowering); records:85, a
    record whose fused epilogue reads a stage it no longer inlines (the same KeyError);
    records:21000041, a record without its optional "error" field (a KeyError choosing);
    onnx:12000111, a node name that is not UTF-8, which protobuf returns as bytes (a
    TypeError in the importer's name check)."""
    (result,) = run_cases([(campaign, seed)], jobs=1)
    assert result.outcome not in BAD, summary([result])
