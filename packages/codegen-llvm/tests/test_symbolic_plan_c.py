"""plan.c of a plan with symbols (plan_c.symbolic_source), end to end: the plan that
build._make_plan makes of a small graph with symbolic sizes, its plan.c generated, compiled
warnings-clean, linked by the export of the llvm plug-in with C stand-ins for the kernels
(they follow the kernel contract: the symbols' values come last), and run by the runtime
at several sizes against NumPy. The kernels are stand-ins so that this tests the plan and
the runtime, whatever symbolic lowering can do yet."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm import LLVMKernels
from tensorsmith.codegen.llvm.link import csrc_dir
from tensorsmith.codegen.llvm.plan_c import plan_source
from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.build import _make_plan, fused_groups
from tensorsmith.ir.symbolic import symbol
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.stmt import Buffer as TeBuffer
from tensorsmith.ir.te.stmt import PrimFunc, Seq

W = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)

#: The kernels of the graph below, by hand: h = relu(x @ w) (with a scratch buffer),
#: s = sum(h, axis 1), z2 = z * two. Each reads the symbols it uses from its last argument.
KERNELS = r"""
#include <stdint.h>
#define KERNEL __attribute__((visibility("hidden"))) void
KERNEL tsm_kernel_0(void **args) {
  const float *x = args[0], *w = args[1];
  float *h = args[2], *scratch = args[3];
  int64_t batch = ((const int64_t *)args[4])[0];
  for (int64_t b = 0; b < batch; ++b) {
    for (int j = 0; j < 8; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < 16; ++k) acc += x[b * 16 + k] * w[k * 8 + j];
      scratch[j] = acc;
      h[b * 8 + j] = scratch[j] > 0.0f ? scratch[j] : 0.0f;
    }
  }
}
KERNEL tsm_kernel_1(void **args) {
  const float *h = args[0];
  float *s = args[1];
  int64_t batch = ((const int64_t *)args[2])[0];
  for (int64_t b = 0; b < batch; ++b) {
    float acc = 0.0f;
    for (int j = 0; j < 8; ++j) acc += h[b * 8 + j];
    s[b] = acc;
  }
}
KERNEL tsm_kernel_2(void **args) {
  const float *z = args[0], *two = args[1];
  float *out = args[2];
  int64_t seq = ((const int64_t *)args[3])[0];
  for (int64_t i = 0; i < seq; ++i) out[i] = z[i] * two[0];
}
"""


def cc() -> str:
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.fail("no C compiler (cc or gcc): install gcc")
    return found


def symbolic_module():  # noqa: ANN201
    """The plan and weights of x[batch, 16] -> h = relu(x @ w), returned as [batch, 2, 4]
    and summed over axis 1; z[seq] -> z * 2; and stand-in kernels that fit it."""
    batch, seq = symbol("batch"), symbol("seq")
    b = GraphBuilder()
    x = b.input("x", (batch, 16), "float32")
    z = b.input("z", (seq,), "float32")
    h = b.add1("relu", [b.add1("matmul", [x, b.constant("w", W)])])
    outputs = [b.add1("reshape", [h], {"shape": [-1, 2, 4]}),
               b.add1("reduce_sum", [h], {"axes": [1], "keepdims": False}),
               b.add1("mul", [z, b.constant("two", np.array(2, np.float32))])]
    graph, groups, homes = fused_groups(b.finish(outputs), target="llvm")
    funcs = []
    for i, (g, names) in enumerate(zip(groups, [("batch",), ("batch",), ("seq",)], strict=True)):
        params = [TeBuffer(f"p{k}", (1,), "float32")
                  for k in range(len(g.inputs) + len(g.outputs) + (i == 0))]
        funcs.append(PrimFunc(f"tsm_kernel_{i}", params, Seq([]), len(g.inputs),
                              len(g.outputs), {"workload": f"w{i}", "symbols": names}))
    return _make_plan(graph, groups, funcs, Target.parse("llvm"), homes), funcs


def test_plan_c_of_a_symbolic_plan_is_warnings_clean(tmp_path: Path) -> None:
    (plan, _), _ = symbolic_module()
    source = plan_source(plan, plan.to_json(), 0, bytes(16))
    assert "static int compute_sizes(const int64_t *s, int64_t *v)" in source
    assert "tsm_size_mul(INT64_C(64), s[0], &bad)" in source  # x's bytes: 64*batch
    (tmp_path / "plan.c").write_text(source)
    result = subprocess.run(
        [cc(), "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-I", str(csrc_dir()),
         "-I", rt.get_include(), "-c", "plan.c", "-o", "plan.o"],
        cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_an_exported_symbolic_plan_runs_at_any_size(tmp_path: Path) -> None:
    (plan, params), funcs = symbolic_module()
    (tmp_path / "kernels.c").write_text(KERNELS)
    subprocess.run([cc(), "-O2", "-fPIC", "-std=c11", "-c", "kernels.c", "-o", "kernels.o"],
                   cwd=tmp_path, check=True)
    kernels = LLVMKernels(funcs, Target.parse("llvm"),
                          _objects=[(tmp_path / "kernels.o").read_bytes()])
    path = tmp_path / "dynamic.so"
    kernels.export(str(path), plan, params)
    rng = np.random.default_rng(0)
    with rt.load(path) as module:
        assert [i["shape"] for i in module.input_info] == [("batch", 16), ("seq",)]
        for batch, seq in [(1, 5), (3, 5), (8, 1), (3, 40), (1, 2), (8, 40)]:
            x = rng.standard_normal((batch, 16)).astype(np.float32)
            z = rng.standard_normal(seq).astype(np.float32)
            r, s, z2 = module.run({"x": x, "z": z})
            h = np.maximum(x @ W, 0)
            np.testing.assert_allclose(r, h.reshape(batch, 2, 4), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(s, h.sum(axis=1), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(z2, z * 2)
        with pytest.raises(rt.InputError, match=r"input 'x' has shape \(2, 15\) but the model "
                                                r"expects \[batch, 16\]"):
            module.run({"x": np.zeros((2, 15), np.float32)})
