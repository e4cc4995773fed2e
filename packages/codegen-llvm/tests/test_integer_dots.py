"""Integer products (ops/integer.py) on the CPU: ``vpdpbusd`` for the four-byte dots where
the target has AVX512-VNNI or AVX-VNNI, AArch64's ``usdot`` (i8mm) or ``udot`` (dotprod),
``vpmaddwd`` pair sums on AVX2, a portable widening form elsewhere (dot4.py).
Targets are named with an explicit ``-mcpu``/``-mattr``, so what is emitted does not
depend on this host; each artifact is also run (every CPU this suite runs on has AVX2)
and compared with the interpreter: the products are exact, so the results are equal."""

from __future__ import annotations

from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm.dot4 import dot_width
from tensorsmith.ir import GraphBuilder, Target, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight

rng = np.random.default_rng(11)
VNNI512 = "llvm -mcpu=skylake-avx512 -mattr=+avx512vnni"
VNNI256 = "llvm -mcpu=haswell -mattr=+avxvnni"
AVX2 = "llvm -mcpu=haswell"
SSE2 = "llvm -mcpu=x86-64"
INTRINSIC = "llvm.x86.avx512.vpdpbusd"
ARM = "llvm -mtriple=aarch64-linux-gnu"
A76 = f"{ARM} -mcpu=cortex-a76"  # Armv8.2-A: dotprod, no i8mm


def _host_has(feature: str) -> bool:
    return bool(llvm.get_host_cpu_features().get(feature))


def matmul_graph() -> Graph:
    b = GraphBuilder()
    x = b.input("x", (10, 64), "uint8")
    w = b.constant("w", pack_matmul_weight(rng.integers(-128, 128, (64, 48)).astype(np.int8)))
    y = b.add1("qmatmul", [x, w], name="mm")
    return b.finish([b.add1("cast", [y], {"dtype": "float32"}, name="real")])


def conv_graph() -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 9, 9, 16), "uint8")
    w = b.constant("w", pack_conv_weight(rng.integers(-128, 128, (32, 32, 3, 3)).astype(
        np.int8)))
    y = b.add1("qconv2d", [x, w], {"pads": [1, 1, 1, 1], "zero_point": 100, "block": 16},
               name="conv")
    return b.finish([b.add1("cast", [y], {"dtype": "float32"}, name="real")])


def test_the_target_record_says_whether_integer_dots_pay() -> None:
    """What the graph passes ask (``CpuResources.int8_dot``, passes/integer_products.py)."""
    from tensorsmith.ir.codegen import target_resources

    assert target_resources(Target.parse(VNNI512)).int8_dot
    assert target_resources(Target.parse(VNNI256)).int8_dot
    assert not target_resources(Target.parse(AVX2)).int8_dot
    assert target_resources(Target.parse(A76)).int8_dot
    assert not target_resources(Target.parse(ARM)).int8_dot  # generic Armv8-A: none


def test_dot_width_reads_the_features() -> None:
    assert dot_width(["avx512f", "avx512vnni", "avx2"]) == 16
    assert dot_width(["avx2", "avxvnni"]) == 8
    assert dot_width(["avx2", "fma"]) == 0
    assert dot_width(["avx512f", "avx512bw"]) == 0
    assert dot_width(["neon", "dotprod"]) == dot_width(["neon", "i8mm"]) == 4
    assert dot_width(["neon", "fullfp16"]) == 0


@pytest.mark.parametrize("graph", [matmul_graph, conv_graph], ids=["qmatmul", "qconv2d"])
@pytest.mark.parametrize(("target", "width", "needs"), [
    (VNNI512, 512, "avx512vnni"), (VNNI256, 256, "avxvnni"), (AVX2, 0, "avx2"),
    (SSE2, 0, "sse2")], ids=["avx512vnni", "avxvnni", "avx2", "sse2"])
def test_dots_use_vpdpbusd_only_where_the_target_has_it(graph, target: str, width: int,  # noqa: ANN001
                                                         needs: str, tmp_path: Path) -> None:
    g = graph()
    lib = build(g, target=target)
    source = lib.get_source("llvm")
    if width:
        assert f"{INTRINSIC}.{width}" in source
        assert f"{INTRINSIC}.{768 - width}" not in source
    else:
        assert INTRINSIC not in source
    # AVX2 without VNNI: vpmaddwd and vphaddd; without AVX2, portable widened products
    assert ("llvm.x86.avx2.pmadd.wd" in source) == (needs == "avx2")
    if needs == "sse2":
        assert "mul <" in source and "x i32>" in source
    if not _host_has(needs):
        pytest.xfail(f"this CPU has no {needs}: the artifact is compiled, not run")
    path = tmp_path / "m.so"
    lib.export_library(path)
    shape = g.inputs[0].shape
    feeds = {"x": rng.integers(0, 256, shape).astype(np.uint8)}
    got = rt.load(path, device="cpu").run(feeds)[0]
    assert np.array_equal(got, run_graph(g, feeds)[0])


def test_a_masked_tail_falls_back_to_the_widened_form(tmp_path: Path) -> None:
    """20 columns: a vector of 16 and a tail of 4, whose weight bytes past the last
    column would lie past the buffer: only whole vectors take ``vpdpbusd``."""
    b = GraphBuilder()
    x = b.input("x", (3, 8), "uint8")
    w = b.constant("w", pack_matmul_weight(rng.integers(-128, 128, (8, 20)).astype(np.int8)))
    g = b.finish([b.add1("qmatmul", [x, w], name="mm")])
    lib = build(g, target=VNNI512)
    assert INTRINSIC in lib.get_source("llvm")
    if not _host_has("avx512vnni"):
        pytest.xfail("this CPU has no avx512vnni: the artifact is compiled, not run")
    path = tmp_path / "m.so"
    lib.export_library(path)
    feeds = {"x": rng.integers(0, 256, (3, 8)).astype(np.uint8)}
    got = rt.load(path, device="cpu").run(feeds)[0]
    assert np.array_equal(got, run_graph(g, feeds)[0])


def _assembly(lib, target: str) -> str:  # noqa: ANN001
    """The kernels' optimised assembly for ``target``, as the artifact's object has it."""
    from tensorsmith.codegen.llvm.target_machine import optimize, target_machine
    from tensorsmith.codegen.llvm.target_options import llvm_target

    tm = target_machine(llvm_target(Target.parse(target)))
    mod = llvm.parse_assembly(lib.get_source("llvm"))
    mod.triple, mod.data_layout = tm.triple, str(tm.target_data)
    optimize(mod, tm)
    return tm.emit_assembly(mod)


@pytest.mark.parametrize("graph", [matmul_graph, conv_graph], ids=["qmatmul", "qconv2d"])
@pytest.mark.parametrize(("target", "op"), [
    (A76, "udot"), (f"{A76} -mattr=+i8mm", "usdot"), (f"{ARM} -mattr=+dotprod", "udot"),
    (f"{A76} -mattr=-dotprod", None), (ARM, None)],
    ids=["cortex-a76", "i8mm", "generic+dotprod", "a76-dotprod", "generic"])
def test_aarch64_dots_use_udot_or_usdot_only_where_the_target_has_them(
        graph, target: str, op: str | None) -> None:  # noqa: ANN001
    """Compiled only (the results under qemu: tests/test_cross_aarch64.py)."""
    lib = build(graph(), target=target)
    source, asm = lib.get_source("llvm"), _assembly(lib, target)
    for name in ("udot", "usdot"):
        assert (f"llvm.aarch64.neon.{name}." in source) == (name == op), name
        assert (f"\t{name}\tv" in asm) == (name == op), name
    assert "vpdpbusd" not in source
