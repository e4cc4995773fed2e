"""Dynamic shapes in the CPU runtime, on a hand-written plan with symbols (csrc/dynamic_plan.c:
inputs x[batch, 3], m[batch, seq], bias[seq + 1], scale[]; outputs r[batch], p[seq + 1]):
the plan's new fields, binding the symbols from the inputs' shapes and refusing inputs that
disagree, placing the buffers again as the sizes grow and shrink, the outputs' shapes, the
size limits, and the same through the C ABI alone. Static plans keep their behaviour
(test_c_abi.py and the rest); here only what a static model says to a shape."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import ArtifactError, InputError
from tensorsmith.runtime.plan import Buffer, Plan, Tensor


def feeds(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 3), np.float32),
            "m": rng.standard_normal((batch, seq), np.float32),
            "bias": rng.standard_normal(seq + 1, np.float32),
            "scale": np.array(0.5, np.float32)}


def check_run(module: rt.GraphModule, dynamic_artifact, batch: int, seq: int) -> None:  # noqa: ANN001
    given = feeds(batch, seq, seed=batch * 1000 + seq)
    got = module.run(given)
    for g, w in zip(got, dynamic_artifact.reference(**given), strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_the_plan_fields_read_and_write_back(dynamic_artifact) -> None:  # noqa: ANN001
    plan = Plan.from_json(dynamic_artifact.metadata)
    assert plan.symbols == ("batch", "seq") and plan.is_symbolic
    assert plan.to_json() == {**dynamic_artifact.metadata, "checks": []}
    assert plan.inputs[2] == Tensor("bias", ("seq + 1",), "float32", 2)
    assert plan.inputs[2].is_symbolic
    assert not plan.inputs[3].is_symbolic
    assert plan.buffers[6] == Buffer("workspace", 0, 0, symbolic_nbytes="12*batch",
                                     first_step=0, last_step=1)
    assert plan.buffers[5].symbols == ("batch", "seq") and not plan.buffers[5].is_symbolic
    static = Plan.from_json({"inputs": [{"name": "x", "shape": [2], "dtype": "float32"}]})
    assert not static.is_symbolic and "symbols" not in static.to_json()


@pytest.mark.parametrize("change, message", [
    ({"symbols": "batch"}, r"symbols should be a list of strings"),
    ({"inputs": [{"name": "x", "shape": ["batch", -1], "dtype": "float32"}]},
     r"inputs\[0\]\.shape should be a list of integers >= 0 and size expressions"),
    ({"inputs": [{"name": "x", "shape": [""], "dtype": "float32"}]}, r"inputs\[0\]\.shape"),
    ({"buffers": [{"kind": "workspace", "offset": 0, "nbytes": 0, "symbolic_nbytes": 8}]},
     r"buffers\[0\]\.symbolic_nbytes should be a string"),
    ({"buffers": [{"kind": "workspace", "offset": 0, "nbytes": 8, "symbols": [0]}]},
     r"buffers\[0\]\.symbols should be a list of strings"),
])
def test_a_malformed_symbolic_field_is_named(dynamic_artifact, change: dict,  # noqa: ANN001
                                             message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        Plan.from_json({**dynamic_artifact.metadata, **change})


def test_runs_as_the_sizes_grow_shrink_and_repeat(dynamic_artifact) -> None:  # noqa: ANN001
    with rt.load(dynamic_artifact.path) as module:
        for batch, seq in [(1, 1), (2, 3), (2, 3), (8, 50), (3, 2), (3, 60), (40, 2), (1, 1),
                           (64, 200), (5, 5)]:
            check_run(module, dynamic_artifact, batch, seq)


def test_the_shapes_it_describes(dynamic_artifact) -> None:  # noqa: ANN001
    with rt.load(dynamic_artifact.path) as module:
        assert [i["shape"] for i in module.input_info] == [("batch", 3), ("batch", "seq"),
                                                          ("seq + 1",), ()]
        assert [o["shape"] for o in module.output_info] == [("batch",), ("seq + 1",)]
        assert "x: float32[batch, 3]" in repr(module) and "p: float32[seq + 1]" in repr(module)
        module.run(feeds(4, 6))
        assert module.get_output("p").shape == (7,)
        out = np.empty(4, np.float32)
        assert module.get_output("r", out=out) is out
        with pytest.raises(InputError, match=r"array of shape \(4,\)"):
            module.get_output("r", out=np.empty(3, np.float32))
        # a new shape: the last run's outputs are gone until the next run
        module.set_input("x", np.zeros((5, 3), np.float32))
        with pytest.raises(InputError, match="has no value yet"):
            module.get_output("r")


def test_inputs_that_disagree_are_refused_naming_input_axis_and_source(  # noqa: ANN001
        dynamic_artifact) -> None:
    with rt.load(dynamic_artifact.path) as module:
        bad = feeds(2, 9)
        bad["m"] = bad["m"][:1]
        with pytest.raises(InputError, match=r"tsm_model_run: input 'm' axis 0 is 1, but 'batch' "
                                             r"is 2 from input 'x' axis 0$"):
            module.run(bad)
        bad = feeds(2, 9)
        bad["bias"] = np.zeros(7, np.float32)
        with pytest.raises(InputError, match=r"input 'bias' axis 0 is 7, but it must be seq \+ 1 "
                                             r"= 10, where 'seq' is 9 from input 'm' axis 1$"):
            module.run(bad)
        check_run(module, dynamic_artifact, 2, 9)  # still usable


def test_rank_and_fixed_axes_are_checked_before_any_input_is_set(  # noqa: ANN001
        dynamic_artifact) -> None:
    with rt.load(dynamic_artifact.path) as module:
        check_run(module, dynamic_artifact, 2, 4)
        bad = feeds(3, 4)
        bad["x"] = np.zeros((3, 4), np.float32)
        with pytest.raises(InputError, match=r"input 'x' has shape \(3, 4\) but the model "
                                             r"expects \[batch, 3\]"):
            module.run(bad)
        with pytest.raises(InputError, match=r"input 'bias' has shape \(2, 2\)"):
            module.run({"bias": np.zeros((2, 2), np.float32)})
        assert module.get_output("r").shape == (2,)  # nothing was set: the last run stands
        with pytest.raises(InputError, match="axis 0 is 0, but it is the size 'batch', which "
                                             "is at least 1"):
            module.set_input("x", np.zeros((0, 3), np.float32))


def test_sizes_over_the_limit_or_past_int64_are_refused(dynamic_artifact) -> None:  # noqa: ANN001
    """Buffer 9 takes max(2**60 * (seq // 1000), 4) bytes."""
    with rt.load(dynamic_artifact.path) as module:
        with pytest.raises(InputError, match=r"with batch = 1, seq = 1000, buffer 9 of the model "
                                             r"would take 1152921504606846976 bytes .* over the "
                                             r"limit of 2\*\*48 bytes"):
            module.run(feeds(1, 1000))
        with pytest.raises(InputError, match=r"with batch = 1, seq = 8000, the model's sizes do "
                                             r"not fit in 64 bits"):
            module.run(feeds(1, 8000))
        check_run(module, dynamic_artifact, 3, 999)


def test_c_program_runs_dynamic_shapes_without_python(toolchain, dynamic_artifact,  # noqa: ANN001
                                                      tmp_path: Path) -> None:
    program = tmp_path / "run_dynamic"
    toolchain.compile(["-O2", "-std=c11", *toolchain.warnings, f"-I{toolchain.include}",
                       toolchain.test_csrc / "run_dynamic.c", dynamic_artifact.path, "-lm",
                       "-o", program], tmp_path)
    shapes = ["1,1", "2,3", "8,50", "3,2", "100,7", "1,1", "errors", "5,5", "300,2", "1,300"]
    result = subprocess.run([str(program), *shapes], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "first m 1 1 p 2"  # every symbol 1 until the shapes are set
    assert [line for line in lines if line.startswith("run")] == [
        f"run {s.replace(',', ' ')} ok" for s in shapes if s != "errors"]
    errors = [line.removeprefix("error ") for line in lines if line.startswith("error")]
    assert errors == [
        "tsm_model_set_input_shape: input 'x' axis 1 is 4, but the model takes 3",
        "tsm_model_set_input_shape: input 'x' axis 0 is 0, but it is the size 'batch', which is "
        "at least 1",
        "tsm_model_set_input_shape: input 'x' has 2 axes, got a shape of 1",
        "tsm_model_set_input_shape: input 'm' of that shape would take more than 2**48 bytes "
        "(256 TiB)",
        "tsm_model_set_input_shape: input 'scale' has 0 axes, got a shape of 1",
        "tsm_model_set_input: input 'x' (index 0) takes 24 bytes, got 16 (in the shape it has "
        "now; set another with tsm_model_set_input_shape first)",
        "tsm_model_run: input 'x' (index 0) was never set in the shape it has now; call "
        "tsm_model_set_input first",
        "tsm_model_run: input 'm' axis 0 is 3, but 'batch' is 2 from input 'x' axis 0",
        "tsm_model_run: input 'bias' axis 0 is 6, but it must be seq + 1 = 5, where 'seq' is 4 "
        "from input 'm' axis 1",
        "tsm_model_get_output: output 'r' has no value yet; call tsm_model_run first",
    ]


def test_a_static_model_takes_its_own_shape_only(model_artifact) -> None:  # noqa: ANN001
    lib = ctypes.CDLL(str(model_artifact.path))
    lib.tsm_model_create.restype = ctypes.c_void_p
    lib.tsm_model_destroy.argtypes = [ctypes.c_void_p]
    lib.tsm_last_error.restype = ctypes.c_char_p
    lib.tsm_model_set_input_shape.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                              ctypes.c_void_p]
    model = lib.tsm_model_create()
    try:
        same, other = (ctypes.c_int64 * 2)(1, 1000), (ctypes.c_int64 * 2)(2, 1000)
        assert lib.tsm_model_set_input_shape(model, 0, 2, same) == 0
        assert lib.tsm_model_set_input_shape(model, 0, 2, other) != 0
        assert lib.tsm_last_error() == (b"tsm_model_set_input_shape: input 'x' axis 0 is 2, but "
                                        b"the model takes 1")
        assert lib.tsm_model_set_input_shape(model, 1, 0, None) == 0
    finally:
        lib.tsm_model_destroy(model)
