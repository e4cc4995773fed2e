"""An artifact compiled for CPU features this machine lacks is refused before it is loaded.

The test model is the hand-built library of conftest.py, written again with a
``cpu_features`` list; the machine's features are given to the check (``host_flags``
replaced), so each case means the same on every test host.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.runtime import cpu_features
from tensorsmith.runtime.artifact import PARAMS_ALIGN, write_artifact
from tensorsmith.runtime.cpu_features import (
    CHECKED_FEATURES,
    cpuinfo_flags,
    missing_features,
    x86_64_level,
)
from tensorsmith.runtime.errors import ArtifactError, DeviceError, UnsupportedCpuError

#: The flags of /proc/cpuinfo on an AVX2 machine (a Zen 3), abridged.
AVX2_FLAGS = frozenset({
    "fpu", "sse", "sse2", "pni", "pclmulqdq", "ssse3", "fma", "cx16", "sse4_1", "sse4_2",
    "movbe", "popcnt", "aes", "xsave", "avx", "f16c", "lahf_lm", "abm", "sse4a", "bmi1",
    "avx2", "bmi2", "sha_ni", "vaes", "vpclmulqdq",
})  # fmt: skip


@pytest.fixture
def with_features(model_artifact, tmp_path):
    """The test model written again with metadata ``cpu_features`` (absent for None)."""

    def write(features: object) -> Path:
        metadata = {k: v for k, v in model_artifact.metadata.items() if k != "cpu_features"}
        if features is not None:
            metadata["cpu_features"] = features
        path = tmp_path / "model.so"
        library = model_artifact.library.read_bytes()
        sections = model_artifact.sections
        write_artifact(path, library, sections, metadata, align={"params": PARAMS_ALIGN})
        return path

    return write


@pytest.fixture
def cpu_flags(monkeypatch):
    """Make the machine's cpuinfo flags the ones given (None: unreadable)."""

    def use(flags: frozenset[str] | None) -> None:
        monkeypatch.setattr(cpu_features, "host_flags", lambda: flags)

    return use


def test_cpuinfo_flags_are_the_first_processors():
    text = "processor\t: 0\nflags\t\t: fpu sse avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpuinfo_flags(text) == {"fpu", "sse", "avx2"}
    assert cpuinfo_flags("processor\t: 0\nFeatures\t: fp asimd sve\n") is None  # AArch64
    assert cpuinfo_flags("") is None


def test_llvm_names_map_to_cpuinfo_names():
    required = ["sse3", "sse4.1", "lzcnt", "bmi", "sha", "avx2", "avx512f", "avx512fp16",
                "amx-tile"]  # fmt: skip
    assert missing_features(required, AVX2_FLAGS) == ["amx-tile", "avx512f", "avx512fp16"]
    assert missing_features(required, AVX2_FLAGS | {"avx512f", "avx512_fp16", "amx_tile"}) == []
    # a name this runtime has no flag for (from a newer compiler) cannot be tested: allowed
    assert missing_features(["avx10.2", "xsave"], frozenset()) == []
    assert {"avx2", "avx512f", "avx512fp16", "amx-tile", "sse4.2"} <= CHECKED_FEATURES


def test_newest_x86_64_level():
    assert x86_64_level(AVX2_FLAGS) == "x86-64-v3"
    assert x86_64_level(AVX2_FLAGS | {"avx512f", "avx512bw", "avx512cd", "avx512dq",
                                      "avx512vl"}) == "x86-64-v4"  # fmt: skip
    assert x86_64_level(frozenset({"sse", "sse2", "pni", "ssse3"})) == "x86-64"


def test_refused_naming_path_features_and_fix(with_features, cpu_flags):
    path = with_features(["avx2", "avx512f", "avx512fp16", "amx-tile", "sse2"])
    cpu_flags(AVX2_FLAGS)
    with pytest.raises(UnsupportedCpuError) as caught:
        rt.load(path)
    message = str(caught.value)
    assert f"'{path}'" in message
    assert "lacks: amx-tile, avx512f, avx512fp16 (" in message
    assert "illegal instruction" in message
    assert '--target "llvm -mcpu=x86-64-v3"' in message  # this CPU's level
    assert caught.value.missing == ("amx-tile", "avx512f", "avx512fp16")
    assert isinstance(caught.value, DeviceError)  # the CLI's exit 2, like every user error


def test_loads_and_runs_when_the_cpu_has_them(with_features, cpu_flags, model_artifact, inputs):
    cpu_flags(AVX2_FLAGS)
    with rt.load(with_features(["sse2", "sse3", "avx", "avx2", "fma", "lzcnt"])) as m:
        got = m.run(inputs)
    for g, want in zip(got, model_artifact.reference(inputs["x"], 3), strict=True):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("case", ["no field", "empty list", "no cpuinfo"])
def test_not_checked_without_a_list_or_without_flags(case, with_features, cpu_flags, inputs):
    """Artifacts written before the field existed load as before; so does everything where
    the machine's flags cannot be read (then tsm_model_create is the only check)."""
    features = {"no field": None, "empty list": [], "no cpuinfo": ["amx-tile"]}[case]
    cpu_flags(None if case == "no cpuinfo" else frozenset({"sse", "sse2"}))
    with rt.load(with_features(features)) as m:
        assert len(m.run(inputs)) == 2


def test_the_real_machine_runs_what_it_has(with_features, inputs):
    flags = cpu_features.host_flags()
    if flags is None:
        pytest.skip("this machine's /proc/cpuinfo has no flags (not x86 Linux)")
    have = sorted(f for f in CHECKED_FEATURES if not missing_features([f], flags))
    assert "sse2" in have
    with rt.load(with_features(have)) as m:
        assert len(m.run(inputs)) == 2


def test_a_mistyped_list_is_malformed_metadata(with_features):
    with pytest.raises(ArtifactError, match=r"cpu_features should be a list of strings"):
        rt.read_artifact(with_features("avx2"))


def test_the_library_is_not_touched(with_features, cpu_flags):
    """Refused before dlopen: the library's constructors (they map the weights) never ran,
    so the file is not loaded in this process."""
    path = with_features(["avx512f"])
    cpu_flags(AVX2_FLAGS)
    with pytest.raises(UnsupportedCpuError):
        rt.load(path)
    with pytest.raises(OSError):
        ctypes.CDLL(str(path), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
