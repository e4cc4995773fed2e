"""Dynamic shapes on the GPU targets: one artifact for any batch and sequence length, run
at several shapes against NumPy and ONNX Runtime. Vulkan runs with its device buffers
mapped and behind staging buffers (TSM_VULKAN_STAGING=1, the path of discrete GPUs);
buffers sized per shape grow when a shape needs more and are kept otherwise; a shape the
model cannot take is refused with the CPU library's message (tests/test_dynamic_shapes.py
runs the same models on the CPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from test_dynamic_shapes import _assert_runs_match, _compile_once

import tensorsmith.runtime as rt
from bench.models import bert_encoder, resnet18, sample_inputs
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.symbolic import symbol
from tensorsmith.runtime.errors import InputError

#: (target, TSM_VULKAN_STAGING) of each way a GPU artifact runs here
WAYS = [pytest.param(("vulkan", "0"), id="vulkan-mapped", marks=pytest.mark.vulkan),
        pytest.param(("vulkan", "1"), id="vulkan-staging", marks=pytest.mark.vulkan),
        pytest.param(("opencl", "0"), id="opencl", marks=pytest.mark.opencl)]


@pytest.fixture(scope="module", params=WAYS)
def target(request: pytest.FixtureRequest) -> str:
    """The target; for Vulkan, the memory path too, set for the whole module's runs."""
    name, staging = request.param
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSM_VULKAN_STAGING", staging)
        yield name


@pytest.fixture(scope="module")
def bert() -> onnx.ModelProto:
    return bert_encoder(batch="batch", seq="seq", layers=2, hidden=64, heads=2, vocab=500)


@pytest.fixture(scope="module")
def bert_path(bert: onnx.ModelProto, target: str,
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compile_once(bert, tmp_path_factory.mktemp(f"bert_{target}"), target=target)


def test_mlp_with_a_dynamic_batch_matches_numpy_at_every_batch(tmp_path: Path,
                                                               target: str) -> None:
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((16, 32)).astype(np.float32)
    b1 = rng.standard_normal(32).astype(np.float32)
    w2 = rng.standard_normal((32, 10)).astype(np.float32)
    b = GraphBuilder()
    x = b.input("x", (symbol("batch"), 16), "float32")
    h = b.add1("relu", [b.add1("add", [b.add1("matmul", [x, b.constant("w1", w1)]),
                                       b.constant("b1", b1)])])
    out = b.add1("softmax", [b.add1("matmul", [h, b.constant("w2", w2)])], {"axis": -1})
    lib = build(b.finish([out]), target=target)
    assert lib.plan.symbols == ("batch",)
    path = tmp_path / "mlp.tsm"
    lib.export_library(path)

    def reference(v: np.ndarray) -> np.ndarray:
        z = np.maximum(v @ w1 + b1, 0) @ w2
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    with rt.load(path) as module:
        assert module.input_info[0]["shape"] == ("batch", 16)
        for n in (1, 3, 200, 5, 70000, 2):  # growing, shrinking, a grid of many groups
            v = rng.standard_normal((n, 16)).astype(np.float32)
            (got,) = module.run({"x": v})
            assert got.shape == (n, 10)
            np.testing.assert_allclose(got, reference(v), rtol=1e-4, atol=1e-5)


@pytest.mark.opencl
def test_opencl_places_nothing_again_at_the_same_shape(bert: onnx.ModelProto,
                                                       tmp_path: Path) -> None:
    """(The OpenCL executor keeps one cl.Buffer per buffer sized per shape.)"""
    with rt.load(_compile_once(bert, tmp_path, target="opencl")) as module:
        executor = module._executor
        module.run(sample_inputs(bert, dims={"batch": 2, "seq": 9}))
        buffers, binding = list(executor._buffers), executor._binding
        module.run(sample_inputs(bert, seed=1, dims={"batch": 2, "seq": 9}))
        assert executor._binding is binding
        assert all(a is b for a, b in zip(executor._buffers, buffers, strict=True))
        module.run(sample_inputs(bert, dims={"batch": 1, "seq": 5}))  # smaller: kept
        assert all(a is b for a, b in zip(executor._buffers, buffers, strict=True))


def test_bert_with_dynamic_batch_and_sequence_matches_onnxruntime(
        bert: onnx.ModelProto, bert_path: Path) -> None:
    _assert_runs_match(bert, bert_path, [{"batch": 1, "seq": 7}, {"batch": 2, "seq": 64},
                                         {"batch": 1, "seq": 128}, {"batch": 3, "seq": 7}])


def test_resnet_with_a_dynamic_batch_matches_onnxruntime(tmp_path: Path, target: str) -> None:
    model = resnet18(batch="batch", image=32)
    path = _compile_once(model, tmp_path, target=target)
    _assert_runs_match(model, path, [{"batch": 1}, {"batch": 3}])


def test_inputs_that_disagree_on_a_symbol_are_refused_naming_both(
        bert: onnx.ModelProto, bert_path: Path) -> None:
    feeds = sample_inputs(bert, dims={"batch": 2, "seq": 9})
    feeds["attention_mask"] = feeds["attention_mask"][:, :7]
    with rt.load(bert_path) as module:
        with pytest.raises(InputError, match="input 'attention_mask' axis 1 is 7, but 'seq' "
                                             "is 9 from input 'input_ids' axis 1"):
            module.run(feeds)
        good = sample_inputs(bert, dims={"batch": 2, "seq": 9})
        assert module.run(good)[0].shape == (2, 9, 64)


def test_a_length_past_the_position_table_is_refused_naming_the_assumption(
        bert: onnx.ModelProto, bert_path: Path) -> None:
    with rt.load(bert_path) as module:
        with pytest.raises(InputError) as err:
            module.run(sample_inputs(bert, dims={"batch": 1, "seq": 600}))
        text = str(err.value)
        assert "assumes" in text and "min(512, seq)" in text and "seq = 600" in text, text


def test_a_fixed_axis_and_the_rank_are_checked(bert: onnx.ModelProto, bert_path: Path) -> None:
    feeds = sample_inputs(bert, dims={"batch": 1, "seq": 5})
    with rt.load(bert_path) as module:
        with pytest.raises(InputError, match="input_ids"):
            module.run({**feeds, "input_ids": feeds["input_ids"][0]})
        executor = module._executor
        with pytest.raises(InputError, match="axis 1 is 0, but it is the size 'seq', which "
                                             "is at least 1"):
            executor.set_input_shape(0, (1, 0))
        with pytest.raises(InputError, match="has 2 axes, got a shape of 3"):
            executor.set_input_shape(0, (1, 2, 3))
