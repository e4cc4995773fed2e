"""The OpenCL executor, on a hand-written OpenCL artifact (no compiler involved).

The artifact has the shape codegen-opencl writes (docs/artifact.md, "OpenCL artifacts"):
OpenCL C source and weights in sections, the plan and the dispatch table in the metadata.
Runs on any OpenCL device; PoCL (pocl-opencl-icd) is what CI uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import ArtifactError, DeviceError, InputError, TensorsmithError
from tensorsmith.runtime.artifact import write_artifact

pytestmark = pytest.mark.opencl

# y = x * w + 1 in two dispatches through a scratch buffer; then total = sum(y)
SOURCE = """
__kernel __attribute__((reqd_work_group_size(2, 1, 1)))
void k0_d0(__global const float* x, __global const float* w, __global float* y,
           __global float* tmp) {
  long i = (long)get_group_id(0) * 2 + (long)get_local_id(0);
  tmp[i] = x[i] * w[i];
}
__kernel __attribute__((reqd_work_group_size(2, 1, 1)))
void k0_d1(__global const float* x, __global const float* w, __global float* y,
           __global float* tmp) {
  long i = (long)get_group_id(0) * 2 + (long)get_local_id(0);
  y[i] = tmp[i] + 1.0f;
}
__kernel void k1_d0(__global const float* y, __global float* total) {
  float s = 0.0f;
  for (int i = 0; i < 6; ++i) s += y[i];
  total[0] = s;
}
"""
W = np.arange(1, 7, dtype="float32")
C = np.array([7, 8, 9], "int64")


def metadata(**changes: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "target": "opencl",
        "inputs": [{"name": "x", "shape": [2, 3], "dtype": "float32", "buffer": 2}],
        "outputs": [{"name": "y", "shape": [2, 3], "dtype": "float32", "buffer": 4},
                    {"name": "total", "shape": [], "dtype": "float32", "buffer": 5},
                    {"name": "c", "shape": [3], "dtype": "int64", "buffer": 1}],
        "steps": [{"kernel": "k0", "name": "scale", "args": [2, 0, 4, 3]},
                  {"kernel": "k1", "name": "sum", "args": [4, 5]}],
        "buffers": [{"kind": "param", "offset": 0, "nbytes": 24},
                    {"kind": "param", "offset": 64, "nbytes": 24},
                    {"kind": "workspace", "offset": 0, "nbytes": 24},
                    {"kind": "workspace", "offset": 64, "nbytes": 24},
                    {"kind": "workspace", "offset": 128, "nbytes": 24},
                    {"kind": "workspace", "offset": 0, "nbytes": 4}],
        "workspace_bytes": 192,
        "opencl": {"version": 1, "source_section": "opencl.source", "params_section": "params",
                   "build_options": "", "extensions": [],
                   "kernels": {"k0": [{"entry": "k0_d0", "grid": [3, 1, 1],
                                       "workgroup": [2, 1, 1]},
                                      {"entry": "k0_d1", "grid": [3, 1, 1],
                                       "workgroup": [2, 1, 1]}],
                               "k1": [{"entry": "k1_d0", "grid": [1, 1, 1],
                                       "workgroup": [1, 1, 1]}]}},
    }
    meta.update(changes)
    return meta


def write(path: Path, source: str = SOURCE, **changes: Any) -> Path:
    params = W.tobytes() + bytes(40) + C.tobytes()
    sections = {"opencl.source": source.encode(), "params": params}
    write_artifact(path, b"", sections, metadata(**changes))
    return path


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    return write(tmp_path / "model.tsm")


def test_runs_the_plan(artifact: Path) -> None:
    with rt.load(artifact, device="opencl") as m:
        assert m.device.kind == "opencl"
        for scale in (1.0, -2.5):
            x = np.arange(6, dtype="float32").reshape(2, 3) * scale
            y, total, c = m.run({"x": x})
            want = x * W.reshape(2, 3) + 1
            np.testing.assert_allclose(y, want, rtol=1e-6)
            np.testing.assert_allclose(total, want.sum(), rtol=1e-5)
            np.testing.assert_array_equal(c, C)
        out = np.empty((2, 3), "float32")
        m.get_output("y", out=out)
        np.testing.assert_allclose(out, want, rtol=1e-6)
        np.testing.assert_allclose(m(x)[0], want, rtol=1e-6)


def test_profile_reports_each_step(artifact: Path) -> None:
    with rt.load(artifact, device="opencl:0") as m:
        report = m.profile({"x": np.ones((2, 3), "float32")}, repeat=3)
    assert [e["name"] for e in report] == ["scale", "sum"]
    assert all(e["calls"] == 3 and e["total_ms"] >= 0 for e in report)
    assert len(report.run_ms) == 3
    assert "scale" in report.table()


def test_inputs_are_checked_and_close_is_final(artifact: Path) -> None:
    m = rt.load(artifact, device="opencl")
    with pytest.raises(InputError, match="has dtype float64 but the model expects float32"):
        m.run({"x": np.ones((2, 3))})
    m.close()
    m.close()
    with pytest.raises(TensorsmithError, match="was closed"):
        m.run({"x": np.ones((2, 3), "float32")})


def test_bad_device_index_lists_the_devices(artifact: Path) -> None:
    with pytest.raises(DeviceError, match=r"device 'opencl:99' does not exist: this machine has "
                                          r"\d+ OpenCL devices? \(opencl:0 = '"):
        rt.load(artifact, device="opencl:99")


def test_target_mismatch_names_the_right_device(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu.so"
    write_artifact(cpu, b"\x7fELF", {}, {"target": "llvm -mcpu=native"})
    with pytest.raises(DeviceError, match=r"compiled for target 'llvm', and device 'opencl' does "
                                          r"not run it \(it runs on device 'cpu'\); load it "
                                          r"with device='cpu'"):
        rt.load(cpu, device="opencl")
    gpu = write(tmp_path / "gpu.tsm")
    with pytest.raises(DeviceError, match="load it with device='opencl'"):
        rt.load(gpu, device="cpu")


def test_missing_extension_is_named(tmp_path: Path) -> None:
    meta = metadata()
    meta["opencl"]["extensions"] = ["cl_khr_fp16"]
    path = tmp_path / "half.tsm"
    write_artifact(path, b"", {"opencl.source": SOURCE.encode(), "params": bytes(88)}, meta)
    from tensorsmith.runtime.opencl import list_devices

    if "cl_khr_fp16" in list_devices()[0].extensions.split():
        rt.load(path, device="opencl").close()
    else:
        with pytest.raises(DeviceError, match="needs the OpenCL extension cl_khr_fp16 "
                                              r"\(float16 arithmetic\)"):
            rt.load(path, device="opencl")


def test_program_the_device_rejects(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.tsm", source=SOURCE + "\nthis is not OpenCL C;\n")
    with pytest.raises(DeviceError, match="rejected the program of artifact"):
        rt.load(path, device="opencl")


def test_artifact_without_dispatch_table(tmp_path: Path) -> None:
    path = write(tmp_path / "old.tsm", opencl=None)
    with pytest.raises(ArtifactError, match="has no 'opencl' dispatch table"):
        rt.load(path, device="opencl")
    newer = metadata()
    newer["opencl"]["version"] = 2
    path = write(tmp_path / "new.tsm", opencl=newer["opencl"])
    with pytest.raises(ArtifactError, match=r"dispatch table of version 2.*upgrade it"):
        rt.load(path, device="opencl")
    path = write(tmp_path / "bad.tsm", steps=[{"kernel": "k0", "name": "s", "args": [2, 0, 9]}])
    with pytest.raises(ArtifactError, match="passes buffer 9 and the plan has 6 buffers"):
        rt.load(path, device="opencl")


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_no_platform_says_how_to_get_one(artifact: Path, tmp_path: Path) -> None:
    """With no ICD registered (an empty vendors directory) the loader finds no platform."""
    code = ("import tensorsmith.runtime as rt\n"
            f"try: rt.load({str(artifact)!r}, device='opencl')\n"
            "except rt.DeviceError as e: print(e)\n")
    result = _run_python(code, OCL_ICD_VENDORS=str(tmp_path))
    assert "no OpenCL platform found" in result.stdout, result.stdout + result.stderr
    assert "apt-get install pocl-opencl-icd" in result.stdout


def test_without_pyopencl(artifact: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # import pyopencl -> ImportError
    with pytest.raises(DeviceError, match=r"pip install tensorsmith-runtime\[opencl\]"):
        rt.load(artifact, device="opencl")


def test_runtime_imports_without_touching_pyopencl() -> None:
    code = ("import sys, json, tensorsmith.runtime, tensorsmith.runtime.opencl\n"
            "print(json.dumps('pyopencl' in sys.modules))")
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is False
