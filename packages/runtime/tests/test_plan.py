"""The execution plan type: read from metadata and written back unchanged, older plans
(no device, no checks, CPU plans without buffers on their inputs) still read, and the
device an artifact runs on taken from its plan, whatever its target is called."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import ArtifactError, DeviceError
from tensorsmith.runtime.artifact import PARAMS_ALIGN, write_artifact
from tensorsmith.runtime.plan import Buffer, Check, Kernel, Plan, Step, Tensor

#: A plan as build writes it: every field there.
FULL = {
    "target": "llvm -mcpu=x86-64-v3",
    "device": "cpu",
    "inputs": [{"name": "x", "shape": [2, 3], "dtype": "float32", "buffer": 2}],
    "outputs": [{"name": "y", "shape": [2, 3], "dtype": "float32", "buffer": 3}],
    "checks": [{"buffer": 4, "message": "node 'g' (gather): an index is out of range"}],
    "kernels": [{"name": "tsm_kernel_0", "ops": ["gather"], "nodes": ["g"]}],
    "steps": [{"kernel": "tsm_kernel_0", "name": "fused_gather#12ab", "args": [2, 0, 3, 4],
               "nodes": ["g"]}],
    "buffers": [{"kind": "param", "offset": 0, "nbytes": 24, "name": "w"},
                {"kind": "param", "offset": 64, "nbytes": 8, "name": "b"},
                {"kind": "workspace", "offset": 0, "nbytes": 24},
                {"kind": "workspace", "offset": 64, "nbytes": 24},
                {"kind": "workspace", "offset": 128, "nbytes": 4}],
    "workspace_bytes": 192,
    "params_bytes": 72,
    "memory": {"planned_bytes": 192, "unplanned_bytes": 256},
    "producer": {"tensorsmith-ir": "0.1.0"},
}


def test_round_trip() -> None:
    plan = Plan.from_json({**FULL, "vulkan": {"version": 1}, "checksum": "ignored"})
    assert plan.to_json() == FULL and Plan.from_json(plan.to_json()) == plan
    assert plan.buffers[0] == Buffer("param", 0, 24, "w")
    assert plan.inputs[0] == Tensor("x", (2, 3), "float32", 2)
    assert plan.steps[0] == Step("tsm_kernel_0", (2, 0, 3, 4), "fused_gather#12ab", ("g",))
    assert plan.kernels[0] == Kernel("tsm_kernel_0", ("gather",), ("g",))
    assert plan.checks == (Check(4, FULL["checks"][0]["message"]),)
    assert (plan.target_kind, plan.runs_on) == ("llvm", "cpu")


def test_older_plans_still_read(model_artifact) -> None:  # noqa: ANN001
    """The runtime tests' hand-written CPU plan: no device, no checks, no step names or
    nodes, inputs without buffers (the library knows them)."""
    plan = Plan.from_json(model_artifact.metadata)
    assert plan.device is None and plan.runs_on == "cpu" and plan.checks == ()
    assert plan.inputs[0].buffer is None and plan.steps[0].label == "tsm_kernel_affine"
    assert "buffer" not in plan.to_json()["inputs"][0]
    assert Plan.from_json({"target": "vulkan"}).runs_on == "vulkan"
    assert Plan.from_json({"target": {"kind": "opencl"}}).runs_on == "opencl"
    assert Plan.from_json({"target": "toy"}).runs_on is None  # a target newer than plans
    assert Plan.from_json({"target": "toy", "device": "cpu"}).runs_on == "cpu"


@pytest.mark.parametrize("change, message", [
    ({"steps": [{"kernel": "k"}]}, r"steps\[0\]\.args is missing"),
    ({"inputs": [{"name": "x", "dtype": "float32"}]}, r"inputs\[0\]\.shape is missing"),
    ({"device": 3}, "device should be a string"),
    ({"checks": [{"buffer": -1, "message": "m"}]}, r"checks\[0\]\.buffer should be an int"),
    ({"kernels": "k"}, "kernels should be a list"),
])
def test_a_malformed_plan_names_the_field(change: dict, message: str) -> None:
    with pytest.raises(ArtifactError, match=rf"the plan has malformed metadata: {message}"):
        Plan.from_json({**FULL, **change})


def rewritten(model_artifact, tmp_path: Path, **changes: object) -> Path:  # noqa: ANN001
    """The runtime tests' CPU artifact with its metadata changed."""
    path = tmp_path / "model.so"
    write_artifact(path, model_artifact.library.read_bytes(), model_artifact.sections,
                   {**model_artifact.metadata, **changes}, align={"params": PARAMS_ALIGN})
    return path


def test_the_plan_says_which_device_runs_it(model_artifact, tmp_path: Path,  # noqa: ANN001
                                            inputs) -> None:  # noqa: ANN001
    """A CPU library of a target this runtime has never heard of loads on the CPU, because
    its plan says so; on another device the error names the one that runs it."""
    path = rewritten(model_artifact, tmp_path, target="toy -x=1", device="cpu")
    with rt.load(path) as module:
        got = module.run(inputs)
    for g, w in zip(got, model_artifact.reference(inputs["x"], int(inputs["s"])), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(DeviceError, match=r"compiled for target 'toy', and device 'vulkan' "
                                          r"does not run it \(it runs on device 'cpu'\); "
                                          r"load it with device='cpu'"):
        rt.load(path, device="vulkan")
    unknown = rewritten(model_artifact, tmp_path, target="toy")
    with pytest.raises(DeviceError, match=r"it runs on device 'unknown'\); recompile it"):
        rt.load(unknown, device="cpu")
    with pytest.raises(DeviceError, match=r"does not say which device runs it \(target 'toy'\)"):
        rt.load(unknown)  # no device given, and none the plan names
