"""The ONNX backend API (tensorsmith.frontend.onnx.backend) and the isolation of the
conformance runner: the pieces test_backend_llvm.py relies on, tested on tiny models."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import make_model
from onnx import helper
from onnx_conformance.pool import CaseRunner, run_isolated
from onnx_conformance.scope import exclusion

from tensorsmith.frontend.onnx.backend import TensorsmithBackend, prepare, supports_device

FAKES = "conformance_fakes"


def test_supports_cpu_only() -> None:
    assert supports_device("CPU")
    assert not supports_device("CUDA")


def test_scalar_inputs_arrive_as_numpy_scalars() -> None:
    """onnx.backend.test feeds 0-d inputs as np.float32(...), not 0-d arrays."""
    node = helper.make_node("Add", ["a", "b"], ["c"])
    m = make_model([node], {"a": ("float32", []), "b": ("float32", [])}, ["c"])
    (c,) = prepare(m).run([np.float32(1.5), np.float32(2.0)])
    assert c.shape == () and c.dtype == np.float32 and float(c) == 3.5


def test_inputs_by_name() -> None:
    node = helper.make_node("Sub", ["a", "b"], ["c"])
    m = make_model([node], {"a": ("float32", [2]), "b": ("float32", [2])}, ["c"])
    (c,) = prepare(m).run({"b": np.ones(2, np.float32), "a": np.full(2, 3, np.float32)})
    np.testing.assert_array_equal(c, [2, 2])


def test_shape_operand_given_as_input_compiles_once() -> None:
    """A Reshape whose shape is a graph input compiles once: the sizes are computed from
    the shape's values before each run."""
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    m = make_model([node], {"x": ("float32", [2, 3]), "s": ("int64", [2])}, ["y"])
    rep = TensorsmithBackend.prepare(m, "CPU")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2])])
    assert rep.frozen_inputs == ()
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = rep.run([x, np.array([1, -1])])
    np.testing.assert_array_equal(y, x.reshape(1, 6))


def test_shape_operand_given_as_input_specializes_at_run() -> None:
    """Where sizes computed at run time cannot serve (they are at least 1, and this input
    is empty), a Reshape whose shape is a graph input compiles at run time for that
    shape, and again for another one."""
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)
    m = make_model([node], {"x": ("float32", [0, 3]), "s": ("int64", [2])}, ["y"])
    rep = TensorsmithBackend.prepare(m, "CPU")
    x = np.zeros((0, 3), dtype=np.float32)
    (y,) = rep.run([x, np.array([3, 0])])
    assert rep.frozen_inputs == ("s",)
    assert y.shape == (3, 0)
    (y,) = rep.run([x, np.array([0, 3])])
    assert y.shape == (0, 3)


def test_run_node_is_refused() -> None:
    with pytest.raises(NotImplementedError):
        TensorsmithBackend.run_node(helper.make_node("Relu", ["x"], ["y"]), [np.ones(1)])


def test_crash_and_hang_fail_one_case_each() -> None:
    backend = f"{FAKES}:CrashingBackend"
    outcomes = run_isolated(["test_crash", "test_ok", "test_hang", "test_ok"], backend,
                            jobs=1, timeout=5.0, cases_spec=f"{FAKES}:load_cases")
    assert outcomes["test_crash"].reason.startswith("crash: the worker died (signal SIGSEGV)")
    assert outcomes["test_hang"].reason.startswith("timeout")
    assert outcomes["test_ok"].passed


def test_runner_survives_a_crash() -> None:
    runner = CaseRunner(f"{FAKES}:CrashingBackend", f"{FAKES}:load_cases")
    runner.start()
    try:
        assert not runner.run("test_crash", timeout=30).passed
        assert runner.run("test_ok", timeout=30).passed
    finally:
        runner.close()


def test_scope_reasons() -> None:
    from onnx import TensorProto
    from onnx_conformance.cases import NodeCase

    def case(model: onnx.ModelProto) -> NodeCase:
        return NodeCase("t", "X", False, model, (), (), 1e-3, 1e-7)

    relu = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ("float32", [2])}, ["y"])
    assert exclusion(case(relu)) is None
    bf16 = onnx.ModelProto()
    bf16.CopyFrom(relu)
    bf16.graph.input[0].type.tensor_type.elem_type = TensorProto.BFLOAT16
    assert exclusion(case(bf16)) == "float8/bfloat16"
    seq = helper.make_model(helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x"], ["s"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)]))
    assert exclusion(case(seq)) == "sequence/optional/map"
