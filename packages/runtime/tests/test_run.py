"""Loading a CPU artifact and running it through the Python API."""

from __future__ import annotations

import numpy as np
import pytest

import tensorsmith.runtime as rt


def test_run_matches_numpy(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    outs = m.run(inputs)
    expected = model_artifact.reference(inputs["x"], 3)
    assert len(outs) == 2
    np.testing.assert_allclose(outs[0], expected[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs[1], expected[1], rtol=1e-6)
    assert outs[0].dtype == np.float32 and outs[0].shape == (1, 1000)
    assert outs[1].dtype == np.float64 and outs[1].shape == (1,)


def test_set_input_run_get_output(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path, device="cpu")
    m.set_input("x", inputs["x"])
    m.set_input(1, inputs["s"])
    m.run()
    y = m.get_output(0)
    assert np.array_equal(m.get_output("y"), y)
    np.testing.assert_allclose(y, model_artifact.reference(inputs["x"], 3)[0], rtol=1e-6)
    # Inputs keep their values across runs: change only s.
    m.set_input("s", np.array(-2, np.int64))
    m.run()
    np.testing.assert_allclose(m.get_output("y"), model_artifact.reference(inputs["x"], -2)[0])


def test_outputs_are_fresh_arrays(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    first = m.run(inputs)[0]
    kept = first.copy()
    m.run({"s": np.array(5, np.int64)})
    assert np.array_equal(first, kept)
    assert m.get_output(0) is not m.get_output(0)


def test_get_output_into_out(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    m.run(inputs)
    out = np.empty((1, 1000), np.float32)
    assert m.get_output("y", out=out) is out
    assert np.array_equal(out, m.get_output("y"))


def test_call_by_name_and_position(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    by_name = m(x=inputs["x"], s=inputs["s"])
    by_position = m(inputs["x"], inputs["s"])
    assert all(np.array_equal(a, b) for a, b in zip(by_name, by_position, strict=True))


def test_onnx_runtime_call_form(model_artifact, inputs) -> None:
    """``run(output_names, input_feed)`` as ONNX Runtime takes it: None for every output,
    or names picking outputs in their order; a bad name or form is an InputError."""
    with rt.load(model_artifact.path) as m:
        y, total = m.run(inputs)
        got = m.run(None, inputs)
        np.testing.assert_array_equal(got[0], y)
        np.testing.assert_array_equal(got[1], total)
        (only,) = m.run(["total"], inputs)
        np.testing.assert_array_equal(only, total)
        assert [a.shape for a in m.run(["total", "y"], inputs)] == [total.shape, y.shape]
        with pytest.raises(rt.InputError, match="'nope'"):
            m.run(["nope"], inputs)
        with pytest.raises(rt.InputError, match="output_names must be None or a list"):
            m.run("total", inputs)
        with pytest.raises(rt.InputError, match="ONNX Runtime's form"):
            m.run([inputs["x"], inputs["s"]])


def test_python_scalars_and_lists_are_converted(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    x_list = inputs["x"].tolist()
    outs = m.run({"x": x_list, "s": 2})
    np.testing.assert_allclose(outs[0], model_artifact.reference(inputs["x"], 2)[0], rtol=1e-6)


def test_non_contiguous_input(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    wide = np.zeros((1, 2000), np.float32)
    wide[:, ::2] = inputs["x"]
    outs = m.run({"x": wide[:, ::2], "s": inputs["s"]})
    np.testing.assert_allclose(outs[0], model_artifact.reference(inputs["x"], 3)[0], rtol=1e-6)


def test_info_and_metadata(model_artifact) -> None:
    m = rt.load(model_artifact.path)
    assert m.input_info == [
        {"name": "x", "shape": (1, 1000), "dtype": "float32"},
        {"name": "s", "shape": (), "dtype": "int64"},
    ]
    assert m.output_info == [
        {"name": "y", "shape": (1, 1000), "dtype": "float32"},
        {"name": "total", "shape": (1,), "dtype": "float64"},
    ]
    assert m.metadata["target"] == "llvm"
    assert m.metadata["workspace_bytes"] == 12224
    assert len(m.metadata["checksum"]) == 64
    assert "x: float32[1, 1000]" in repr(m)


def test_thread_counts_give_the_same_result(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path, num_threads=1)
    reference = m.run(inputs)[0]
    for n in (2, 3, 7, 64, 0):
        m.set_num_threads(n)
        assert np.array_equal(m.run()[0], reference), n
    with pytest.raises(ValueError, match="thread count"):
        m.set_num_threads(-1)


def test_profile_one_entry_per_step(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    report = m.profile(inputs, repeat=5)
    assert [e["name"] for e in report] == ["affine", "relu_scale", "reduce_sum"]
    for entry in report:
        assert entry["calls"] == 5
        assert entry["total_ms"] >= 0 and entry["mean_ms"] == entry["total_ms"] / 5
    assert len(report.run_ms) == 5 and all(t > 0 for t in report.run_ms)
    assert sum(e["percent"] for e in report) == pytest.approx(100.0)
    assert "relu_scale" in report.table()
    # Profiling leaves outputs like a run does.
    np.testing.assert_allclose(m.get_output(0), model_artifact.reference(inputs["x"], 3)[0])


def test_profile_uses_inputs_set_before(model_artifact, inputs) -> None:
    m = rt.load(model_artifact.path)
    m.set_input("x", inputs["x"])
    m.set_input("s", inputs["s"])
    assert len(m.profile(repeat=1)) == 3


def test_close_and_context_manager(model_artifact, inputs) -> None:
    with rt.load(model_artifact.path) as m:
        m.run(inputs)
    m.close()  # twice is harmless


def test_device_aliases(model_artifact) -> None:
    assert str(rt.load(model_artifact.path, device="cpu:0").device) == "cpu"
    assert str(rt.load(model_artifact.path, device=" CPU ").device) == "cpu"



class _DLPackOnly:
    """A foreign array that offers nothing but the DLPack protocol (like a torch tensor)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, **kwargs: object) -> object:
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()


def test_inputs_through_dlpack_and_outputs_export_it(model_artifact, inputs) -> None:  # noqa: ANN001
    m = rt.load(model_artifact.path)
    want = m.run(inputs)
    got = m.run({"x": _DLPackOnly(inputs["x"]), "s": inputs["s"]})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        view = np.from_dlpack(g)  # outputs are plain arrays: consumers take them zero-copy
        assert np.shares_memory(view, g)
