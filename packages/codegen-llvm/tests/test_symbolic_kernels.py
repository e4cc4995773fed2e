"""Kernels with run-time sizes compiled for this CPU and run at several sizes.

Each graph's fused groups are lowered by the llvm target's default rules (the dynamic
ones, schedules/cpu_dynamic.py), compiled into one library with the thread pool and
called kernel by kernel with the sizes passed as the kernel ABI says (a pointer to
their int64 values after the buffers); the results are compared with the interpreter's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from llvm_kernel_testing import KernelLibrary, lower_graph, run_groups

from tensorsmith.codegen.llvm.compile_jobs import module_text
from tensorsmith.ir import GraphBuilder, run_graph, te
from tensorsmith.ir.graph import Graph, Value
from tensorsmith.ir.passes import default_pipeline
from tensorsmith.ir.passes.blocked_layout import block_layouts
from tensorsmith.ir.symbolic import evaluate, symbol

B, S, M, K, N = (symbol(n) for n in ("batch", "seq", "m", "k", "n"))
F = "float32"
rng = np.random.default_rng(11)
SIZES = [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 5}, {"batch": 3, "seq": 67}]

Inputs = Callable[[Mapping[str, int]], dict[str, np.ndarray]]


def data(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(F)


def check(graph: Graph, inputs: Inputs, sizes: Sequence[Mapping[str, int]] = SIZES,
          tol: float = 1e-4) -> list[Any]:
    """Run ``graph``'s kernels at each of ``sizes``; compare with the interpreter. Returns
    the kernels."""
    kernels = lower_graph(graph)
    assert any(f.attrs.get("symbols") for _, f in kernels)
    lib = KernelLibrary([f for _, f in kernels])
    try:
        for at in sizes:
            feeds = inputs(at)
            got = run_groups(lib, kernels, graph, feeds, at)
            want = run_graph(graph, feeds)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape, at
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(at))
    finally:
        lib.close()
    return kernels


# -- the kernel ABI -----------------------------------------------------------------------
def test_a_kernel_takes_its_sizes_after_its_buffers() -> None:
    """``attrs["symbols"]`` sorted; the kernel loads them from ``args[len(params)]``,
    once, and a parallel body loads them again from the ``args`` its closure carries."""
    x = te.placeholder((S, B, 8), name="x")
    y = te.compute((S, B, 8), lambda i, j, k: x[i, j, k] * 2.0 + te.cast(F, i * B + j), name="y")
    s = te.create_schedule(y)
    s.parallel(y, s.fuse(y, "y_i0", "y_i1"))
    s.vectorize(y, "y_i2")
    func = te.lower(s, [x], [y], "scaled")
    assert func.attrs["symbols"] == ("batch", "seq")
    text = module_text(func)
    assert 'getelementptr inbounds ptr, ptr %"args", i64 2' in text
    assert text.count('%"batch" = load i64') == 2  # the kernel and its parallel body
    lib = KernelLibrary([func])
    for seq, batch in ((1, 1), (3, 7), (40, 2)):
        xs = data(seq, batch, 8)
        (got,) = lib.run("scaled", [xs], {"batch": batch, "seq": seq})
        rows = np.arange(seq * batch, dtype=F).reshape(seq, batch, 1)
        np.testing.assert_allclose(got, xs * 2 + rows)
    static = te.placeholder((3, 8), name="x")
    plain = te.lower(te.create_schedule(t := te.compute((3, 8), lambda i, j: static[i, j],
                                                        name="t")), [static], [t], "plain")
    assert "symbols" not in plain.attrs and '"sizes"' not in module_text(plain)


# -- elementwise, reductions, normalisation --------------------------------------------------
def test_elementwise_with_broadcast() -> None:
    b = GraphBuilder()
    x, y, z = b.input("x", (B, S, 24), F), b.input("y", (B, 1, 24), F), b.input("z", (S, 1), F)
    out = b.add1("tanh", [b.add1("add", [b.add1("mul", [x, y]), z])])
    check(b.finish([out]), lambda at: {"x": data(at["batch"], at["seq"], 24),
                                      "y": data(at["batch"], 1, 24), "z": data(at["seq"], 1)})


@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_a_symbolic_last_axis(log: bool) -> None:
    b = GraphBuilder()
    out = b.add1("softmax", [b.input("x", (B, 3, S), F)], {"axis": -1, "log": log})
    check(b.finish([out]), lambda at: {"x": data(at["batch"], 3, at["seq"]) * 4})


def test_softmax_over_a_static_axis_of_symbolic_rows() -> None:
    b = GraphBuilder()
    out = b.add1("softmax", [b.input("x", (B, S, 10), F)], {"axis": 1})
    check(b.finish([out]), lambda at: {"x": data(at["batch"], at["seq"], 10)})


def layer_norm(b: GraphBuilder, x: Value, width: int, name: str) -> Value:
    mean = b.add1("reduce_mean", [x], {"axes": [-1], "keepdims": True}, name=f"{name}_mean")
    centered = b.add1("sub", [x, mean], name=f"{name}_c")
    var = b.add1("reduce_mean", [b.add1("mul", [centered, centered], name=f"{name}_sq")],
                 {"axes": [-1], "keepdims": True}, name=f"{name}_var")
    eps = b.constant(f"{name}_eps", np.array([1e-5], F))
    std = b.add1("sqrt", [b.add1("add", [var, eps], name=f"{name}_ve")], name=f"{name}_sd")
    y = b.add1("div", [centered, std], name=f"{name}_y")
    y = b.add1("mul", [y, b.constant(f"{name}_g", data(width))], name=f"{name}_scale")
    return b.add1("add", [y, b.constant(f"{name}_b", data(width))], name=f"{name}_out")


def test_layer_norm() -> None:
    b = GraphBuilder()
    out = layer_norm(b, b.input("x", (B, S, 96), F), 96, "ln")
    check(b.finish([out]), lambda at: {"x": data(at["batch"], at["seq"], 96)})


def test_reductions() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S, 24), F)
    outs = [b.add1("reduce_sum", [x], {"axes": [1], "keepdims": False}),
            b.add1("reduce_max", [x], {"axes": [2], "keepdims": True}),
            b.add1("reduce_mean", [x], {"axes": [0, 1], "keepdims": False}),
            b.add1("reduce_mean", [x], {"axes": None, "keepdims": False}),
            b.add1("relu", [b.add1("reduce_min", [x], {"axes": [1], "keepdims": True})])]
    check(b.finish(outs), lambda at: {"x": data(at["batch"], at["seq"], 24)})


# -- products ---------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [64, 2048])
def test_matmul_with_symbolic_rows_and_an_epilogue(depth: int) -> None:
    """``[m, K] x [K, 96]`` with a constant ``B`` (stored as panels), bias and ReLU fused
    into the tile's write-back; 2048 deep, the product would run in blocks of k, which
    keep partial sums in the output: the rule gives those up for the epilogue."""
    b = GraphBuilder()
    a, w = b.input("a", (M, depth), F), b.constant("w", data(depth, 96))
    product = b.add1("matmul", [a, w])
    out = b.add1("relu", [b.add1("add", [product, b.constant("bias", data(96))])])
    ((_, func),) = check(b.finish([out]), lambda at: {"a": data(at["m"], depth)},
                         [{"m": m} for m in (1, 5, 6, 7, 100)], tol=1e-3)
    kinds = [s[0] for s in func.attrs["steps"]]
    assert "fuse_epilogue" in kinds and "layout" in kinds
    assert func.scratch == []


def test_matmul_with_symbolic_depth_and_columns() -> None:
    b = GraphBuilder()
    out = b.add1("matmul", [b.input("a", (M, K), F), b.input("w", (K, N), F)])
    check(b.finish([out]), lambda at: {"a": data(at["m"], at["k"]), "w": data(at["k"], at["n"])},
          [{"m": 1, "k": 1, "n": 1}, {"m": 9, "k": 33, "n": 17}, {"m": 70, "k": 300, "n": 100}],
          tol=1e-3)


def test_matmul_over_a_symbolic_batch_of_rows() -> None:
    """``[batch, seq, 64] x [64, 80]``: the projections of a transformer."""
    b = GraphBuilder()
    out = b.add1("matmul", [b.input("x", (B, S, 64), F), b.constant("w", data(64, 80))])
    check(b.finish([out]), lambda at: {"x": data(at["batch"], at["seq"], 64)})


def test_attention() -> None:
    """``[batch, heads, seq, d] x [batch, heads, d, seq]``, scaled, masked, softmax, times
    ``V``: both products have symbolic rows, the first symbolic columns, the second a
    symbolic reduction."""
    b = GraphBuilder()
    q, k = b.input("q", (B, 4, S, 16), F), b.input("k", (B, 4, 16, S), F)
    v, mask = b.input("v", (B, 4, S, 16), F), b.input("mask", (B, 1, 1, S), F)
    scores = b.add1("mul", [b.add1("matmul", [q, k]), b.constant("scale", np.array(0.25, F))])
    probs = b.add1("softmax", [b.add1("add", [scores, mask])], {"axis": -1})
    out = b.add1("matmul", [probs, v])

    def inputs(at: Mapping[str, int]) -> dict[str, np.ndarray]:
        batch, seq = at["batch"], at["seq"]
        return {"q": data(batch, 4, seq, 16), "k": data(batch, 4, 16, seq),
                "v": data(batch, 4, seq, 16),
                "mask": np.where(rng.random((batch, 1, 1, seq)) < 0.2, -1e4, 0).astype(F)}

    check(b.finish([out]), inputs)


@pytest.mark.parametrize("kind", ["dense", "strided", "pointwise", "depthwise", "max_pool",
                                  "avg_pool"])
def test_convolutions_and_pooling_over_a_symbolic_batch(kind: str) -> None:
    b = GraphBuilder()
    x = b.input("x", (B, 8, 13, 13), F)
    if kind.endswith("pool"):
        out = b.add1("pool2d", [x], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "mode": kind[:3]})
    else:
        shape, attrs = {"dense": ((16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
                        "strided": ((16, 8, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
                        "pointwise": ((24, 8, 1, 1), {}),
                        "depthwise": ((8, 1, 3, 3), {"pads": [1, 1, 1, 1], "groups": 8})}[kind]
        out = b.add1("relu", [b.add1("conv2d", [x, b.constant("w", data(*shape))], attrs)])
    check(b.finish([out]), lambda at: {"x": data(at["batch"], 8, 13, 13)}, tol=1e-3)


# -- whole groups and other ops ----------------------------------------------------------
def bert_block(heads: int = 4, width: int = 64) -> Graph:
    """One encoder layer over ``[batch, seq, width]`` with a padding mask."""
    d = width // heads
    b = GraphBuilder()
    x, mask = b.input("x", (B, S, width), F), b.input("mask", (B, 1, 1, S), F)

    def dense(v: Value, n_in: int, n_out: int, name: str) -> Value:
        weight = (data(n_in, n_out) / np.sqrt(n_in)).astype(F)
        y = b.add1("matmul", [v, b.constant(f"{name}_w", weight)])
        return b.add1("add", [y, b.constant(f"{name}_b", data(n_out))], name=f"{name}_bias")

    def split_heads(v: Value, name: str, perm: list[int]) -> Value:
        v = b.add1("reshape", [v], {"shape": [0, 0, heads, -1], "allowzero": 0}, name=f"{name}_s")
        return b.add1("transpose", [v], {"perm": perm}, name=f"{name}_t")

    q = split_heads(dense(x, width, width, "q"), "q", [0, 2, 1, 3])
    k = split_heads(dense(x, width, width, "k"), "k", [0, 2, 3, 1])
    v = split_heads(dense(x, width, width, "v"), "v", [0, 2, 1, 3])
    scores = b.add1("mul", [b.add1("matmul", [q, k]),
                            b.constant("scale", np.array(1 / np.sqrt(d), F))])
    probs = b.add1("softmax", [b.add1("add", [scores, mask])], {"axis": -1})
    ctx = b.add1("transpose", [b.add1("matmul", [probs, v])], {"perm": [0, 2, 1, 3]})
    ctx = b.add1("reshape", [ctx], {"shape": [0, 0, width], "allowzero": 0})
    h = layer_norm(b, b.add1("add", [dense(ctx, width, width, "o"), x]), width, "ln1")
    up = dense(h, width, 4 * width, "up")
    gelu = b.add1("mul", [up, b.add1("sigmoid", [b.add1("mul", [
        up, b.constant("k", np.array(1.702, F))])])])
    out = layer_norm(b, b.add1("add", [dense(gelu, 4 * width, width, "down"), h]), width, "ln2")
    return b.finish([out])


def test_an_encoder_layer_after_the_graph_passes() -> None:
    graph = default_pipeline().run(bert_block())

    def inputs(at: Mapping[str, int]) -> dict[str, np.ndarray]:
        batch, seq = at["batch"], at["seq"]
        return {"x": data(batch, seq, 64),
                "mask": np.where(rng.random((batch, 1, 1, seq)) < 0.2, -1e4, 0).astype(F)}

    kernels = check(graph, inputs, tol=2e-3)
    assert all(not f.scratch for _, f in kernels)


H, W = symbol("h"), symbol("w")
I64 = "int64"
#: op, its inputs' shapes and dtypes, attributes: each op's compute over run-time sizes
OPS: list[tuple[str, list[tuple[tuple[Any, ...], str]], dict[str, Any]]] = [
    ("argmax", [((B, S, 24), F)], {"axis": 1, "keepdims": False}),
    ("argmin", [((B, S, 24), F)], {"axis": 2}),
    ("cumsum", [((B, S, 24), F)], {"axis": 1}),
    ("cumprod", [((B, S), F)], {"axis": 0, "reverse": 1}),
    ("topk", [((B, S, 24), F)], {"axis": -1, "k": 3}),
    ("transpose", [((B, S, 24), F)], {"perm": [2, 0, 1]}),
    ("reshape", [((B, S, 24), F)], {"shape": [0, 0, 4, 6], "allowzero": 0}),
    ("reshape", [((B, S, 24), F)], {"shape": [-1, 24]}),
    ("slice", [((B, S, 4), F)], {"begin": [0, 1, 0], "end": [B, S, 4], "step": [1, 2, 1]}),
    ("pad", [((B, S, 4), F)], {"before": [0, 1, 0], "after": [0, 2, 0]}),
    ("where", [((B, 1), "bool"), ((B, 4), F), ((4,), F)], {}),
    ("cast", [((B, S), F)], {"dtype": "int32"}),
    ("reduce_prod", [((B, S, 4), F)], {"axes": [0], "keepdims": False}),
    ("einsum", [((B, S, 4), F), ((4, 8), F)], {"equation": "bsi,ij->bsj"}),
    ("gather", [((B, S, 64), F), ((3,), I64)], {"axis": 1}),
    ("gather_elements", [((B, S, 4), F), ((B, S, 2), I64)], {"axis": 2}),
    ("gather_nd", [((B, S, 4), F), ((B, 5, 1), I64)], {"batch_dims": 1}),
    ("scatter_elements", [((B, S, 4), F), ((B, S, 2), I64), ((B, S, 2), F)], {"axis": 2}),
    ("scatter_nd", [((S, 4), F), ((B, 1), I64), ((B, 4), F)], {}),
    ("conv2d", [((B, 3, H, W), F), ((8, 3, 3, 3), F)], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("pool2d", [((B, 3, H, W), F)], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "mode": "max"}),
    ("pool2d", [((B, 3, H, W), F)], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "mode": "avg", "ceil_mode": True}),
]


@pytest.mark.parametrize("op,inputs,attrs", OPS, ids=[f"{c[0]}-{i}" for i, c in enumerate(OPS)])
def test_each_op(op: str, inputs: list[tuple[tuple[Any, ...], str]], attrs: dict[str, Any]
                 ) -> None:
    """Indices are 0 (in range along any axis); the rest random."""
    b = GraphBuilder()
    values = [b.input(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(inputs)]
    graph = b.finish(b.add(op, values, attrs))

    def feeds(at: Mapping[str, int]) -> dict[str, np.ndarray]:
        out = {}
        for v in values:
            shape = tuple(evaluate(d, at) for d in v.shape)
            out[v.name] = (np.zeros(shape, v.dtype) if v.dtype == I64 else rng.random(shape) < 0.5
                           if v.dtype == "bool" else data(*shape))
        return out

    check(graph, feeds, [{"batch": 1, "seq": 1, "h": 1, "w": 1},
                         {"batch": 3, "seq": 6, "h": 9, "w": 12}])


def test_embedding_lookup_and_concat() -> None:
    b = GraphBuilder()
    ids, cls = b.input("ids", (B, S), "int64"), b.input("cls", (B, 1, 16), F)
    emb = b.add1("gather", [b.constant("table", data(50, 16)), ids], {"axis": 0})
    out = b.add1("concat", [cls, emb], {"axis": 1})
    check(b.finish([out]), lambda at: {"ids": rng.integers(0, 50, (at["batch"], at["seq"])),
                                      "cls": data(at["batch"], 1, 16)})


# -- channel-blocked windows over a symbolic batch ----------------------------------------
def blocked_net(batch: Any, image: Any = 28) -> Graph:
    """A small CNN over channel-blocked activations (passes/blocked_layout.py, blocks of
    8): a stem from three plain channels, a max pool, 3x3 convolutions of 64 channels
    that run Winograd F(4x4) and, at half the image, F(2x2) (:func:`default_transforms`),
    a strided 3x3 and a strided 1x1 shortcut, a residual add, depthwise convolutions at
    strides 1 and 2, an average pool and a global average pool read back as NCHW."""
    b = GraphBuilder()
    x = b.input("x", (batch, 3, image, image), F)

    def conv(v: Value, shape: tuple[int, ...], name: str, relu: bool = True,
             **attrs: Any) -> Value:
        w = (data(*shape) / np.sqrt(np.prod(shape[1:]))).astype(F)
        y = b.add1("conv2d", [v, b.constant(f"{name}_w", w)], attrs, name=name)
        y = b.add1("add", [y, b.constant(f"{name}_b", data(shape[0], 1, 1))])
        return b.add1("relu", [y]) if relu else y

    h = conv(x, (64, 3, 3, 3), "stem", pads=[1, 1, 1, 1])
    h = b.add1("pool2d", [h], {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                               "mode": "max"})
    h = conv(h, (64, 64, 3, 3), "f4", pads=[1, 1, 1, 1])
    s = conv(h, (64, 64, 3, 3), "down", pads=[1, 1, 1, 1], strides=[2, 2])
    s = conv(s, (64, 64, 3, 3), "f2", relu=False, pads=[1, 1, 1, 1])
    r = b.add1("relu", [b.add1("add", [s, conv(h, (64, 64, 1, 1), "short", relu=False,
                                                strides=[2, 2])])])
    d = conv(r, (64, 1, 3, 3), "dw1", pads=[1, 1, 1, 1], groups=64)
    d = conv(d, (64, 1, 3, 3), "dw2", pads=[1, 1, 1, 1], groups=64, strides=[2, 2])
    d = b.add1("pool2d", [d], {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                               "mode": "avg"})
    gap = b.add1("reduce_mean", [d], {"axes": [2, 3], "keepdims": True})
    return b.finish([gap, r])


def test_blocked_windows_over_a_symbolic_batch_run_as_the_static_kernels_of_one_image() -> None:
    """Every window kernel is the static one of a single image with the images fused into
    its parallel loop: the same steps (Winograd's included), padded inputs in scratch of
    run-time size; results equal to the interpreter's at batch 1, 3 and 8."""
    graph = block_layouts(blocked_net(B), 8)
    assert '"block": 8' in str(graph) and "float32[batch, 8, 28, 28, 8]" in str(graph)
    kernels = check(graph, lambda at: {"x": data(at["batch"], 3, 28, 28)},
                    [{"batch": 1}, {"batch": 3}, {"batch": 8}], tol=1e-3)
    static = lower_graph(block_layouts(blocked_net(1), 8))
    transforms = set()
    for (group, func), (_, one) in zip(kernels, static, strict=True):
        if not any(n.op in ("conv2d", "pool2d") for n in group.nodes):
            continue
        assert func.attrs["steps"] == one.attrs["steps"], group.nodes[0].name
        transforms |= {s[2][3] for s in func.attrs["steps"] if s[0] == "layout" and len(s[2]) > 3}
    assert transforms == {"winograd_f4_3", "winograd_f2_3"}
    padded = [b for _, f in kernels for b in f.scratch if "pad" in b.name]
    assert padded and all(str(b.shape[0]) == "batch" for b in padded)


def test_blocked_windows_over_a_symbolic_image() -> None:
    """Run-time image sizes are blocked too (the layout only reorders channels); their
    kernels keep the register tiles sized on the stand-in graph."""
    graph = block_layouts(blocked_net(B, H), 8)
    assert '"block": 8' in str(graph)
    check(graph, lambda at: {"x": data(at["batch"], 3, at["h"], at["h"])},
          [{"batch": 1, "h": 9}, {"batch": 2, "h": 16}], tol=1e-3)
