"""The eight distributions' metadata agrees with itself: one version, exact pins between
siblings, one floor per third-party dependency, the extras the README's install command
names, and sdists that build.

The version used to be written in every pyproject.toml and again in each package's
fallback, the fallbacks disagreed ("0.0.0" and "0.1.0"), and siblings were pinned with
``>=`` only, so any mix of versions could be installed together; these tests keep that
from coming back. Installing what the metadata describes is the install_check session's job
(noxfile.py); installing at the floors is the floors session's.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
VERSION_FILE = ROOT / "packages/runtime/src/tensorsmith/runtime/_version.py"
# folder -> (distribution, import name)
PACKAGES = {
    "runtime": ("tensorsmith-runtime", "tensorsmith.runtime"),
    "ir": ("tensorsmith-ir", "tensorsmith.ir"),
    "frontend-onnx": ("tensorsmith-frontend-onnx", "tensorsmith.frontend.onnx"),
    "codegen-llvm": ("tensorsmith-codegen-llvm", "tensorsmith.codegen.llvm"),
    "codegen-spirv": ("tensorsmith-codegen-spirv", "tensorsmith.codegen.spirv"),
    "codegen-opencl": ("tensorsmith-codegen-opencl", "tensorsmith.codegen.opencl"),
    "autotune": ("tensorsmith-autotune", "tensorsmith.autotune"),
    "tensorsmith": ("tensorsmith", "tensorsmith.cli"),
}


def source_version() -> str:
    match = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(), re.MULTILINE)
    assert match, f"no __version__ line in {VERSION_FILE}"
    return match.group(1)


def pyproject(folder: str) -> dict:
    return tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())


def requirements(folder: str) -> list[tuple[str | None, Requirement]]:
    """(extra or None, requirement) for every requirement of one package."""
    meta = pyproject(folder)["project"]
    out: list[tuple[str | None, Requirement]] = [
        (None, Requirement(t)) for t in meta.get("dependencies", [])]
    for extra, texts in meta.get("optional-dependencies", {}).items():
        out += [(extra, Requirement(t)) for t in texts]
    return out


def test_the_folders_here_are_the_eight_packages():
    assert sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml")) == sorted(
        PACKAGES)


@pytest.mark.parametrize("folder", PACKAGES)
def test_version_comes_from_the_one_file(folder: str):
    config = pyproject(folder)
    assert "version" not in config["project"], "a static version: read it from the one file"
    assert "version" in config["project"].get("dynamic", [])
    path = config["tool"]["hatch"]["version"]["path"]
    assert (ROOT / "packages" / folder / path).resolve() == VERSION_FILE


@pytest.mark.parametrize("folder", PACKAGES)
def test_siblings_are_pinned_exactly_to_the_one_version(folder: str):
    version = source_version()
    for extra, req in requirements(folder):
        if canonicalize_name(req.name).startswith("tensorsmith"):
            specs = [(s.operator, s.version) for s in req.specifier]
            assert specs == [("==", version)], f"{folder} [{extra or 'dependencies'}]: {req}"


def test_each_third_party_dependency_has_one_floor():
    """Required dependencies declare a floor (which the floors session installs), and a
    name declared by several packages has the same floor in each."""
    floors: dict[str, set[str]] = {}
    for folder in PACKAGES:
        for extra, req in requirements(folder):
            name = canonicalize_name(req.name)
            if name.startswith("tensorsmith"):
                continue
            found = [s.version for s in req.specifier if s.operator == ">="]
            if extra is None:
                assert found, f"{folder}: {req} has no floor (>=)"
            floors.setdefault(name, set()).update(found)
    assert {n: f for n, f in floors.items() if len(f) > 1} == {}


def test_full_stack_extras():
    """`tensorsmith[vulkan]` / `[opencl]` run on GPUs, `[tune]` brings the tuner, which
    the plain install leaves out (scikit-learn and SciPy are large)."""
    version = source_version()
    extras = pyproject("tensorsmith")["project"]["optional-dependencies"]
    assert extras["vulkan"] == [f"tensorsmith-runtime[vulkan]=={version}"]
    assert extras["opencl"] == [f"tensorsmith-runtime[opencl]=={version}"]
    assert extras["tune"] == [f"tensorsmith-autotune=={version}"]
    plain = {canonicalize_name(r.name) for e, r in requirements("tensorsmith") if e is None}
    assert "tensorsmith-autotune" not in plain
    assert set(pyproject("runtime")["project"]["optional-dependencies"]) >= {"vulkan", "opencl"}


def test_every_version_and_fallback_is_the_one_version():
    """Installed, each package reports its distribution's version; from a source tree
    (no metadata), each falls back to the one file. A subprocess makes importlib.metadata
    find nothing, so the fallbacks are what is printed."""
    version = source_version()
    imports = [name for _, name in PACKAGES.values()]
    code = (
        "import importlib, importlib.metadata as m\n"
        "def missing(name): raise m.PackageNotFoundError(name)\n"
        "for fallback in (False, True):\n"
        "    if fallback:\n"
        "        m.version = missing\n"
        "        for n in NAMES: importlib.reload(importlib.import_module(n))\n"
        "    print(*[importlib.import_module(n).__version__ for n in NAMES])\n"
    ).replace("NAMES", repr(imports))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    installed, fallback = proc.stdout.split("\n")[:2]
    assert installed.split() == [version] * len(imports)
    assert fallback.split() == [version] * len(imports)


@pytest.mark.parametrize("folder", PACKAGES)
def test_license_is_a_real_file(folder: str):
    """A symlink to ../../LICENSE goes into the sdist as a link that points outside it,
    which pip refuses to unpack: each package keeps a copy of the root LICENSE."""
    license_file = ROOT / "packages" / folder / "LICENSE"
    assert not license_file.is_symlink()
    assert license_file.read_bytes() == (ROOT / "LICENSE").read_bytes()


def test_readme_gives_the_install_commands_ci_runs():
    """The install_check session runs the README's two install commands; the test
    command that CI runs includes it."""
    noxfile = (ROOT / "noxfile.py").read_text()
    readme = (ROOT / "README.md").read_text()
    for constant in ("FULL_STACK", "RUNTIME_ALONE"):
        match = re.search(rf'^{constant} = "([^"]+)"$', noxfile, re.MULTILINE)
        assert match, constant
        assert f'pip install --find-links dist "{match.group(1)}"' in readme
        assert f'pip install "{match.group(1)}"' in readme
    test_command = readme.split("<!-- test-command -->", 1)[1].split("```", 2)[1]
    assert "install_check" in test_command.split("nox -s", 1)[1]


def test_demo_says_what_it_installs_and_shows_progress() -> None:
    """Issue 18, point 5: ``nox -s demo`` was silent for minutes while it downloaded.
    The session must say what it installs before the first install, let pip's progress
    through, and not ask for the tuner's extra (scikit-learn, SciPy)."""
    import ast

    tree = ast.parse((ROOT / "noxfile.py").read_text())
    demo = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "demo")
    calls = [n for n in ast.walk(demo) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr in ("log", "install")]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    assert calls and calls[0].func.attr == "log", "the demo installs before it says what"
    for install in (c for c in calls if c.func.attr == "install"):
        silent = {k.arg: k.value for k in install.keywords}.get("silent")
        assert isinstance(silent, ast.Constant) and silent.value is False, (
            "the demo's install hides pip's progress (silent=False expected)")
        assert "[tune]" not in ast.unparse(install), "the demo must leave the tuner out"
