"""target_options.py: the llvm target's grammar. Every mistake is a TargetError naming the
option and its value, raised before LLVM sees the string (LLVM ignores unknown names with
a line on stderr, and aborts the process on a feature without its sign)."""

from __future__ import annotations

import platform

import llvmlite.binding as llvm
import pytest

from tensorsmith.codegen.llvm import codegen
from tensorsmith.codegen.llvm.resources import cpu_resources
from tensorsmith.codegen.llvm.target_options import FOREIGN_DEFAULT_CPU, llvm_target
from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import Target

AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76"
X86 = "llvm -mtriple=x86_64-linux-gnu"  # a host build on x86-64, a cross build elsewhere
ON_X86 = platform.machine() in ("x86_64", "AMD64")


def parse(text: str):  # noqa: ANN201
    return llvm_target(Target.parse(text))


def test_plain_llvm_is_the_host_cpu_with_its_features() -> None:
    t = parse("llvm")
    assert t.host and t.native
    assert t.triple == llvm.get_process_triple()
    assert t.cpu == llvm.get_host_cpu_name()
    assert t.attrs == llvm.get_host_cpu_features().flatten()
    assert parse("llvm -mcpu=native") == t


def test_options_are_read() -> None:
    t = parse(f"{X86} -mcpu=x86-64-v3 -mattr=+avx2,-avx512f -layout=nchw")
    assert (t.cpu, t.attrs, t.native) == ("x86-64-v3", "+avx2,-avx512f", False)
    foreign = parse(AARCH64)
    assert (foreign.triple, foreign.cpu, foreign.host) == ("aarch64-linux-gnu", "cortex-a76", False)
    assert parse("llvm -mtriple=aarch64-linux-gnu").cpu == FOREIGN_DEFAULT_CPU
    # the host's own triple, spelled otherwise, is still a host build
    assert parse(f"llvm -mtriple={llvm.get_process_triple().replace('-unknown', '')}").host


@pytest.mark.skipif(not ON_X86, reason="the feature turned off is an x86 one")
def test_native_features_come_before_mattr_so_mattr_wins() -> None:
    t = parse("llvm -mcpu=native -mattr=-avx512f")
    assert t.cpu == llvm.get_host_cpu_name() and t.attrs.endswith(",-avx512f")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("llvm -mtripel=aarch64-linux-gnu", ["-mtripel=aarch64-linux-gnu", "mean -mtriple"]),
        ("llvm -num-threads=4", ["unknown option -num-threads=4", "-mtriple, -mcpu, -mattr"]),
        ("llvm -mtriple=foo-bar-baz", ["-mtriple=foo-bar-baz", "aarch64-linux-gnu"]),
        ("llvm -mtriple=x86_64-apple-darwin", ["-mtriple=x86_64-apple-darwin", "Linux"]),
        ("llvm -mtriple=aarch64_linux", ["-mtriple=aarch64_linux", "arch-os-abi"]),
        (f"{X86} -mcpu=znver9", ["-mcpu=znver9", "no processor 'znver9'", "did you mean"]),
        ("llvm -mcpu=cortex-a67 -mtriple=aarch64-linux-gnu", ["-mcpu=cortex-a67", "cortex-a76"]),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=skylake", ["-mcpu=skylake", "aarch64-linux-gnu"]),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=native", ["-mcpu=native", "cortex-a76"]),
        ("llvm -mcpu=a,b", ["-mcpu=a,b", "not a processor name"]),
        ("llvm -mattr=avx2", ["-mattr=avx2", "+name", "-mattr=+avx2,-avx512f"]),
        ("llvm -mattr=+avx2,,+fma", ["-mattr=+avx2,,+fma", "+name"]),
        (f"{X86} -mattr=+avx3", ["-mattr=+avx3", "no feature 'avx3'", "avx2"]),
        (f"{AARCH64} -mattr=+avx2", ["-mattr=+avx2", "aarch64-linux-gnu"]),
        ("llvm -layout=nhwc", ["unknown layout 'nhwc'", "blocked, nchw"]),
    ],
)
def test_a_bad_option_is_a_target_error_naming_it(text: str, fragments: list[str]) -> None:
    with pytest.raises(TargetError) as caught:
        parse(text)
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)


def test_an_unknown_name_leaves_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """LLVM's own "is not a recognized processor" line is caught and turned into the
    error, not printed beside it."""
    with pytest.raises(TargetError):
        parse("llvm -mcpu=not-a-cpu")
    assert "recognized" not in capfd.readouterr().err


def test_help_lists_what_llvm_knows() -> None:
    with pytest.raises(TargetError, match=r"processors LLVM knows for aarch64.*cortex-a76"):
        parse("llvm -mtriple=aarch64-linux-gnu -mcpu=help")
    with pytest.raises(TargetError, match=r"features LLVM knows for aarch64.*neon"):
        parse("llvm -mtriple=aarch64-linux-gnu -mattr=help")


def test_the_plug_in_entry_points_check_the_target() -> None:
    """build asks cpu_resources first and codegen last: both refuse a bad target."""
    bad = Target.parse(f"{X86} -mcpu=znver9")
    with pytest.raises(TargetError, match="-mcpu=znver9"):
        cpu_resources(bad)
    with pytest.raises(TargetError, match="-mcpu=znver9"):
        codegen([], bad)


def test_aarch64_resources_are_neon() -> None:
    """NEON: 128-bit registers (4 float lanes), 32 of them; typical caches, not the host's."""
    res = cpu_resources(Target.parse(AARCH64))
    assert (res.cpu, res.vector_bits, res.lanes(4), res.vector_registers) == (
        "cortex-a76", 128, 4, 32)  # fmt: skip
    assert cpu_resources(Target.parse(f"{X86} -mcpu=x86-64-v3")).vector_registers == 16


def test_a_cross_build_without_a_toolchain_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked by codegen, before LLVM compiles anything."""
    from tensorsmith.codegen.llvm import link

    monkeypatch.setattr(link.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(link.shutil, "which", lambda name: None)
    with pytest.raises(
        TargetError, match=r"tensorsmith-codegen-llvm\[cross\].*aarch64-linux-gnu-gcc"
    ):
        codegen([], Target.parse(AARCH64))
