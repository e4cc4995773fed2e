"""The CPU features an ``llvm`` target's code may use, recorded in the artifact, and an
artifact for a newer CPU refused with a message by the Python runtime and by the C ABI's
tsm_model_create instead of dying of SIGILL.

The newer CPU is Sapphire Rapids, for AMX and AVX512-FP16, on hosts without them (an AVX2
Zen 3, an AVX-512 Zen 4); on a host that has them (a Sapphire Rapids Xeon) it is an AMD
design with FMA4 and XOP, which no Intel CPU has. The test asserts that one of the two
has features this host lacks, so the refusals are tested on every host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm.cpu_features import required_features, target_cpu_features
from tensorsmith.codegen.llvm.plan_c import cpu_check_source
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.target import Target
from tensorsmith.runtime.cpu_features import CHECKED_FEATURES, host_flags, missing_features
from tensorsmith.runtime.errors import UnsupportedCpuError

ROOT = Path(__file__).resolve().parents[3]
CC = os.environ.get("CC", "cc")
SAPPHIRE = "llvm -mcpu=sapphirerapids"
#: CPUs with extensions some host lacks, each with the features that tell.
NEWER_CPUS = (("sapphirerapids", ("amx-tile", "avx512fp16")), ("bdver4", ("fma4", "xop")))


def _newer_than_this_host() -> tuple[str, list[str]]:
    """The first of NEWER_CPUS with features this host lacks, and those features."""
    flags = host_flags() or frozenset()
    for cpu, telling in NEWER_CPUS:
        if lacking := missing_features(telling, flags):
            return f"llvm -mcpu={cpu}", lacking
    return "", []


NEWER, NEWER_LACKS = _newer_than_this_host()
V3 = ["avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "popcnt", "sse", "sse2",
      "sse3", "sse4.1", "sse4.2", "ssse3"]  # fmt: skip
AVX512_SKX = ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]


def features(target: str) -> list[str]:
    return target_cpu_features(Target.parse(target))


def host_llvm_features() -> list[str]:
    enabled = {name for name, on in llvm.get_host_cpu_features().items() if on}
    return sorted(enabled & CHECKED_FEATURES)


def mlp() -> object:
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x = b.input("x", (2, 64), "float32")
    w1 = b.constant("w1", rng.standard_normal((64, 32)).astype("float32"))
    c1 = b.constant("c1", rng.standard_normal((32,)).astype("float32"))
    w2 = b.constant("w2", rng.standard_normal((32, 10)).astype("float32"))
    h = b.add1("relu", [b.add1("add", [b.add1("matmul", [x, w1], name="fc1"), c1], name="add1")],
               name="relu1")  # fmt: skip
    return b.finish([b.add1("matmul", [h, w2], name="fc2")])


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The MLP exported for the build host (``llvm``) and for Sapphire Rapids."""
    folder = tmp_path_factory.mktemp("cpu_features")
    paths = {"llvm": folder / "host.so", NEWER: folder / "newer.so"}
    graph = mlp()
    for target, path in paths.items():
        build(graph, target=target).export_library(path)
    return paths


@pytest.fixture(scope="module")
def run_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/c/run_model.c, built as its header says (warnings as errors)."""
    if shutil.which(CC) is None:
        pytest.skip(f"no C compiler ({CC})")
    exe = tmp_path_factory.mktemp("run_model") / "run_model"
    compile_c([ROOT / "examples/c/run_model.c", "-I", rt.get_include(), "-o", exe, "-ldl"])
    return exe


def compile_c(args: list[object]) -> None:
    cmd = [CC, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}"


# --- what a target's code may use ------------------------------------------------------


def test_named_cpus_have_llvms_features():
    assert features("llvm -mcpu=x86-64") == ["sse", "sse2"]
    assert features("llvm -mcpu=x86-64-v3") == V3
    skylake = features("llvm -mcpu=skylake-avx512")
    assert set(V3 + AVX512_SKX) <= set(skylake)
    assert not {"avx512fp16", "amx-tile", "avxvnni"} & set(skylake)
    assert {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16", "avxvnni"} <= set(features(SAPPHIRE))


def test_host_build_has_the_hosts_features():
    assert features("llvm") == features("llvm -mcpu=native") == host_llvm_features()


def test_mattr_changes_them_with_what_each_implies():
    assert features("llvm -mcpu=x86-64-v3 -mattr=+avx512bw") == sorted([*V3, "avx512bw", "avx512f"])
    without = features("llvm -mcpu=skylake-avx512 -mattr=-avx2")
    assert "avx" in without and not {"avx2", *AVX512_SKX} & set(without)
    assert "avx2" not in features("llvm -mattr=-avx2")  # on top of the host's


def test_only_what_the_runtime_can_test():
    for target in ("llvm", SAPPHIRE, "llvm -mcpu=znver4"):
        assert set(features(target)) <= CHECKED_FEATURES
    assert "xsave" not in features(SAPPHIRE)  # LLVM has it on; no kernel uses it


def test_other_architectures_record_none_for_now():
    assert required_features("aarch64-unknown-linux-gnu", "cortex-a76", "") == []


def test_the_emitter_sees_aarch64_dot_products():
    """What dot4.py asks: LLVM's extensions of the processor, with -mattr's changes."""
    from tensorsmith.codegen.llvm.cpu_features import compiled_features
    from tensorsmith.codegen.llvm.target_options import llvm_target

    def emitted(target: str) -> tuple[str, ...]:
        return compiled_features(llvm_target(Target.parse(target)))

    arm = "llvm -mtriple=aarch64-linux-gnu"
    assert emitted(f"{arm} -mcpu=cortex-a76") == ("dotprod",)
    assert emitted(f"{arm} -mcpu=cortex-a76 -mattr=+i8mm") == ("dotprod", "i8mm")
    assert emitted(f"{arm} -mcpu=neoverse-v1") == ("dotprod", "i8mm")
    assert emitted(f"{arm} -mcpu=cortex-a76 -mattr=-dotprod") == ()
    assert emitted(arm) == ()  # generic Armv8-A


# --- recorded and checked ----------------------------------------------------------------


def test_metadata_lists_the_features(artifacts):
    newer = rt.read_artifact(artifacts[NEWER]).metadata["cpu_features"]
    assert newer == features(NEWER) and set(NEWER_LACKS) <= set(newer)
    assert rt.read_artifact(artifacts["llvm"]).metadata["cpu_features"] == host_llvm_features()


def test_this_host_lacks_the_newer_cpus_features():
    """Asserted rather than skipped on: the refusals below must be tested on every host."""
    assert host_flags() is not None, "no flags in /proc/cpuinfo"
    assert NEWER and NEWER_LACKS, f"this host has every feature of {NEWER_CPUS}"


def test_python_load_refuses_naming_the_missing_features(artifacts):
    with pytest.raises(UnsupportedCpuError) as caught:
        rt.load(artifacts[NEWER])
    message = str(caught.value)
    assert str(artifacts[NEWER]) in message
    assert all(feature in message for feature in NEWER_LACKS)
    assert '--target "llvm -mcpu=x86-64-v' in message


def test_c_program_gets_null_from_tsm_model_create(artifacts, run_model):
    done = subprocess.run([run_model, artifacts[NEWER]], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr  # not -SIGILL
    assert "tsm_model_create: this CPU lacks " in done.stderr
    assert all(feature in done.stderr for feature in NEWER_LACKS)
    assert "-mcpu=" in done.stderr


def test_host_build_runs_from_python_and_c_alike(artifacts, run_model, tmp_path):
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    with rt.load(artifacts["llvm"], num_threads=1) as m:
        (want,) = m.run({"x": x})
    x.tofile(tmp_path / "x.bin")
    done = subprocess.run(
        [run_model, artifacts["llvm"], tmp_path / "x.bin", "--out-dir", tmp_path / "out"],
        capture_output=True,
        text=True,
        env={**os.environ, "TSM_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (out,) = (tmp_path / "out").iterdir()
    np.testing.assert_array_equal(np.fromfile(out, np.float32).reshape(want.shape), want)


def test_c_check_agrees_with_the_runtimes(tmp_path):
    """plan.c's check (libgcc's CPUID) and the Python runtime's (/proc/cpuinfo) find the
    same features missing on this machine, warnings-free under -Wall -Wextra."""
    if shutil.which(CC) is None:
        pytest.skip(f"no C compiler ({CC})")
    every = sorted(CHECKED_FEATURES)
    source = tmp_path / "check.c"
    source.write_text(
        "#include <stdio.h>\n#define TSM_INTERNAL static\n"
        + cpu_check_source(every)
        + "\nint main(void) {\n  const char *name;\n"
        "  for (int i = 0; (name = tsm_plan_missing_cpu_feature(i)) != 0; ++i) puts(name);\n"
        "  return 0;\n}\n"
    )
    compile_c([source, "-o", tmp_path / "check"])
    done = subprocess.run([tmp_path / "check"], capture_output=True, text=True, check=True)
    flags = host_flags()
    assert flags is not None
    assert sorted(done.stdout.split()) == missing_features(every, flags)
