"""Cross-compiling for AArch64 on an x86-64 build host, and running the result for real.

Each model is compiled twice: for the host, and for
``llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76`` (NEON: 4 float lanes, 32 vector
registers; linked by Zig's C compiler from the ziglang wheel). The C example
(examples/c), built by its Makefile with the same cross compiler, runs the AArch64
artifact under qemu-user with Debian's AArch64 C library; its outputs must agree with the
host build's to 1e-5 of the largest output: the same default rules, sized for another
vector unit, compute the same numbers. Integer kernels run there too, on the dot
product instructions the target names (``udot`` with dotprod, ``usdot`` with i8mm): equal
to the interpreter's for the integer ops alone, within one quantization step of ONNX
Runtime for models it quantized. qemu-user, libc6-arm64-cross and ziglang are test
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
from test_quantized_models import ACTIVATIONS, _output_step, _reference, quantize_models
from test_quantized_models import MODELS as QUANTIZED

import tensorsmith.runtime as rt
from bench.models import bert_encoder, input_shapes, resnet18, sample_inputs
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight
from tensorsmith.runtime.errors import ArtifactError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "c"
TARGET = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76"
#: the instruction the integer kernels take -> a target that has it (cortex-a76 has
#: dotprod, not i8mm; qemu's default CPU has both)
DOT_TARGETS = {"udot": TARGET, "usdot": f"{TARGET} -mattr=+i8mm"}
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


def run_under_qemu(qemu: list[str], program: Path, artifact: Path,
                   feeds: dict[str, np.ndarray], folder: Path) -> list[np.ndarray]:
    """The outputs of the AArch64 ``artifact`` run by the C example under qemu on
    ``feeds`` (the artifact's metadata names its inputs and outputs, in order)."""
    meta = rt.read_artifact(artifact).metadata
    files = []
    for info in meta["inputs"]:
        path = folder / f"{info['name']}.bin"
        np.ascontiguousarray(feeds[info["name"]], dtype=info["dtype"]).tofile(path)
        files.append(str(path))
    out = folder / "out"
    proc = subprocess.run(
        [*qemu, str(program), str(artifact), *files, "--out-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TSM_NUM_THREADS": str(THREADS)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [np.fromfile(out / f"{info['name']}.bin", dtype=info["dtype"]).reshape(info["shape"])
            for info in meta["outputs"]]


@pytest.mark.parametrize("name", list(MODELS))
def test_aarch64_artifact_runs_under_qemu_like_the_host_build(
    name: str, qemu: list[str], program: Path, built: Callable[[str], Built], tmp_path: Path
) -> None:
    model = built(name)
    assert elf_machine(model.aarch64) == EM_AARCH64
    host = rt.load(model.host, num_threads=THREADS)
    expected = host.run(model.feeds)

    outputs = run_under_qemu(qemu, program, model.aarch64, model.feeds, tmp_path)

    for info, got, want in zip(host.output_info, outputs, expected, strict=True):
        assert got.size == want.size, info["name"]
        error = float(np.max(np.abs(got.reshape(want.shape) - want)))
        scale = float(np.max(np.abs(want)))
        assert error <= TOLERANCE * scale, (name, info["name"], error, scale)


def qmatmul_graph() -> Graph:
    """uint8 x int8 -> int32 (as float32): 48 columns, 12 NEON registers of 4 lanes."""
    rng = np.random.default_rng(11)
    b = GraphBuilder()
    x = b.input("x", (10, 64), "uint8")
    w = b.constant("w", pack_matmul_weight(rng.integers(-128, 128, (64, 48)).astype(np.int8)))
    y = b.add1("qmatmul", [x, w], name="mm")
    return b.finish([b.add1("cast", [y], {"dtype": "float32"}, name="real")])


def qconv_graph() -> Graph:
    """A 3x3 convolution of 32 channels in blocks of 16, padded with the zero point."""
    rng = np.random.default_rng(12)
    b = GraphBuilder()
    x = b.input("x", (1, 2, 9, 9, 16), "uint8")
    w = b.constant("w", pack_conv_weight(rng.integers(-128, 128, (32, 32, 3, 3)).astype(
        np.int8)))
    y = b.add1("qconv2d", [x, w], {"pads": [1, 1, 1, 1], "zero_point": 100, "block": 16},
               name="conv")
    return b.finish([b.add1("cast", [y], {"dtype": "float32"}, name="real")])


@pytest.mark.parametrize("op", list(DOT_TARGETS))
@pytest.mark.parametrize("graph", [qmatmul_graph, qconv_graph], ids=["qmatmul", "qconv2d"])
def test_integer_dots_run_under_qemu_exactly(graph: Callable[[], Graph], op: str,
                                             qemu: list[str], program: Path,
                                             tmp_path: Path) -> None:
    """The integer ops alone, on ``udot`` (unsigned both:
    the weights' sign flipped and corrected) or ``usdot``: exact, as the interpreter."""
    g = graph()
    lib = build(g, target=DOT_TARGETS[op])
    assert f"llvm.aarch64.neon.{op}." in lib.get_source("llvm")
    artifact = tmp_path / "dots.so"
    lib.export_library(artifact)
    feeds = {"x": np.random.default_rng(3).integers(0, 256, g.inputs[0].shape).astype(np.uint8)}

    (got,) = run_under_qemu(qemu, program, artifact, feeds, tmp_path)

    assert np.array_equal(got, run_graph(g, feeds)[0])


@pytest.fixture(scope="module")
def quantized_models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """tests/test_quantized_models.py's models, quantized by ONNX Runtime (QDQ files)."""
    return quantize_models(tmp_path_factory.mktemp("quantized"))


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("name", sorted(QUANTIZED))
def test_int8_models_run_under_qemu_on_dot_products(
        name: str, activation: str, quantized_models: dict[tuple[str, str], Path],
        qemu: list[str], program: Path, tmp_path: Path) -> None:
    """ONNX Runtime's QDQ models for a dotprod CPU (cortex-a76): their dense products in
    integers (build._integer_products), on ``udot``, within one quantization step of
    ONNX Runtime's float compute."""
    model = onnx.load(quantized_models[name, activation])
    graph, params = from_onnx(model)
    lib = build(graph, target=TARGET, params=params)
    assert {"qconv2d", "qmatmul"} & {n.op for n in lib.graph.nodes}
    assert "llvm.aarch64.neon.udot." in lib.get_source("llvm")
    artifact = tmp_path / "model.so"
    lib.export_library(artifact)
    feeds = {"x": np.random.default_rng(9).standard_normal(
        tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    ).astype(np.float32)}

    (got,) = run_under_qemu(qemu, program, artifact, feeds, tmp_path)

    steps = float(np.max(np.abs(got - _reference(model, feeds)))) / _output_step(model)
    assert steps <= 1.0 + 1e-3, f"{name} ({activation}): {steps:.2f} steps"


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


def test_an_aarch64_cpu_without_dot_products_keeps_qdq_products_in_float(
        quantized_models: dict[tuple[str, str], Path]) -> None:
    """Generic Armv8-A (no dotprod, no i8mm): the exact widening form would replace
    float products with slower integer ones, as on AVX2 (build._integer_products)."""
    from tensorsmith.ir.build import fused_groups

    graph, params = from_onnx(onnx.load(quantized_models["conv_net", "uint8"]))
    for target, integer in (("llvm -mtriple=aarch64-linux-gnu", False), (TARGET, True)):
        optimized, _, _ = fused_groups(graph.copy(), params, target=target)
        ops = {n.op for n in optimized.nodes}
        assert bool(ops & {"qconv2d", "qmatmul"}) == integer, (target, ops)


@pytest.mark.skipif(platform.machine() == "aarch64", reason="the host is AArch64: it loads")
def test_the_python_runtime_refuses_another_architecture(built: Callable[[str], Built]) -> None:
    """Before dlopen, naming the artifact's triple and this machine."""
    with pytest.raises(ArtifactError, match=r"compiled for aarch64-linux-gnu.*this machine is"):
        rt.load(built("mlp").aarch64)
