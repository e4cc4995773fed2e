"""Drives the tensorsmith monorepo: tests, wheels, runtime-only and composition checks,
lint, type checks, the demo and benchmarks.

    nox                      # = nox -s tests
    nox -s demo              # compile and run the example model with the `tensorsmith` command
    nox -s lint tests runtime_only compose
    nox -s test-ir -- -k passes    # one package's tests, with pytest arguments
    nox -s fuzz -- --cases 200 --seed 1   # the fuzz campaigns (tests/fuzz)
    nox -l                   # list the sessions

Sessions install the packages from packages/<folder>; nothing has to be installed
beforehand except nox itself (and a C compiler, `cc`, which links CPU artifacts).
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
ROOT = Path(__file__).resolve().parent

# folder -> (distribution, import path under src/, local distributions it depends on)
PACKAGES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "runtime": ("tensorsmith-runtime", "tensorsmith/runtime", ()),
    "ir": ("tensorsmith-ir", "tensorsmith/ir", ("runtime",)),
    "frontend-onnx": ("tensorsmith-frontend-onnx", "tensorsmith/frontend/onnx", ("ir",)),
    "codegen-llvm": ("tensorsmith-codegen-llvm", "tensorsmith/codegen/llvm", ("ir",)),
    "codegen-spirv": ("tensorsmith-codegen-spirv", "tensorsmith/codegen/spirv", ("ir",)),
    "codegen-opencl": ("tensorsmith-codegen-opencl", "tensorsmith/codegen/opencl", ("ir",)),
    "autotune": ("tensorsmith-autotune", "tensorsmith/autotune", ("ir",)),
    "tensorsmith": (
        "tensorsmith",
        "tensorsmith/cli",
        (
            "runtime",
            "ir",
            "frontend-onnx",
            "codegen-llvm",
            "codegen-spirv",
            "codegen-opencl",
            "autotune",
        ),
    ),
}
# entry points each wheel must declare: (group, name, value)
ENTRY_POINTS = {
    "codegen-llvm": ("tensorsmith.codegen", "llvm", "tensorsmith.codegen.llvm:codegen"),
    "codegen-spirv": ("tensorsmith.codegen", "vulkan", "tensorsmith.codegen.spirv:codegen"),
    "codegen-opencl": ("tensorsmith.codegen", "opencl", "tensorsmith.codegen.opencl:codegen"),
    "tensorsmith": ("console_scripts", "tensorsmith", "tensorsmith.cli.main:main"),
}
NAMESPACES = ("tensorsmith", "tensorsmith/frontend", "tensorsmith/codegen")
# onnx is pinned: the conformance record is tied to it; ziglang cross-links the aarch64 tests
TEST_DEPS = ["pytest>=8", "pytest-xdist", "pytest-timeout", "onnxruntime", "distributed",
             "onnx==1.23.2", "hypothesis", "ziglang"]
# extras of the runtime the test sessions install, so the vulkan/opencl tests can run
RUNTIME_EXTRAS = "[vulkan,opencl]"


def _closure(folders: list[str]) -> list[str]:
    """The folders plus all local packages they depend on, in dependency order."""
    seen: list[str] = []

    def visit(folder: str) -> None:
        for dep in PACKAGES[folder][2]:
            visit(dep)
        if folder not in seen:
            seen.append(folder)

    for folder in folders:
        visit(folder)
    return seen


def _specs(folders: list[str], *, editable: bool, runtime_extras: str = "") -> list[str]:
    args: list[str] = []
    for folder in folders:
        spec = f"packages/{folder}" + (runtime_extras if folder == "runtime" else "")
        args += ["-e", spec] if editable else [spec]
    return args


def install_stack(session: nox.Session, *, editable: bool = True, extras: str = "") -> None:
    """Install all eight distributions in one pip call."""
    session.install(*_specs(list(PACKAGES), editable=editable, runtime_extras=extras))


def _test_paths() -> list[str]:
    paths = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("packages/*/tests") if p.is_dir())
    if (ROOT / "tests").is_dir():
        paths.append("tests")
    return paths


def _fresh_venv(session: nox.Session, where: Path) -> Path:
    """A brand-new virtual environment made with `python -m venv` (not one of nox's)."""
    if where.exists():
        shutil.rmtree(where)
    session.run("python", "-m", "venv", str(where))
    python = where / "bin" / "python"
    session.run(str(python), "-m", "pip", "install", "-q", "--upgrade", "pip", external=True)
    return python


def _need_cc(session: nox.Session) -> None:
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        session.error(
            "no C compiler found: linking CPU artifacts needs `cc` "
            "(on Debian: apt-get install -y gcc)"
        )


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """All tests: every package's tests/ and the cross-package tests in tests/."""
    install_stack(session, editable=True, extras=RUNTIME_EXTRAS)
    session.install(*TEST_DEPS)
    session.run("pytest", "-n", "2", *(session.posargs or _test_paths()))


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """The seeded fuzz campaigns of tests/fuzz (mutated ONNX models, damaged artifacts,
    tampered records, runtime misuse): a summary table, and each case that crashed, hung,
    raised an internal error or computed a wrong result, with the seed that replays it.
    Arguments go to the runner: -- --cases 200 --seed 1, or -- --replay onnx:1000017."""
    _need_cc(session)
    install_stack(session, editable=True, extras=RUNTIME_EXTRAS)
    session.install(*TEST_DEPS)
    session.run("python", "-m", "fuzz", *session.posargs, env={"PYTHONPATH": str(ROOT / "tests")})


def _package_tests(folder: str):
    @nox.session(name=f"test-{folder}", python=PYTHON)
    def package_tests(session: nox.Session) -> None:
        tests_dir = f"packages/{folder}/tests"
        if not (ROOT / tests_dir).is_dir():
            session.skip(f"{tests_dir} does not exist")
        deps = _closure([folder])
        session.install(*_specs(deps, editable=True, runtime_extras=RUNTIME_EXTRAS))
        session.install(*TEST_DEPS)
        session.run("pytest", tests_dir, *session.posargs)

    package_tests.__doc__ = f"Tests of {PACKAGES[folder][0]} alone (packages/{folder}/tests)."
    return package_tests


for _folder in PACKAGES:
    _package_tests(_folder)


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Cross-package tests (tests/ at the root) against the full stack."""
    install_stack(session, editable=True, extras=RUNTIME_EXTRAS)
    session.install(*TEST_DEPS)
    session.run("pytest", "tests/", *session.posargs)


def check_wheel(wheel: Path, folder: str) -> list[str]:
    """Problems with one wheel: files outside its own subpackage, namespace __init__.py
    files, source files (data included) missing, entry points missing, no LICENSE or
    py.typed."""
    sub = PACKAGES[folder][1]
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = [n for n in names if n.split("/")[0].endswith(".dist-info")]
        entry_points = next((n for n in dist_info if n.endswith("/entry_points.txt")), None)
        ep_text = zf.read(entry_points).decode() if entry_points else ""
    files = [n for n in names if n not in dist_info]
    for name in files:
        if not name.startswith(sub + "/"):
            problems.append(f"{wheel.name}: {name} is outside {sub}/")
        if any(name == f"{ns}/__init__.py" for ns in NAMESPACES):
            problems.append(f"{wheel.name}: ships namespace {name}")
    src = ROOT / "packages" / folder / "src"
    for path in sorted((src / sub).rglob("*")):
        rel = path.relative_to(src).as_posix()
        generated = "__pycache__" in rel or rel.endswith((".pyc", ".so"))
        if path.is_file() and not generated and rel not in files:
            problems.append(f"{wheel.name}: missing {rel}")
    if not any(n.endswith("/__init__.py") and n.count("/") == sub.count("/") + 1 for n in files):
        problems.append(f"{wheel.name}: no {sub}/__init__.py")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in dist_info):
        problems.append(f"{wheel.name}: no LICENSE in its .dist-info")
    if f"{sub}/py.typed" not in files:
        problems.append(f"{wheel.name}: no {sub}/py.typed")
    if folder in ENTRY_POINTS:
        group, ep_name, value = ENTRY_POINTS[folder]
        if f"[{group}]" not in ep_text or f"{ep_name} = {value}" not in ep_text:
            problems.append(f"{wheel.name}: entry point [{group}] {ep_name} = {value} missing")
    return problems


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build the eight wheels into dist/ and check what each one holds."""
    dist = ROOT / "dist"
    dist.mkdir(exist_ok=True)
    for old in dist.glob("tensorsmith*.whl"):
        old.unlink()
    for folder in PACKAGES:
        session.run(
            "python", "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), f"packages/{folder}"
        )
    wheels = sorted(dist.glob("tensorsmith*.whl"))
    if len(wheels) != len(PACKAGES):
        session.error(f"expected {len(PACKAGES)} wheels in dist/, found {len(wheels)}")
    problems: list[str] = []
    for folder, (dist_name, _, _) in PACKAGES.items():
        prefix = dist_name.replace("-", "_") + "-"
        matches = [w for w in wheels if w.name.startswith(prefix)]
        if len(matches) != 1:
            problems.append(f"expected one wheel of {dist_name}, found {matches}")
            continue
        problems += check_wheel(matches[0], folder)
        with zipfile.ZipFile(matches[0]) as zf:
            count = len([n for n in zf.namelist() if ".dist-info/" not in n])
        session.log(f"{matches[0].name}: {count} files, all under {PACKAGES[folder][1]}/")
    if problems:
        session.error("wheel contents are wrong:\n  " + "\n  ".join(problems))
    session.log(f"{len(wheels)} wheels in dist/, namespaces correct")


@nox.session(python=PYTHON)
def runtime_only(session: nox.Session) -> None:
    """Build an artifact with the full stack, then run it where only the runtime wheel
    (and numpy) is installed, in a fresh virtual environment."""
    _need_cc(session)
    install_stack(session, editable=True)
    session.install("onnxruntime")
    tmp = Path(session.create_tmp()).resolve()
    outdir = tmp / "artifacts"
    if outdir.exists():
        shutil.rmtree(outdir)
    session.run("python", "tests/runtime_only/make_artifacts.py", str(outdir))

    wheels = tmp / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    session.run(
        "python", "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), "packages/runtime"
    )
    (wheel,) = wheels.glob("tensorsmith_runtime-*.whl")
    python = _fresh_venv(session, tmp / "runtime-only-venv")
    session.run(str(python), "-m", "pip", "install", "-q", str(wheel), "numpy", external=True)
    session.run(str(python), "-m", "pip", "list", external=True)
    # -I: isolated, so neither the repository nor PYTHONPATH leaks into the check
    session.run(
        str(python),
        "-I",
        str(ROOT / "tests/runtime_only/check_runtime_only.py"),
        str(outdir),
        external=True,
    )
    # Second pass: the runtime with its `vulkan` extra (on Mesa's lavapipe in CI).
    python = _fresh_venv(session, tmp / "runtime-vulkan-venv")
    session.run(str(python), "-m", "pip", "install", "-q", f"{wheel}[vulkan]", "numpy",
                external=True)
    session.run(
        str(python),
        "-I",
        str(ROOT / "tests/runtime_only/check_runtime_only.py"),
        str(outdir),
        "mlp-vulkan.tsm",
        "vulkan",
        external=True,
    )


@nox.session(python=PYTHON)
def compose(session: nox.Session) -> None:
    """runtime + ir + frontend-onnx + codegen-llvm alone, in a fresh virtual environment:
    llvm works, and vulkan says which distribution to install."""
    _need_cc(session)
    tmp = Path(session.create_tmp()).resolve()
    python = _fresh_venv(session, tmp / "compose-venv")
    session.run(
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        *_specs(["runtime", "ir", "frontend-onnx", "codegen-llvm"], editable=False),
        "onnx",
        external=True,
    )
    session.run(str(python), "-m", "pip", "list", external=True)
    session.run(str(python), "-I", str(ROOT / "tests/compose/check_compose.py"), external=True)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check over the whole tree (rules in pyproject.toml)."""
    session.install("ruff")
    session.run("ruff", "check", ".", *session.posargs)


@nox.session(name="format", python=PYTHON)
def format_(session: nox.Session) -> None:
    """ruff format --check (not part of CI yet: not all code is ruff-formatted)."""
    session.install("ruff")
    session.run("ruff", "format", "--check", *(session.posargs or ["."]))


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy over tensorsmith-ir and tensorsmith-runtime (configured in pyproject.toml)."""
    session.install(*_specs(["runtime", "ir"], editable=True))
    session.install("mypy")
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Install the full stack and compile, run and check the example MLP with the CLI."""
    _need_cc(session)
    session.log("installing the eight tensorsmith distributions and what they need (numpy, "
                "onnx, llvmlite, scikit-learn, onnxruntime for the check, ...): a few minutes "
                "and several hundred MB on a first run; pip's progress follows")
    session.install(
        *_specs([f for f in PACKAGES if f != "tensorsmith"], editable=False),
        "packages/tensorsmith[compare]",
        silent=False,
    )
    tmp = Path(session.create_tmp()).resolve()
    artifact = str(tmp / "mlp.so")
    session.log("compiling examples/mlp.onnx for the CPU, running it, checking it against "
                "ONNX Runtime")
    session.run("tensorsmith", "--version")
    session.run(
        "tensorsmith",
        "compile",
        "examples/mlp.onnx",
        "--target",
        "llvm",
        "--input-shape",
        "input:1,784",
        "-o",
        artifact,
    )
    session.run("tensorsmith", "run", artifact, "--device", "cpu", "--repeat", "20")
    session.run("python", "examples/check_mlp.py", artifact)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks (bench/run.py) against the full stack."""
    script = ROOT / "bench" / "run.py"
    if not script.is_file():
        session.skip("bench/run.py does not exist yet: no benchmarks to run")
    _need_cc(session)
    install_stack(session, editable=False)
    session.install("onnxruntime")
    session.run("python", str(script), *session.posargs)
