"""One artifact for any batch and sequence length: models whose inputs have symbolic axes
(ONNX dim_params) compile once, without shapes, and each run takes the shapes of the
arrays it is given. Every run is compared with ONNX Runtime at the same shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from model_testing import RTOL

import tensorsmith.runtime as rt
from bench.measure import relative_error
from bench.models import bert_encoder, resnet18, sample_inputs
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.runtime.errors import InputError


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _compile_once(model: onnx.ModelProto, tmp_path: Path, target: str = "llvm") -> Path:
    mod, params = from_onnx(model)  # no shapes: the dim_params stay symbolic
    path = tmp_path / f"{model.graph.name}.so"
    build(mod, target=target, params=params).export_library(path)
    return path


def _assert_runs_match(model: onnx.ModelProto, path: Path,
                       sizes: list[dict[str, int]]) -> None:
    with rt.load(path) as module:
        for dims in sizes:
            feeds = sample_inputs(model, seed=sum(dims.values()), dims=dims)
            got, want = module.run(feeds), _ort(model, feeds)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape, f"{dims}: shape {g.shape}, ONNX Runtime {w.shape}"
                err = relative_error(g, w)
                assert err < RTOL, f"{dims}: max abs error / max abs output = {err:.3g}"


def test_resnet_with_a_dynamic_batch_runs_batch_1_3_and_8(tmp_path: Path) -> None:
    model = resnet18(batch="batch", image=32)
    path = _compile_once(model, tmp_path)
    _assert_runs_match(model, path, [{"batch": 1}, {"batch": 3}, {"batch": 8}])


def test_bert_with_dynamic_batch_and_sequence_runs_lengths_7_64_128(tmp_path: Path) -> None:
    model = bert_encoder(batch="batch", seq="seq", layers=2, hidden=64, heads=2, vocab=500)
    path = _compile_once(model, tmp_path)
    _assert_runs_match(model, path, [{"batch": 1, "seq": 7}, {"batch": 2, "seq": 64},
                                     {"batch": 1, "seq": 128}, {"batch": 3, "seq": 7}])


def test_inputs_that_disagree_on_a_symbol_are_refused_naming_both(tmp_path: Path) -> None:
    model = bert_encoder(batch="batch", seq="seq", layers=1, hidden=32, heads=2, vocab=50)
    path = _compile_once(model, tmp_path)
    feeds = sample_inputs(model, dims={"batch": 2, "seq": 9})
    feeds["attention_mask"] = feeds["attention_mask"][:, :7]
    with rt.load(path) as module:
        with pytest.raises(InputError) as err:
            module.run(feeds)
        text = str(err.value)
        assert "attention_mask" in text and "seq" in text and "7" in text and "9" in text
        # the module is still usable with consistent inputs
        good = sample_inputs(model, dims={"batch": 2, "seq": 9})
        assert module.run(good)[0].shape == (2, 9, 32)


def test_a_length_past_the_position_table_is_refused_naming_the_assumption(
        tmp_path: Path) -> None:
    """The position table has 512 rows: the model is only defined for seq <= 512 (ONNX
    Runtime fails there too). The artifact says so instead of reading past the table."""
    model = bert_encoder(batch="batch", seq="seq", layers=1, hidden=32, heads=2, vocab=50)
    path = _compile_once(model, tmp_path)
    with rt.load(path) as module:
        with pytest.raises(InputError) as err:
            module.run(sample_inputs(model, dims={"batch": 1, "seq": 600}))
        text = str(err.value)
        assert "assumes" in text and "min(512, seq)" in text and "seq = 600" in text, text
        assert module.run(sample_inputs(model, dims={"batch": 1, "seq": 512}))[0].shape == \
            (1, 512, 32)
