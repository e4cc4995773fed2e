"""``tensorsmith quantize`` end to end, in this process: files in, a QDQ model and the
accuracy report out, and plain ``error:`` lines (exit 2) for bad calibration files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from quantize_models import classifier, images

from tensorsmith import quantize as library
from tensorsmith.cli import quantize_cmd
from tensorsmith.cli.main import main


@pytest.fixture
def files(tmp_path: Path) -> Path:
    onnx.save(classifier(), str(tmp_path / "model.onnx"))
    np.savez(tmp_path / "calib.npz", x=images(8, seed=1))
    np.savez(tmp_path / "eval.npz", x=images(24, seed=2))
    return tmp_path


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def test_quantize_writes_a_qdq_model_and_prints_the_report(
        files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = files / "model.int8.onnx"
    code = main(["quantize", str(files / "model.onnx"), "--calib", str(files / "calib.npz"),
                 "--eval", str(files / "eval.npz"), "--method", "percentile", "-q",
                 "-o", str(out)])  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    int8 = [t.name for t in model.graph.initializer if t.data_type == TensorProto.INT8
            and len(t.dims) > 1]
    assert sorted(int8) == ["w1_quantized", "w2_quantized", "w3_quantized", "w4_quantized"]
    assert out.stat().st_size < 0.5 * (files / "model.onnx").stat().st_size
    assert "quantized 4 nodes (Conv x2, Gemm x1, MatMul x1)" in stdout
    assert "percentile calibration" in stdout
    assert "24 samples" in stdout  # the --eval file's, not the calibration file's
    logits = next(line for line in stdout.splitlines() if line.strip().startswith("logits"))
    assert "/24)" in logits  # top-1 agreement over the 24 rows


def test_json_summary(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["quantize", str(files / "model.onnx"), "--calib", str(files / "calib.npz"),
                 "--activation-type", "int8", "--json", "-o", str(files / "q.onnx")])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [q["op_type"] for q in summary["quantized"]] == ["Conv", "Conv", "MatMul", "Gemm"]
    lo, hi = summary["ranges"]["x"]
    assert lo < 0 < hi
    logits = summary["report"]["outputs"][0]
    assert logits["name"] == "logits" and logits["rows"] == 8
    assert 0 < logits["relative_error"] < 0.05 and logits["top1_agreement"] >= 0.75


def test_bad_calibration_files_are_plain_errors(files: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    model, out = str(files / "model.onnx"), str(files / "q.onnx")
    (files / "junk.npz").write_text("not numpy")
    np.savez(files / "other.npz", image=images(2, seed=0))
    np.savez(files / "small.npz", x=images(2, seed=0)[..., :8])
    cases = [
        ("junk.npz", "cannot read calibration file", "not an .npz file"),
        ("missing.npz", "calibration file", "does not exist"),
        ("other.npz", "lacks the model input(s) 'x' (it has 'image')"),
        ("small.npz", "'x' has shape [1, 3, 16, 8], the model expects [1, 3, 16, 16]"),
    ]
    for name, *fragments in cases:
        code = main(["quantize", model, "--calib", str(files / name), "-q", "-o", out])
        assert_user_error(code, capsys.readouterr().err, *fragments)
    assert not Path(out).exists()


def test_unknown_method_is_refused_by_the_parser(files: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["quantize", str(files / "model.onnx"), "--calib", str(files / "calib.npz"),
              "--method", "kl", "-o", str(files / "q.onnx")])
    assert stop.value.code == 2
    assert "invalid choice: 'kl'" in capsys.readouterr().err


def test_command_choices_are_the_quantizers(capsys: pytest.CaptureFixture[str]) -> None:
    assert quantize_cmd.METHODS == library.METHODS
    assert tuple(library.ACTIVATION_TYPES) == quantize_cmd.ACTIVATION_TYPES
    with pytest.raises(SystemExit):
        main(["quantize", "--help"])
    assert "tensorsmith quantize model.onnx --calib" in capsys.readouterr().out
