"""The `tensorsmith` command, run as a subprocess (`python -m tensorsmith.cli.main`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.onnx"
BATCH = 4


def tsm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tensorsmith.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "error:" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


# --- what needs only the cli package -------------------------------------------------


def test_help_lists_commands_and_examples():
    proc = tsm("--help")
    assert proc.returncode == 0, proc.stderr
    for word in ("compile", "run", "examples:"):
        assert word in proc.stdout


@pytest.mark.parametrize("command", ["compile", "run", "tune", "inspect", "compare", "quantize",
                                     "devices"])
def test_subcommand_help_has_an_example(command):
    proc = tsm(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "examples:" in proc.stdout
    assert f"tensorsmith {command} " in proc.stdout


@pytest.mark.vulkan
def test_devices_prints_each_devices_target_string():
    import json

    proc = tsm("devices", "--json")
    assert proc.returncode == 0, proc.stderr
    devices = json.loads(proc.stdout)
    assert devices and all(d["target"].startswith("vulkan") for d in devices)
    assert {"cooperative_matrix", "subgroup_size", "shared_memory_bytes"} <= set(devices[0])
    text = tsm("devices").stdout
    assert "cooperative matrices:" in text and "target: vulkan" in text


def test_help_documents_exit_codes():
    out = tsm("--help").stdout
    assert "exit status" in out and "3 'compare'" in out
    assert "exit status: 0 all outputs match, 3" in tsm("compare", "--help").stdout


def test_help_does_not_import_the_compiler():
    code = (
        "import sys\n"
        "from tensorsmith.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('onnx', 'llvmlite', 'tensorsmith.ir', 'sklearn')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_version_lists_installed_distributions():
    proc = tsm("--version")
    assert proc.returncode == 0, proc.stderr
    assert "tensorsmith" in proc.stdout


def test_no_command_is_a_usage_error():
    proc = tsm()
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_missing_model_file(tmp_path):
    proc = tsm("compile", tmp_path / "nope.onnx", "-o", tmp_path / "x.so")
    assert_user_error(proc, "nope.onnx", "does not exist")


def test_missing_artifact_file(tmp_path):
    assert_user_error(tsm("run", tmp_path / "nope.so"), "nope.so", "does not exist")


@pytest.mark.parametrize("bad", ["input", "input:1,x", "input:0,784", ":1,2", "input:[1,x]",
                                 "input:[1,784", "input:1,784]"])
def test_bad_input_shape_is_a_usage_error(tmp_path, bad):
    proc = tsm("compile", MLP, "--input-shape", bad, "-o", tmp_path / "x.so")
    assert proc.returncode == 2
    assert "--input-shape" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("text", "parsed"), [
    ("input:1,3,224,224", [("input", (1, 3, 224, 224))]),
    ("input:[1,3,224,224]", [("input", (1, 3, 224, 224))]),  # tvmc
    ("a:[1, 3] b:[2]", [("a", (1, 3)), ("b", (2,))]),         # tvmc, several in one value
    ("ns:x:[4]", [("ns:x", (4,))]),
    ("s:[]", [("s", ())]),
])
def test_input_shape_forms(text, parsed):
    from tensorsmith.cli.compile_cmd import parse_input_shape

    assert parse_input_shape(text) == parsed


@pytest.mark.parametrize(("text", "parsed"), [("batch=8", ("batch", 8)),
                                              (" seq = 128 ", ("seq", 128)),
                                              ("a=b=2", ("a=b", 2)),
                                              ("batch=1..64", ("batch", (1, 64))),
                                              ("n = 4..4", ("n", (4, 4)))])
def test_dim_forms(text, parsed):
    from tensorsmith.cli.dims import parse_dim

    assert parse_dim(text) == parsed


@pytest.mark.parametrize("bad", ["batch", "=8", "batch=x", "batch=0", "batch=8..2",
                                 "batch=0..4", "batch=1..x"])
def test_bad_dim_is_a_usage_error(tmp_path, bad):
    proc = tsm("compile", MLP, "--dim", bad, "-o", tmp_path / "x.so")
    assert proc.returncode == 2
    assert "--dim" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dim_the_model_does_not_have(tmp_path):
    proc = tsm("compile", MLP, "--dim", "batch=2", "-o", tmp_path / "x.so")
    assert_user_error(proc, "dimension 'batch', which no input of the model has",
                      "its symbolic dimensions: N")


def test_tvmc_input_shapes_spelling(tmp_path):
    """tvmc's `--input-shapes "input:[4,784]"` compiles the same model as ours."""
    out = tmp_path / "tvmc.so"
    proc = tsm("compile", MLP, "--input-shapes", f"input:[{BATCH},784]", "-o", out)
    assert proc.returncode == 0, proc.stderr
    import tensorsmith.runtime as rt

    with rt.load(out) as m:
        assert list(m.input_info[0]["shape"]) == [BATCH, 784]


def test_tune_closing_hint_compiles_as_printed(tmp_path):
    """The `apply them:` line of `tune` carries the model's input shapes and target, so
    it runs as printed (it used to omit --input-shape and exit 2)."""
    import argparse
    import shlex
    import shutil

    from tensorsmith.cli.tune_cmd import compile_command

    model = tmp_path / "mlp.onnx"
    shutil.copy(MLP, model)
    records = tmp_path / "r.jsonl"
    records.write_text("")
    args = argparse.Namespace(model=str(model), target="llvm", opt_level=2,
                              input_shape=[("input", (BATCH, 784))])
    hint = compile_command(args, records)
    assert f"--input-shape input:{BATCH},784" in hint
    proc = tsm(*shlex.split(hint)[1:])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mlp.so").exists()


def test_output_folder_must_exist(tmp_path):
    proc = tsm("compile", MLP, "-o", tmp_path / "no" / "such" / "dir" / "x.so")
    assert_user_error(proc, "does not exist")


# --- what needs the whole stack -------------------------------------------------------


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "mlp.so"
    proc = tsm("compile", MLP, "--target", "llvm", "--input-shape", f"input:{BATCH},784", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.is_file()
    assert "compiled" in proc.stdout
    return out


def test_compile_and_run_match_onnxruntime(compiled, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(7).standard_normal((BATCH, 784)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    proc = tsm(
        "run",
        compiled,
        "--device",
        "cpu",
        "--inputs",
        tmp_path / "in.npz",
        "--outputs",
        tmp_path / "out.npz",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output" in proc.stdout and "float32" in proc.stdout
    with np.load(tmp_path / "out.npz") as data:
        assert data.files == ["output"]
        got = data["output"]
    session = ort.InferenceSession(str(MLP), providers=["CPUExecutionProvider"])
    (want,) = session.run(["output"], {"input": x})
    assert got.shape == want.shape == (BATCH, 10)
    assert np.max(np.abs(got - want)) <= 1e-4


def test_dim_fixes_a_named_dimension(tmp_path):
    """--dim N=4 sizes the MLP's batch as --input-shape input:4,784 does."""
    out = tmp_path / "mlp.so"
    proc = tsm("compile", MLP, "--dim", f"N={BATCH}", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import tensorsmith.runtime as rt

    with rt.load(out) as m:
        assert list(m.input_info[0]["shape"]) == [BATCH, 784]


def test_compile_verbose_prints_pass_times_and_kernels(tmp_path):
    out = tmp_path / "mlp.so"
    proc = tsm("compile", MLP, "--input-shape", "input:1,784", "-o", out, "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    timed = {line.split()[0] for line in lines if line.endswith(" ms")}
    # phases, every graph pass of the default pipeline, lowering and code generation
    assert {"import", "build", "export", "fold_constants", "eliminate_dead_code"} <= timed
    assert {"lower", "codegen"} <= timed
    assert "kernels (4)" in proc.stdout
    # named as inspect, run --profile and tune name kernels (test_kernel_names.py)
    assert re.search(r"fused_matmul_add_relu#[0-9a-f]{4}  matmul\+add\+relu  \[fc1, add1, "
                     r"relu1\]", proc.stdout), proc.stdout


@pytest.mark.parametrize("precision,tolerance", [("fp16", 2e-3), ("bf16", 1e-2)])
def test_compile_precision_halves_the_weights(compiled, tmp_path, precision, tolerance):
    """--precision stores the weights in 16 bits (the MLP's artifact is mostly weights)
    and the outputs stay float32, within the type's tolerance of the float32 build."""
    out = tmp_path / f"mlp_{precision}.so"
    proc = tsm("compile", MLP, "--input-shape", f"input:{BATCH},784", "-o", out,
               "--precision", precision, "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reduce_precision" in proc.stdout
    assert out.stat().st_size < 0.6 * compiled.stat().st_size
    import tensorsmith.runtime as rt

    x = np.random.default_rng(8).standard_normal((BATCH, 784)).astype(np.float32)
    with rt.load(out) as half, rt.load(compiled) as full:
        (got,), (want,) = half.run({"input": x}), full.run({"input": x})
    assert got.dtype == np.float32
    assert 0 < np.abs(got - want).max() <= tolerance * np.abs(want).max()


def test_compile_unknown_precision_is_a_user_error(tmp_path):
    proc = tsm("compile", MLP, "--input-shape", "input:1,784", "-o", tmp_path / "m.so",
               "--precision", "int3")
    assert_user_error(proc, "precision 'int3'", "fp32, fp16, bf16")


def test_run_random_inputs_and_repeat(compiled):
    proc = tsm("run", compiled, "--device", "cpu", "--repeat", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "random inputs" in proc.stdout
    assert f"float32[{BATCH},10]" in proc.stdout
    assert "median" in proc.stdout and "min" in proc.stdout and "ms" in proc.stdout


def test_run_npz_missing_input(compiled, tmp_path):
    np.savez(tmp_path / "in.npz", not_the_input=np.zeros((BATCH, 784), np.float32))
    proc = tsm("run", compiled, "--inputs", tmp_path / "in.npz")
    assert_user_error(proc, "missing 'input'", "unknown 'not_the_input'")


def test_run_npz_wrong_shape(compiled, tmp_path):
    np.savez(tmp_path / "in.npz", input=np.zeros((BATCH + 1, 784), np.float32))
    assert_user_error(tsm("run", compiled, "--inputs", tmp_path / "in.npz"), "shape")


def test_run_inputs_not_npz(compiled, tmp_path):
    (tmp_path / "in.npz").write_text("hello")
    assert_user_error(tsm("run", compiled, "--inputs", tmp_path / "in.npz"), "in.npz")


def test_compile_non_onnx_file(tmp_path):
    bogus = tmp_path / "model.onnx"
    bogus.write_text("this is not an ONNX model\n")
    assert_user_error(tsm("compile", bogus, "-o", tmp_path / "x.so"))


def test_run_file_that_is_not_an_artifact(tmp_path):
    bogus = tmp_path / "model.so"
    bogus.write_bytes(b"\x7fELF but not really" + bytes(100))
    assert_user_error(tsm("run", bogus))
    (tmp_path / "empty.so").write_bytes(b"")
    assert_user_error(tsm("run", tmp_path / "empty.so"))


@pytest.mark.parametrize(
    ("target", "fragment"),
    [("llvm -mtripel=aarch64-linux-gnu", "-mtripel"), ("llvm -mcpu=not-a-cpu", "-mcpu=not-a-cpu"),
     ("llvm -mattr=avx2", "-mattr=avx2")],
)  # fmt: skip
def test_compile_bad_llvm_target_option_is_a_user_error(tmp_path, target, fragment):
    proc = tsm("compile", MLP, "--target", target, "--input-shape", "input:1,784",
               "-o", tmp_path / "x.so")  # fmt: skip
    assert_user_error(proc, fragment)
    assert not (tmp_path / "x.so").exists()


#: CPUs with extensions some test host lacks, each by the features that tell: Sapphire
#: Rapids (AMX, AVX512-FP16) is newer than the AVX2 hosts; on a host that has those, an
#: older AMD design (FMA4, XOP) still has what no Intel CPU has.
NEWER_CPUS = (("sapphirerapids", ("amx-tile", "avx512fp16")), ("bdver4", ("fma4", "xop")))


def test_run_refuses_an_artifact_for_a_newer_cpu(tmp_path):
    """Built for a CPU with extensions this one lacks, `run` says what is missing and how to
    build for this CPU, where the kernels would die of SIGILL."""
    from tensorsmith.runtime.cpu_features import host_flags, missing_features

    flags = host_flags()
    assert flags is not None
    cpu, lacking = next((cpu, missing) for cpu, features in NEWER_CPUS
                        if (missing := missing_features(features, flags)))
    out = tmp_path / "mlp.so"
    proc = tsm("compile", MLP, "--target", f"llvm -mcpu={cpu}", "--input-shape",
               "input:1,784", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_user_error(tsm("run", out), "CPU features this machine lacks", lacking[0], "-mcpu=")


def test_a_model_compiled_without_shapes_runs_at_the_sizes_given(tmp_path):
    """Without --input-shape or --dim the MLP's batch N stays symbolic: inspect names it,
    run asks for its size, and --dim gives the random inputs theirs."""
    out = tmp_path / "dynamic.so"
    proc = tsm("compile", MLP, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = tsm("inspect", out)
    assert shown.returncode == 0, shown.stderr
    assert "input float32[N,784]" in shown.stdout and "symbols    N" in shown.stdout
    assert_user_error(tsm("run", out), "input 'input' has shape [N, 784]", "--dim N=1")
    ran = tsm("run", out, "--dim", "N=3")
    assert ran.returncode == 0, ran.stderr
    assert "float32[3,10]" in ran.stdout
    assert_user_error(tsm("run", out, "--dim", "N=1..4"), "a range is for compile", "N=4")


def test_a_range_keeps_the_size_open_and_sizes_the_kernels_for_it(tmp_path):
    out = tmp_path / "small.so"
    proc = tsm("compile", MLP, "--dim", "N=1..4", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "symbols    N" in tsm("inspect", out).stdout
    for n in ("2", "40"):  # inside and outside the range: both run
        ran = tsm("run", out, "--dim", f"N={n}")
        assert ran.returncode == 0, ran.stderr
        assert f"float32[{n},10]" in ran.stdout
    assert_user_error(tsm("compile", MLP, "--dim", "batch=1..4", "-o", out),
                      "size hints for 'batch', which the model does not have", "'N'")
