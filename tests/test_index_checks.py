"""Out-of-range indices fail the run on every target, naming the node, as in ONNX Runtime.

Each indexing op (Gather, GatherElements, GatherND, ScatterElements, ScatterND) is built
with run-time indices and compiled once per target: indices in range (negative ones
included) match ONNX Runtime; one index out of range makes the run raise InputError
naming the node, the input and the allowed range, where ONNX Runtime raises too; the same
module then runs good indices again. Built with ``index_checks=False`` the run returns
(gathers clamp such an index). The C ABI reports the same message through
tsm_last_error (tests/test_c_example.py's program).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from model_testing import device_of
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.ir.errors import ModelError
from tensorsmith.runtime.errors import InputError

TARGETS = [
    "llvm",
    pytest.param("vulkan", marks=pytest.mark.vulkan),
    pytest.param("opencl", marks=pytest.mark.opencl),
]


@dataclass(frozen=True)
class IndexCase:
    op: str
    attrs: dict
    data_shape: tuple[int, ...]
    good: np.ndarray  # indices in range, negative ones included
    bad: np.ndarray  # the same with one index out of range
    updates_shape: tuple[int, ...] | None = None  # the Scatters
    allowed: str = ""  # the range the message names

    @property
    def id(self) -> str:
        return self.op


CASES = [
    IndexCase("Gather", {"axis": 0}, (10, 4), np.array([1, -2, 9]), np.array([1, 10, 3]),
              allowed="[-10, 9] for axis 0"),
    IndexCase("GatherElements", {"axis": 1}, (3, 5), np.array([[0, 4], [-5, 2], [1, 1]]),
              np.array([[0, 4], [-6, 2], [1, 1]]), allowed="[-5, 4] for axis 1"),
    IndexCase("GatherND", {}, (4, 3, 2), np.array([[0, 2], [-1, -3]]),
              np.array([[0, 2], [3, 3]]), allowed="[-3, 2] for axis 1"),
    IndexCase("ScatterElements", {"axis": 0}, (6, 3), np.array([[5, 0, -6]]),
              np.array([[5, 0, 6]]), updates_shape=(1, 3), allowed="[-6, 5] for axis 0"),
    IndexCase("ScatterND", {}, (5, 4), np.array([[4], [-5]]), np.array([[4], [-6]]),
              updates_shape=(2, 4), allowed="[-5, 4] for axis 0"),
]


def model(case: IndexCase) -> onnx.ModelProto:
    data = np.arange(np.prod(case.data_shape), dtype=np.float32).reshape(case.data_shape)
    inputs = [helper.make_tensor_value_info("idx", TensorProto.INT64, list(case.good.shape))]
    names = ["data", "idx"]
    if case.updates_shape is not None:
        inputs.append(helper.make_tensor_value_info("upd", TensorProto.FLOAT,
                                                    list(case.updates_shape)))
        names.append("upd")
    node = helper.make_node(case.op, names, ["y"], name="pick", **case.attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(data, "data")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def feeds(case: IndexCase, indices: np.ndarray) -> dict[str, np.ndarray]:
    out = {"idx": indices.astype(np.int64)}
    if case.updates_shape is not None:
        out["upd"] = np.full(case.updates_shape, -1.0, np.float32)
    return out


def compile_case(case: IndexCase, target: str, path: Path, **options: bool) -> rt.GraphModule:
    mod, params = from_onnx(model(case))
    build(mod, target=target, params=params, **options).export_library(path)
    return rt.load(path, device=device_of(target))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_out_of_range_index_fails_the_run(case: IndexCase, target: str, tmp_path: Path) -> None:
    session = ort.InferenceSession(model(case).SerializeToString())
    with pytest.raises(Exception):  # noqa: B017  (ONNX Runtime refuses it too)
        session.run(None, feeds(case, case.bad))
    module = compile_case(case, target, tmp_path / "m.so")
    want = session.run(None, feeds(case, case.good))[0]
    np.testing.assert_array_equal(module.run(feeds(case, case.good))[0], want)

    with pytest.raises(InputError) as caught:
        module.run(feeds(case, case.bad))
    message = str(caught.value)
    assert "node 'pick'" in message and "'idx'" in message and case.allowed in message
    assert "--no-index-checks" in message
    # the module is still usable, and a failed run left no outputs behind as an answer
    np.testing.assert_array_equal(module.run(feeds(case, case.good))[0], want)


@pytest.mark.parametrize(("case", "extent"), [(CASES[0], 10), (CASES[1], 5)],
                         ids=lambda c: getattr(c, "id", ""))
def test_without_index_checks_gathers_clamp(case: IndexCase, extent: int,
                                            tmp_path: Path) -> None:
    module = compile_case(case, "llvm", tmp_path / "m.so", index_checks=False)
    got = module.run(feeds(case, case.bad))[0]
    clamped = np.clip(case.bad, -extent, extent - 1)
    want = ort.InferenceSession(model(case).SerializeToString()).run(
        None, feeds(case, clamped))[0]
    np.testing.assert_array_equal(got, want)


def test_constant_indices_out_of_range_fail_the_import() -> None:
    data = numpy_helper.from_array(np.zeros((4, 2), np.float32), "data")
    idx = numpy_helper.from_array(np.array([0, 4], np.int64), "idx")
    node = helper.make_node("Gather", ["x", "idx"], ["y"], name="pick")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [data, idx])
    with pytest.raises(ModelError, match=r"node 'pick' \(Gather.*out of range for axis 0"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_c_abi_reports_the_failed_check(c_example: Path, tmp_path: Path) -> None:
    """tsm_model_run fails with the check's message; the example prints tsm_last_error."""
    case = CASES[0]
    artifact = tmp_path / "gather.so"
    compile_case(case, "llvm", artifact)
    bad = tmp_path / "idx.bin"
    case.bad.astype(np.int64).tofile(bad)
    proc = subprocess.run([str(c_example), str(artifact), str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "tsm_model_run: node 'pick' (gather)" in proc.stderr and "[-10, 9]" in proc.stderr
