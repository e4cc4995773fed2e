"""Every way loading or running a real artifact can go wrong says what and what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import ArtifactError, DeviceError, InputError, TensorsmithError
from tensorsmith.runtime.artifact import PARAMS_ALIGN, PARAMS_ID_BYTES, write_artifact


@pytest.fixture
def model(model_artifact) -> rt.GraphModule:
    return rt.load(model_artifact.path)


def test_unknown_input_name_lists_valid_names(model, inputs) -> None:
    with pytest.raises(InputError, match=r"no input 'input'; its inputs are: 'x', 's'"):
        model.run({"input": inputs["x"]})
    with pytest.raises(InputError, match="no input 'z'"):
        model.set_input("z", 1)
    with pytest.raises(InputError, match="no input 'z'"):
        model(z=1)


def test_wrong_dtype_is_not_cast(model, inputs) -> None:
    with pytest.raises(
        InputError, match=r"input 'x' has dtype float64 but the model expects float32"
    ):
        model.run({"x": inputs["x"].astype(np.float64), "s": inputs["s"]})
    with pytest.raises(InputError, match="input 's' has dtype int32 but the model expects int64"):
        model.set_input("s", np.array(3, np.int32))
    with pytest.raises(InputError, match="dtype float64"):
        model.set_input("s", np.float64(3))  # NumPy scalars have a dtype: no cast either


def test_python_floats_for_an_integer_input_are_refused(model) -> None:
    with pytest.raises(InputError, match="input 's' takes int64 and got floating-point values"):
        model.set_input("s", 2.5)


def test_wrong_shape_says_expected_and_actual(model) -> None:
    with pytest.raises(
        InputError, match=r"input 'x' has shape \(1, 3\) but the model expects \(1, 1000\)"
    ):
        model.set_input("x", np.zeros((1, 3), np.float32))
    with pytest.raises(InputError, match=r"input 's' has shape \(1,\) but the model expects \(\)"):
        model.set_input("s", [3])


def test_missing_input_is_named(model, inputs) -> None:
    with pytest.raises(InputError, match=r"input 's' never set; pass it to run\(\{'s': \.\.\.\}\)"):
        model.run({"x": inputs["x"]})
    fresh = rt.load(model.artifact.path)
    with pytest.raises(InputError, match="inputs 'x', 's' never set"):
        fresh.run()


def test_a_bad_input_changes_nothing(model, inputs) -> None:
    with pytest.raises(InputError):
        model.run({"x": inputs["x"], "s": np.zeros(2)})
    with pytest.raises(InputError, match="'x', 's' never set"):
        model.run()  # x was not set either: inputs are checked before any is set


def test_output_before_run_and_bad_output_keys(model, inputs) -> None:
    with pytest.raises(InputError, match=r"output 'y' has no value yet; call run\(\) first"):
        model.get_output(0)
    model.run(inputs)
    with pytest.raises(InputError, match="no output 'out'; its outputs are: 'y', 'total'"):
        model.get_output("out")
    with pytest.raises(InputError, match="output index 2 is out of range: the model has 2"):
        model.get_output(2)
    with pytest.raises(InputError, match="must be a writeable C-contiguous float32 array"):
        model.get_output(0, out=np.empty((1, 1000), np.float64))


def test_too_many_positional_inputs(model, inputs) -> None:
    with pytest.raises(InputError, match="takes 2 inputs and got 3 positional"):
        model(inputs["x"], inputs["s"], 1)
    with pytest.raises(InputError, match="'x' was given both by position and by name"):
        model(inputs["x"], x=inputs["x"])


def test_devices(model_artifact) -> None:
    with pytest.raises(DeviceError, match="compiled for target 'llvm', and device 'vulkan'"):
        rt.load(model_artifact.path, device="vulkan")
    with pytest.raises(DeviceError, match="compiled for target 'llvm', and device 'opencl:1'"):
        rt.load(model_artifact.path, device="opencl:1")
    with pytest.raises(DeviceError, match=r"compiled for target 'llvm', and device 'vulkan'.*"
                       r"load it with device='cpu'"):
        rt.load(model_artifact.path, device="vulkan:0")
    with pytest.raises(DeviceError, match="unknown device 'tpu'; use one of 'cpu', 'vulkan'"):
        rt.load(model_artifact.path, device="tpu")
    with pytest.raises(DeviceError, match="device 'cpu:1' does not exist"):
        rt.load(model_artifact.path, device="cpu:1")
    with pytest.raises(DeviceError, match="bad index"):
        rt.load(model_artifact.path, device="cpu:x")


def test_gpu_artifact_on_cpu_names_target_and_device(tmp_path: Path, model_artifact) -> None:
    path = tmp_path / "gpu.tsm"
    write_artifact(path, b"", {"spirv": b"\x03\x02\x23\x07"}, {"target": "vulkan"})
    with pytest.raises(
        DeviceError, match=r"compiled for target 'vulkan'.*load it with device='vulkan'"
    ):
        rt.load(path, device="cpu")


def test_artifact_errors_at_load(tmp_path: Path, model_artifact) -> None:
    text = tmp_path / "model.txt"
    text.write_text("not a model\n")
    with pytest.raises(ArtifactError, match="not a tensorsmith artifact"):
        rt.load(text)

    data = model_artifact.path.read_bytes()
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(data[: len(data) - 100])
    with pytest.raises(ArtifactError, match="not a tensorsmith artifact"):
        rt.load(truncated)

    flipped = tmp_path / "flipped.so"
    damaged = bytearray(data)
    damaged[len(data) // 3] ^= 0x40
    flipped.write_bytes(bytes(damaged))
    with pytest.raises(ArtifactError, match="is damaged: its contents do not match its checksum"):
        rt.load(flipped)


def test_a_plain_shared_library_is_not_an_artifact(model_artifact) -> None:
    with pytest.raises(ArtifactError, match="not a tensorsmith artifact"):
        rt.load(model_artifact.library)


def test_library_that_is_no_cpu_library(tmp_path: Path) -> None:
    path = tmp_path / "fake.so"
    write_artifact(path, b"\x7fELF but not really", {}, {"target": "llvm"})
    with pytest.raises(ArtifactError, match=r"cannot load artifact .* as a shared library"):
        rt.load(path)


def test_metadata_that_contradicts_the_library(tmp_path: Path, model_artifact) -> None:
    metadata = dict(model_artifact.metadata)
    wrong_x = {"name": "x", "shape": [1, 999], "dtype": "float32"}
    metadata["inputs"] = [wrong_x, *metadata["inputs"][1:]]
    path = tmp_path / "inconsistent.so"
    write_artifact(path, model_artifact.library.read_bytes(), model_artifact.sections, metadata,
                   align={"params": PARAMS_ALIGN})
    with pytest.raises(ArtifactError, match="is inconsistent: its metadata describes input 0"):
        rt.load(path)


@pytest.mark.parametrize("weights", ["none", "another build's"])
def test_library_without_its_weights(tmp_path: Path, model_artifact, weights: str) -> None:
    sections = {}
    if weights != "none":  # the same weights, under another build's id
        sections = {**model_artifact.sections, "params.id": bytes(PARAMS_ID_BYTES)}
    path = tmp_path / "weightless.so"
    write_artifact(path, model_artifact.library.read_bytes(), sections, model_artifact.metadata,
                   align={"params": PARAMS_ALIGN})
    with pytest.raises(ArtifactError, match=r"does not end with this library's weights .* copy "
                       r"the whole artifact again, or re-export it"):
        rt.load(path)


def test_every_error_is_a_tensorsmith_error() -> None:
    for cls in (ArtifactError, InputError, DeviceError):
        assert issubclass(cls, TensorsmithError)


def test_relative_path_loads_from_the_working_directory(
    tmp_path: Path, model_artifact, inputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(model_artifact.path, tmp_path / "relative.so")
    monkeypatch.chdir(tmp_path)  # a bare name must not send dlopen searching the library path
    assert rt.load("relative.so").run(inputs)[0].shape == (1, 1000)
