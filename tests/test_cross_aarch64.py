"""Cross-compiling for AArch64 on an x86-64 build host, and running the result for real.

Each model is compiled twice: for the host, and for
``llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76`` (NEON: 4 float lanes, 32 vector
registers; linked by Zig's C compiler from the ziglang wheel). The C example
(examples/c), built by its Makefile with the same cross compiler, runs the AArch64
artifact under qemu-user with Debian's AArch64 C library; its outputs must agree with the
host build's to 1e-5 of the largest output: the same default rules, sized for another
vector unit, compute the same numbers. qemu-user, libc6-arm64-cross and ziglang are test
requirements (README's apt line, noxfile.py's TEST_DEPS): a missing one fails these
tests with what to install, it does not skip them.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

import tensorsmith.runtime as rt
from bench.models import bert_encoder, input_shapes, resnet18, sample_inputs
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.runtime.errors import ArtifactError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "c"
TARGET = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76"
SYSROOT = Path("/usr/aarch64-linux-gnu")  # Debian's libc6-arm64-cross
EM_AARCH64 = 183  # ELF e_machine
THREADS = 2
TOLERANCE = 1e-5  # of the largest output magnitude


@dataclass(frozen=True)
class Built:
    """A model compiled for both machines, and the inputs it is run on."""

    host: Path
    aarch64: Path
    feeds: dict[str, np.ndarray]
    blocks: frozenset[int]  # channel blocks of the AArch64 build's activations


def elf_machine(path: Path) -> int:
    """ELF header's e_machine (the artifact's payload is the library, header first)."""
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path} is not an ELF file"
    return int.from_bytes(head[18:20], "little")


@pytest.fixture(scope="module")
def qemu() -> list[str]:
    """The command prefix that runs an AArch64 Linux program here."""
    missing = []
    if importlib.util.find_spec("ziglang") is None:
        missing.append("the ziglang wheel (pip install ziglang)")
    exe = shutil.which("qemu-aarch64")
    if exe is None:
        missing.append("qemu-aarch64 (apt-get install qemu-user)")
    if not (SYSROOT / "lib" / "ld-linux-aarch64.so.1").exists():
        missing.append(f"an AArch64 glibc in {SYSROOT} (apt-get install libc6-arm64-cross)")
    if missing:
        pytest.fail("cross-compilation tests need " + ", ".join(missing))
    return [str(exe), "-L", str(SYSROOT)]


@pytest.fixture(scope="module")
def program(qemu: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """run_model for AArch64, built by the example's own Makefile with Zig's cc as CC."""
    folder = tmp_path_factory.mktemp("c_example_aarch64")
    for name in ("Makefile", "run_model.c"):
        shutil.copy(EXAMPLE / name, folder / name)
    cc = f"{sys.executable} -m ziglang cc -target aarch64-linux-gnu"
    proc = subprocess.run(["make", "-C", str(folder), f"CC={cc}", f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exe = folder / "run_model"
    assert elf_machine(exe) == EM_AARCH64
    return exe


def _mlp() -> onnx.ModelProto:
    return onnx.load(ROOT / "examples" / "mlp.onnx")


#: name -> (ONNX model, input shapes): the MLP example, a small CNN (ResNet-18 on 64x64,
#: 3x3 convolutions on channel blocks, Winograd included), a transformer block (one BERT
#: layer: attention, softmax, LayerNorm, GELU).
MODELS = {
    "mlp": lambda: (_mlp(), {"input": (1, 784)}),
    "cnn": lambda: (m := resnet18(opset=17, batch=1, image=64), input_shapes(m)),
    "transformer": lambda: (
        m := bert_encoder(opset=17, batch=1, seq=16, layers=1, hidden=64, heads=2, vocab=500),
        input_shapes(m),
    ),
}


def _build(name: str, folder: Path) -> Built:
    model, shapes = MODELS[name]()
    mod, params = from_onnx(model, shapes)
    paths, blocks = {}, frozenset()
    for kind, target in (("host", "llvm"), ("aarch64", TARGET)):
        lib = build(mod, target=target, params=params)
        paths[kind] = folder / f"{name}.{kind}.so"
        lib.export_library(paths[kind])
        if kind == "aarch64":
            blocks = frozenset(v.shape[-1] for n in lib.graph.nodes for v in n.outputs
                               if len(v.shape) == 5)  # fmt: skip
    rng = np.random.default_rng(7)
    feeds = (
        {"input": rng.standard_normal((1, 784)).astype(np.float32)}
        if name == "mlp"
        else sample_inputs(model, seed=7)
    )
    return Built(paths["host"], paths["aarch64"], feeds, blocks)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Built]:
    """A model of MODELS compiled for the host and for AArch64, once per module."""
    done: dict[str, Built] = {}

    def get(name: str) -> Built:
        if name not in done:
            done[name] = _build(name, tmp_path_factory.mktemp(name))
        return done[name]

    return get


@pytest.mark.parametrize("name", list(MODELS))
def test_aarch64_artifact_runs_under_qemu_like_the_host_build(
    name: str, qemu: list[str], program: Path, built: Callable[[str], Built], tmp_path: Path
) -> None:
    model = built(name)
    assert elf_machine(model.aarch64) == EM_AARCH64
    host = rt.load(model.host, num_threads=THREADS)
    expected = host.run(model.feeds)
    files = []
    for info in host.input_info:
        path = tmp_path / f"{info['name']}.bin"
        model.feeds[info["name"]].tofile(path)
        files.append(str(path))
    out = tmp_path / "out"

    proc = subprocess.run(
        [*qemu, str(program), str(model.aarch64), *files, "--out-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TSM_NUM_THREADS": str(THREADS)},
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    for info, want in zip(host.output_info, expected, strict=True):
        got = np.fromfile(out / f"{info['name']}.bin", dtype=info["dtype"])
        assert got.size == want.size, info["name"]
        error = float(np.max(np.abs(got.reshape(want.shape) - want)))
        scale = float(np.max(np.abs(want)))
        assert error <= TOLERANCE * scale, (name, info["name"], error, scale)


def test_cross_build_tiles_for_neon(built: Callable[[str], Built]) -> None:
    """The default rules size the AArch64 build for NEON: convolutions on blocks of 4
    channels (one 128-bit register of floats), where the host's AVX2 blocks 8."""
    from tensorsmith.codegen.llvm.resources import cpu_resources
    from tensorsmith.ir.target import Target

    neon = cpu_resources(Target.parse(TARGET))
    assert (neon.lanes(4), neon.vector_registers, neon.cpu) == (4, 32, "cortex-a76")
    blocks = built("cnn").blocks
    assert 4 in blocks and not blocks & {8, 16}, blocks  # none of AVX2's 8 or AVX-512's 16


def test_cli_cross_compiles_to_an_aarch64_library(tmp_path: Path) -> None:
    out = tmp_path / "mlp.so"
    cli = [sys.executable, "-m", "tensorsmith.cli.main"]
    proc = subprocess.run(
        [*cli, "compile", str(ROOT / "examples" / "mlp.onnx"), "--target", TARGET,
         "--input-shape", "input:1,784", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert elf_machine(out) == EM_AARCH64


@pytest.mark.skipif(platform.machine() == "aarch64", reason="the host is AArch64: it loads")
def test_the_python_runtime_refuses_another_architecture(built: Callable[[str], Built]) -> None:
    """Before dlopen, naming the artifact's triple and this machine."""
    with pytest.raises(ArtifactError, match=r"compiled for aarch64-linux-gnu.*this machine is"):
        rt.load(built("mlp").aarch64)
