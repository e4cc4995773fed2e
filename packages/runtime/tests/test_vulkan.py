"""The Vulkan executor, on artifacts built here with no compiler: two hand-written SPIR-V
modules (tests/vulkan/*.spvasm, assembled with spirv-as), a plan and weights.

The model is z = max(x * w + b, 0) * 3 over 1000 floats, in two steps. Runs on any
Vulkan 1.1 device; CI uses Mesa's lavapipe (mesa-vulkan-drivers) and spirv-tools.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import ArtifactError, DeviceError, InputError
from tensorsmith.runtime.artifact import write_artifact

pytestmark = pytest.mark.vulkan

SHADERS = Path(__file__).parent / "vulkan"
N = 1000


def assemble(name: str, out: Path, local_size: int = 64) -> bytes:
    """The test shader ``name``, with its workgroup of ``local_size`` invocations."""
    tool = shutil.which("spirv-as")
    assert tool, "spirv-as is needed to assemble the test shaders (apt-get install spirv-tools)"
    source = out / f"{name}_{local_size}.spvasm"
    source.write_text((SHADERS / f"{name}.spvasm").read_text().replace(
        "LocalSize 64 1 1", f"LocalSize {local_size} 1 1"))
    target = out / f"{name}_{local_size}.spv"
    subprocess.run([tool, "--target-env", "vulkan1.1", str(source), "-o", str(target)],
                   check=True)
    return target.read_bytes()


def dispatch(name: str, bindings: int) -> dict[str, Any]:
    return {"name": name, "section": f"spirv/{name}", "entry_point": name,
            "grid": [-(-N // 64), 1, 1], "workgroup_size": [64, 1, 1], "features": [],
            "bindings": [{"binding": i, "param": i, "access": "read"} for i in range(bindings)]}


def metadata(param_offsets: tuple[int, int] = (0, 4032),
             workspace_offsets: tuple[int, int, int] = (0, 4032, 8064)) -> dict[str, Any]:
    x, y, z = workspace_offsets
    return {
        "target": "vulkan",
        "producer": {"tensorsmith-runtime-tests": "0"},
        "inputs": [{"name": "x", "shape": [1, N], "dtype": "float32", "buffer": 0}],
        "outputs": [{"name": "z", "shape": [1, N], "dtype": "float32", "buffer": 4}],
        "kernels": [{"name": "affine", "ops": ["Mul", "Add"], "nodes": ["mul", "add"]},
                    {"name": "relu_scale", "ops": ["Relu", "Mul"], "nodes": ["relu", "s"]}],
        "steps": [{"kernel": "affine", "name": "affine", "args": [0, 1, 2, 3]},
                  {"kernel": "relu_scale", "name": "relu_scale", "args": [3, 4]}],
        "buffers": [{"kind": "workspace", "offset": x, "nbytes": 4 * N},
                    {"kind": "param", "offset": param_offsets[0], "nbytes": 4 * N},
                    {"kind": "param", "offset": param_offsets[1], "nbytes": 4 * N},
                    {"kind": "workspace", "offset": y, "nbytes": 4 * N},
                    {"kind": "workspace", "offset": z, "nbytes": 4 * N}],
        "workspace_bytes": z + 4 * N,
        "params_bytes": param_offsets[1] + 4 * N,
        "vulkan": {"version": 1, "spirv_version": "1.3", "vulkan_version": "1.1",
                   "features": [],
                   "kernels": [{"name": "affine", "dispatches": [dispatch("affine", 4)]},
                               {"name": "relu_scale", "dispatches": [dispatch("relu_scale", 2)]}]},
    }


class Model:
    """Builds variants of the test artifact and knows the expected output."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.spirv = {n: assemble(n, directory) for n in ("affine", "relu_scale")}
        rng = np.random.default_rng(0)
        self.w = rng.standard_normal(N).astype(np.float32)
        self.b = rng.standard_normal(N).astype(np.float32)

    def write(self, name: str, meta: dict[str, Any] | None = None,
              sections: dict[str, bytes] | None = None) -> Path:
        meta = meta or metadata()
        offsets = [b["offset"] for b in meta["buffers"] if b["kind"] == "param"]
        params = np.zeros(meta["params_bytes"], np.uint8)
        params[offsets[0]:offsets[0] + 4 * N] = self.w.view(np.uint8)
        params[offsets[1]:offsets[1] + 4 * N] = self.b.view(np.uint8)
        if sections is None:
            sections = {f"spirv/{n}": code for n, code in self.spirv.items()}
            sections["params"] = params.tobytes()
        path = self.dir / name
        write_artifact(path, b"", sections, meta)
        return path

    def expected(self, x: np.ndarray) -> np.ndarray:
        return (np.maximum(x * self.w + self.b, np.float32(0)) * np.float32(3)).astype("float32")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    return Model(tmp_path_factory.mktemp("vulkan"))


def x_input(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, N)).astype(np.float32)


@pytest.mark.parametrize("staging", ["0", "1"])
def test_runs_in_both_memory_modes(model: Model, staging: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSM_VULKAN_STAGING", staging)
    m = rt.load(model.write(f"m{staging}.tsm"), device="vulkan")
    assert m._executor.mode == ("staging" if staging == "1" else "direct")
    for seed in (1, 2):
        x = x_input(seed)
        (z,) = m.run({"x": x})
        np.testing.assert_allclose(z, model.expected(x), rtol=1e-6, atol=1e-6)
    m.close()


def test_plan_offsets_the_device_cannot_bind_are_repacked(model: Model) -> None:
    """Offsets that are not multiples of minStorageBufferOffsetAlignment (16+ everywhere)."""
    meta = metadata(param_offsets=(4, 4012), workspace_offsets=(4, 4012, 8020))
    m = rt.load(model.write("repacked.tsm", meta), device="vulkan")
    assert m._executor.layout.repacked
    x = x_input()
    np.testing.assert_allclose(m.run({"x": x})[0], model.expected(x), rtol=1e-6, atol=1e-6)


def test_stateful_interface_profile_and_close(model: Model) -> None:
    m = rt.load(model.write("state.tsm"), device="vulkan")
    x = x_input()
    with pytest.raises(InputError, match="never set"):
        m.run()
    m.set_input("x", x)
    m.run()
    out = np.empty((1, N), np.float32)
    m.get_output("z", out=out)
    np.testing.assert_allclose(out, model.expected(x), rtol=1e-6, atol=1e-6)
    report = m.profile(repeat=3)
    assert [e["name"] for e in report] == ["affine", "relu_scale"]
    assert all(e["calls"] == 3 and e["total_ms"] >= 0 for e in report)
    assert "affine" in report.table()
    m.close()
    with pytest.raises(rt.TensorsmithError, match="closed"):
        m.run()


def test_devices_are_listed_best_first_and_indices_checked(model: Model) -> None:
    from tensorsmith.runtime.vulkan import list_devices

    devices = list_devices()
    assert devices and devices[0].startswith("vulkan:0 = '")
    with pytest.raises(DeviceError, match=r"device 'vulkan:42' does not exist: this machine "
                                          r"has \d+ Vulkan device"):
        rt.load(model.write("index.tsm"), device="vulkan:42")


def test_metadata_problems_are_artifact_errors(model: Model) -> None:
    meta = metadata()
    del meta["vulkan"]
    with pytest.raises(ArtifactError, match="no 'vulkan' dispatch table"):
        rt.load(model.write("nokey.tsm", meta), device="vulkan")
    meta = metadata()
    meta["vulkan"]["version"] = 99
    with pytest.raises(ArtifactError, match=r"vulkan metadata version 99.*upgrade"):
        rt.load(model.write("newer.tsm", meta), device="vulkan")
    meta = metadata()
    meta["steps"][1]["args"] = [3, 9]
    with pytest.raises(ArtifactError, match="inconsistent: step 'relu_scale' has arguments"):
        rt.load(model.write("args.tsm", meta), device="vulkan")
    meta = metadata()
    meta["vulkan"]["kernels"][0]["dispatches"][0]["grid"] = [1, 1]
    with pytest.raises(ArtifactError, match="inconsistent: dispatch"):
        rt.load(model.write("grid.tsm", meta), device="vulkan")
    sections = {"spirv/affine": b"not spir-v", "spirv/relu_scale": model.spirv["relu_scale"],
                "params": bytes(metadata()["params_bytes"])}
    with pytest.raises(ArtifactError, match="'spirv/affine' is not a SPIR-V module"):
        rt.load(model.write("garbage.tsm", sections=sections), device="vulkan")


def test_features_the_device_lacks_are_named(model: Model) -> None:
    meta = copy.deepcopy(metadata())
    meta["vulkan"]["features"] = ["shaderImaginaryNumbers"]
    with pytest.raises(DeviceError, match="needs the Vulkan feature shaderImaginaryNumbers"):
        rt.load(model.write("feature.tsm", meta), device="vulkan")


def test_device_limits_are_checked(model: Model) -> None:
    """A kernel compiled for workgroups larger than the device allows (lavapipe: 1024
    invocations) is refused by name; the plan agrees with the kernel, so only the device
    check can catch it."""
    meta = metadata()
    meta["vulkan"]["kernels"][0]["dispatches"][0]["workgroup_size"] = [4096, 1, 1]
    sections = {"spirv/affine": assemble("affine", model.dir, local_size=4096),
                "spirv/relu_scale": model.spirv["relu_scale"],
                "params": bytes(metadata()["params_bytes"])}
    with pytest.raises(DeviceError, match="needs workgroups of \\[4096, 1, 1\\] invocations"):
        rt.load(model.write("limits.tsm", meta, sections), device="vulkan")
    meta["vulkan"]["kernels"][0]["dispatches"][0]["workgroup_size"] = [64, 1, 1]
    with pytest.raises(ArtifactError, match="compiled for \\[4096, 1, 1\\]"):
        rt.load(model.write("mismatch.tsm", meta, sections), device="vulkan")


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    result = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


LOAD = ("import tensorsmith.runtime as rt\n"
        "try:\n"
        "    rt.load({path!r}, device='vulkan')\n"
        "except rt.DeviceError as e:\n"
        "    print(e)\n")


def test_without_the_vulkan_package(model: Model) -> None:
    path = str(model.write("nopkg.tsm"))
    out = run_python("import sys\nsys.modules['vulkan'] = None\n" + LOAD.format(path=path))
    assert "needs the Python package 'vulkan'" in out
    assert "pip install tensorsmith-runtime[vulkan]" in out


def test_without_the_vulkan_loader(model: Model) -> None:
    path = str(model.write("noloader.tsm"))
    hide = ("import sys\n"
            "class NoLoader:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'vulkan':\n"
            "            raise OSError('libvulkan.so.1: cannot open shared object file')\n"
            "sys.meta_path.insert(0, NoLoader())\n")
    out = run_python(hide + LOAD.format(path=path))
    assert "needs the Vulkan loader library libvulkan.so.1" in out
    assert "apt-get install libvulkan1" in out


def test_without_a_driver(model: Model) -> None:
    path = str(model.write("nodriver.tsm"))
    env = {"VK_DRIVER_FILES": "/nonexistent/icd.json", "VK_ICD_FILENAMES": "/nonexistent/icd.json"}
    out = run_python(LOAD.format(path=path), env)
    assert "apt-get install mesa-vulkan-drivers libvulkan1" in out


def test_importing_the_runtime_does_not_import_vulkan() -> None:
    out = run_python("import sys, tensorsmith.runtime\n"
                     "print('vulkan' in sys.modules, 'tensorsmith.runtime.vulkan' in sys.modules)")
    assert out.split() == ["False", "False"]
