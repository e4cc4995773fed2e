"""``tensorsmith compare``: a deliberately wrong lowering is found at the right node.

The wrong lowering is made in this process: the op registry's ``relu`` keeps its NumPy
reference (so constant folding and the interpreter stay right) and gets a compute that
halves positive values. ``compare`` runs in the same process, so it compiles with it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tensorsmith.cli.compare import compare
from tensorsmith.cli.compare_cmd import DIVERGED, format_report
from tensorsmith.cli.main import main
from tensorsmith.cli.tensor_diff import diff
from tensorsmith.ir import te
from tensorsmith.ir.op_registry import REGISTRY, get_op
from tensorsmith.ir.te.expr import maximum

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.onnx"
NODES = ["conv1", "relu_bad", "conv2", "add_skip", "gap", "flatten", "fc", "softmax"]


def small_net() -> onnx.ModelProto:
    """Conv -> Relu -> Conv -> Add -> GlobalAveragePool -> Flatten -> Gemm -> Softmax."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((0.3 * rng.standard_normal(shape)).astype("f4"), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_bad"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], "conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "c1"], ["s"], "add_skip"),
        helper.make_node("GlobalAveragePool", ["s"], ["g"], "gap"),
        helper.make_node("Flatten", ["g"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], "softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 5])],
        [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3),
         weight("wf", 5, 8), weight("bf", 5)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def broken_relu(monkeypatch: pytest.MonkeyPatch) -> None:
    """relu's compute is wrong (positive values halved); its reference stays right."""
    good = get_op("relu")

    def halved(inputs, attrs, out, tag):
        x = inputs[0]
        zero, half = te.const(0.0, x.dtype), te.const(0.5, x.dtype)
        return [te.compute(x.shape, lambda *i: maximum(x[i], zero) * half, name=tag)]

    monkeypatch.setitem(REGISTRY, "relu", dataclasses.replace(good, compute=halved))


def test_correct_model_matches_everywhere() -> None:
    report = compare(small_net(), "llvm")
    assert report.ok and report.first_divergence is None and report.isolation is None
    assert [c.node for c in report.compared] == NODES
    assert all(c.diff.max_abs_diff <= c.diff.tolerance for c in report.compared)
    assert "all outputs match" in format_report(report)


def test_wrong_lowering_is_reported_at_its_node(broken_relu) -> None:
    report = compare(small_net(), "llvm")
    first = report.first_divergence
    assert first is not None and not report.ok
    assert (first.node, first.op_type, first.output, first.node_index) == (
        "relu_bad", "Relu", "r1", 1)  # fmt: skip
    assert report.compared[0].node == "conv1" and report.compared[0].ok  # before it: fine
    # statistics of both tensors, and the worst element
    assert first.reference.shape == first.actual.shape == (1, 8, 8, 8)
    assert first.actual.max == pytest.approx(first.reference.max / 2, rel=1e-5)
    d = first.diff
    assert d.reason == "values" and d.max_abs_diff > d.tolerance
    assert d.actual_at_worst == pytest.approx(d.reference_at_worst / 2, rel=1e-5)
    assert d.max_abs_diff == pytest.approx(first.reference.max / 2, rel=1e-5)
    # alone on ONNX Runtime's inputs it is still wrong: the lowering is at fault
    assert report.isolation is not None and report.isolation.ok is False
    text = format_report(report)
    assert "FIRST DIVERGENCE at node 'relu_bad' (Relu" in text and "output 'r1'" in text
    assert "still diverges" in text and "min" in text and "mean" in text
    json.dumps(report.to_json(), allow_nan=False)  # strict JSON


def test_amplified_difference_is_told_apart(broken_relu) -> None:
    """A node that diverges only because of its input: run alone it matches."""
    report = compare(small_net(), "llvm", isolate=False)
    conv2 = next(c for c in report.compared if c.node == "conv2")
    assert not conv2.ok  # inherits relu's error
    from tensorsmith.cli.isolate import isolate

    values = {**{"x": np.zeros((1, 3, 8, 8), "f4")}, **_reference(small_net())}
    alone = isolate(small_net(), 2, values, "llvm", "cpu", 1e-4, 1e-5)
    assert alone.ok is True and alone.diffs["c2"].ok


def _reference(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    from tensorsmith.cli.onnx_reference import run_reference

    return run_reference(model, {"x": np.zeros((1, 3, 8, 8), "f4")})


def test_cli_exit_status_3_on_divergence(broken_relu, tmp_path, capsys) -> None:
    path = tmp_path / "net.onnx"
    onnx.save(small_net(), path)
    assert main(["compare", str(path)]) == DIVERGED == 3
    out = capsys.readouterr().out
    assert "FIRST DIVERGENCE at node 'relu_bad'" in out
    np.savez(tmp_path / "in.npz", x=np.ones((1, 3, 8, 8), np.float32))
    assert main(["compare", str(path), "--inputs", str(tmp_path / "in.npz"), "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["first_divergence"]["node"] == "relu_bad"
    assert data["isolated"]["ok"] is False


def test_cli_all_match_exits_0(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tensorsmith.cli.main", "compare", str(MLP),
         "--input-shape", "input:2,784"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all outputs match" in proc.stdout and "compared 8 node outputs" in proc.stdout


def test_cli_bad_inputs_are_user_errors(tmp_path, capsys) -> None:
    path = tmp_path / "net.onnx"
    onnx.save(small_net(), path)
    np.savez(tmp_path / "wrong.npz", x=np.ones((1, 3, 4, 4), np.float32))
    assert main(["compare", str(path), "--inputs", str(tmp_path / "wrong.npz")]) == 2
    assert "shape" in capsys.readouterr().err
    np.savez(tmp_path / "none.npz", y=np.ones(3, np.float32))
    assert main(["compare", str(path), "--inputs", str(tmp_path / "none.npz")]) == 2
    assert "missing" in capsys.readouterr().err


def test_missing_onnxruntime_is_a_clear_user_error(tmp_path) -> None:
    code = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None  # import onnxruntime now raises ImportError\n"
        "from tensorsmith.cli.main import main\n"
        f"sys.exit(main(['compare', {str(MLP)!r}, '--input-shape', 'input:1,784']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "onnxruntime" in proc.stderr and "pip install" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---- the tolerance rule --------------------------------------------------------------


def test_diff_rule_scales_with_the_reference() -> None:
    ref = np.array([1000.0, 1e-6, -3.0], np.float32)
    near = ref + np.array([0.05, 1e-3, 0.0], np.float32)  # 1e-3 on a tiny element is fine
    assert diff(near, ref, rtol=1e-4, atol=0.0).ok
    far = ref + np.array([0.0, 0.2, 0.0], np.float32)
    d = diff(far, ref, rtol=1e-4, atol=0.0)
    assert not d.ok and d.worst_index == (1,) and d.tolerance == pytest.approx(0.1)


def test_diff_shapes_nans_and_integers() -> None:
    a = np.zeros((2, 3), np.float32)
    assert diff(a, np.zeros((3, 2), np.float32), 1e-4, 1e-5).reason == "shape"
    nan = np.array([np.nan, 1.0])
    assert diff(nan, nan.copy(), 1e-4, 1e-5).ok  # NaN where the reference has NaN
    d = diff(np.array([1.0, 1.0]), nan, 1e-4, 1e-5)
    assert not d.ok and d.reason == "nan" and d.worst_index == (0,)
    ints = np.array([1, 2, 3], np.int64)
    assert not diff(ints + np.array([0, 0, 1]), ints, 1.0, 1.0).ok  # integers: exact
    assert diff(np.float32(2.0), np.float32(2.0), 0, 0).ok  # 0-d
