"""A target from a codegen plug-in installed from outside the monorepo.

The plug-in is a distribution written here, into a temporary folder put on sys.path: a
``toy_plugin-0.1.dist-info`` with its entry point in ``tensorsmith.codegen``, and the
module it names, with its ``TARGET`` record. That is all Python needs to see an installed
distribution, so nothing of tensorsmith is changed for the target to exist. Target
``toy`` compiles with the llvm plug-in's kernels under its own name and runs on the CPU
device, so the runtime runs an artifact of a target it has never heard of.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, Target, TargetError, build
from tensorsmith.ir import targets as target_registry
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.records import read_records
from tensorsmith.ir.targets import installed_kinds

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mlp.onnx"

TOY = '''"""Target "toy": the llvm plug-in's CPU kernels under another name."""

from tensorsmith.ir.target import CpuResources
from tensorsmith.ir.targets import TargetInfo

#: a CPU of 128-bit vectors (4 float lanes), unlike the baseline's 256
TARGET = TargetInfo(kind="toy", family="cpu", device="cpu", suffix=".toy.so",
                    describe_cpu=lambda target: CpuResources("toy", 128, 16))


def codegen(funcs, target):
    from tensorsmith.codegen.llvm import LLVMKernels

    return LLVMKernels(funcs, target)
'''


def write_plugin(folder: Path, dist: str, entry_points: dict[str, str],
                 modules: dict[str, str]) -> Path:
    """An installed distribution ``dist`` in ``folder`` (to be put on sys.path): its
    entry points in ``tensorsmith.codegen`` (kind -> "module:function") and modules."""
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = [f"{kind} = {value}" for kind, value in entry_points.items()]
    (info / "entry_points.txt").write_text("[tensorsmith.codegen]\n" + "\n".join(lines) + "\n")
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    return folder


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Target ``toy`` installed for this test; the folder that holds it."""
    folder = write_plugin(tmp_path / "site", "toy-plugin", {"toy": "toy_codegen:codegen"},
                          {"toy_codegen": TOY})
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop("toy_codegen", None)


def tiny_graph():  # noqa: ANN201
    b = GraphBuilder()
    x = b.input("x", (2, 8), "float32")
    return b.finish([b.add1("relu", [b.add1("neg", [x], name="n")], name="r")])


def test_an_installed_plug_in_adds_its_target(toy: Path) -> None:
    target = Target.parse("toy -anything=1")
    assert (target.kind, target.options) == ("toy", {"anything": "1"})
    info = target.info
    assert (info.family, info.device, info.suffix, info.distribution) == (
        "cpu", "cpu", ".toy.so", "toy-plugin")
    assert target.family == "cpu" and "toy" in installed_kinds()


def test_the_record_drives_the_passes(toy: Path) -> None:
    """A cpu-family target gets the CPU passes, sized by the CPU its record describes:
    convolutions in channel blocks of its 4 float lanes."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 6, 6), "float32")
    w0 = b.constant("w0", np.ones((16, 16, 1, 1), "float32"))
    h = b.add1("relu", [b.add1("conv2d", [x, w0], {}, name="c0")], name="r0")
    w = b.constant("w", np.ones((16, 16, 3, 3), "float32"))
    graph = b.finish([b.add1("conv2d", [h, w], {"pads": [1, 1, 1, 1]}, name="c")])
    _, groups, _ = fused_groups(graph, target="toy")
    (conv,) = [g for g in groups if any(n.name == "c" for n in g.nodes)]
    blocked = [v for v in conv.inputs if len(v.shape) == 5]  # [N, C/b, H, W, b]
    assert blocked and blocked[0].shape[-1] == 4


def test_unknown_targets_name_the_installed_ones(toy: Path) -> None:
    with pytest.raises(TargetError, match=r"unknown target 'nope'; installed targets: .*toy"):
        Target.parse("nope")
    with pytest.raises(TargetError, match="unknown target 'nope'"):
        build(tiny_graph(), target="nope")


def test_a_known_target_not_installed_names_its_distribution(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(target_registry.INSTALL_HINTS, "ghost", "tensorsmith-codegen-ghost")
    with pytest.raises(TargetError, match=r"target 'ghost' is not available: install "
                                          r"tensorsmith-codegen-ghost"):
        Target.parse("ghost")


def test_records_of_targets_not_installed_are_still_read(tmp_path: Path) -> None:
    """One records file holds every target's records; a machine without one of them
    still reads the file (and applies none of that target's)."""
    assert Target.parse("ghost -x=1", installed=False).kind == "ghost"
    path = tmp_path / "r.jsonl"
    path.write_text('{"workload": "k", "target": "ghost", "steps": [], "costs": [1.0], '
                    '"error": null}\n')
    assert [r["target"] for r in read_records(path)] == ["ghost"]


def test_on_off_options() -> None:
    """``Target.flag``: what each plug-in reads its on/off options with."""
    target = Target.parse("ghost -a=1 -b=no -c -d=True -e=maybe", installed=False)
    assert [target.flag(k) for k in "abcd"] == [True, False, True, True]
    assert target.flag("absent") is False and target.flag("absent", default=True) is True
    with pytest.raises(TargetError, match=r"target 'ghost .*': -e=maybe is not 0 or 1"):
        target.flag("e")


def test_a_plug_in_without_a_record_is_refused(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_plugin(tmp_path / "site", "bare-plugin", {"bare": "bare_codegen:codegen"},
                          {"bare_codegen": "def codegen(funcs, target):\n    return None\n"})
    monkeypatch.syspath_prepend(str(folder))
    with pytest.raises(TargetError, match=r"'bare' plug-in .*bare-plugin.* defines no TARGET"):
        Target.parse("bare")


def test_build_and_run_on_the_cpu_device(toy: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorsmith.codegen.llvm")
    lib = build(tiny_graph(), target="toy")
    path = tmp_path / f"tiny{lib.target.info.suffix}"
    lib.export_library(path)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype("float32")
    with rt.load(path) as module:  # the CPU device: the runtime reads it from the plan
        assert module.artifact.target == "toy" and module.artifact.plan.device == "cpu"
        assert module.metadata["producer"]["toy-plugin"] == "0.1"
        np.testing.assert_array_equal(module.run({"x": x})[0], np.maximum(-x, 0))


def test_the_command_line_compiles_for_it(toy: Path, tmp_path: Path) -> None:
    """``tensorsmith compile --target toy`` in a process that finds the plug-in the way an
    installed one is found; the artifact is named by the record's suffix."""
    if importlib.util.find_spec("tensorsmith.cli") is None:
        pytest.skip("the tensorsmith command is not installed")
    pytest.importorskip("tensorsmith.codegen.llvm")
    model = Path(shutil.copy(EXAMPLE, tmp_path / "mlp.onnx"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(toy), *filter(None, [os.environ.get("PYTHONPATH")])])}

    def tsm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tensorsmith.cli.main", *args],
                              capture_output=True, text=True, env=env, timeout=600)

    proc = tsm("compile", str(model), "--target", "toy", "--input-shape", "input:1,784")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    artifact = tmp_path / "mlp.toy.so"
    assert f"-> {artifact}" in proc.stdout
    proc = tsm("run", str(artifact))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = tsm("inspect", str(artifact))
    assert "target     toy" in proc.stdout and "device     cpu" in proc.stdout
