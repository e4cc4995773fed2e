"""``build``: a graph (and its weights) in, a compiled module out.

The steps: bind the given params, run the graph passes, fuse, lower each group with the
target's default schedule, plan memory, generate code with the target's codegen plug-in.
The execution plan (tensorsmith.runtime.plan.Plan: buffers, steps, inputs, outputs,
checks) is plain data, the same for every target; the codegen decides how kernels and
plan are packed into the artifact.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorsmith.runtime.kernel_names import kernel_label
from tensorsmith.runtime.layouts import to_stored
from tensorsmith.runtime.plan import (
    Assumption,
    Buffer,
    Check,
    ComputedSize,
    CountedSize,
    Kernel,
    Plan,
    Step,
    Tensor,
)

from .codegen import get_codegen, gpu_resources, target_resources
from .errors import ModelError, TargetError
from .graph import Graph, Node, Value
from .host_sizes import expr_symbols
from .lowering import default_transforms, lower_group, workload_key
from .module import CompiledModule
from .passes import (
    ConcatViews,
    FusedGroup,
    View,
    concat_views,
    default_pipeline,
    fuse_ops,
    plan_memory,
)
from .passes.blocked_layout import block_layouts
from .passes.index_checks import add_index_checks
from .passes.integer_products import IntegerProducts
from .passes.memory_plan import ALIGN
from .passes.pointwise_convs import TakesProduct, pointwise_as_matmul
from .passes.precision import precision_dtype, reduce_precision, widen_inputs_first
from .records import applicable_steps
from .schedules import default_schedule
from .schedules.gpu_coop import takes_matmul
from .schedules.proxy import sized_for
from .symbolic import Dim, Sym, free_symbols
from .target import Target, activation_layout
from .te.stmt import PrimFunc


def build(mod: Graph, target: str | Target = "llvm", params: Mapping[str, np.ndarray] | None = None,
          opt_level: int = 2, records: str | os.PathLike | None = None,
          dump: Callable[[str, str], None] | None = None,
          index_checks: bool = True, size_hints: Mapping[str, int] | None = None,
          precision: str = "fp32") -> CompiledModule:
    """Compile ``mod`` for ``target``; ``params`` replace the weights of the same names.
    ``index_checks=False`` leaves out the run-time checks of indices
    (passes/index_checks.py). ``size_hints`` (symbol -> the size to expect, e.g. the top
    of the range a server sees) sizes the kernels of a model with run-time sizes for
    those (schedules/proxy.py); any size still runs. ``precision`` ``"fp16"`` or
    ``"bf16"`` stores weights and activations of a float32 model in that 16-bit type
    and computes where it is safe (passes/precision.py); inputs and outputs stay
    float32."""
    tgt = Target.parse(target)
    codegen = get_codegen(tgt)  # fail before any work when the target is not installed
    precision_dtype(precision)  # an unknown value fails before any work too
    timings: list[tuple[str, float]] = []
    graph, groups, homes = fused_groups(mod, params, opt_level, dump, timings, tgt,
                                        index_checks, precision)
    _check_dtypes(graph, tgt, precision)
    symbols = plan_symbols(graph)  # a size no input gives fails here, before any lowering
    _check_hints(size_hints or {}, symbols)
    start = time.perf_counter()
    schedule = default_schedule(tgt)
    tuned = applicable_steps(records, tgt, groups) if records is not None else {}
    with sized_for(size_hints or {}):
        step_funcs = _lower_once_per_workload(groups, schedule, tuned, tgt.family)
    funcs = list({id(f): f for f in step_funcs}.values())
    timings.append(("lower", time.perf_counter() - start))
    plan, blob = _make_plan(graph, groups, step_funcs, tgt, homes)
    start = time.perf_counter()
    kernels = codegen(funcs, tgt)
    timings.append(("codegen", time.perf_counter() - start))
    return CompiledModule(graph, funcs, plan, blob, kernels, tgt, timings)


def _check_dtypes(graph: Graph, tgt: Target, precision: str) -> None:
    """A TargetError naming the first tensor whose dtype the target's kernels cannot
    hold (its plug-in's ``refused_dtypes``), before anything is lowered."""
    refused = tgt.info.refused_dtypes
    if not refused:
        return
    reduced = precision_dtype(precision)
    for v, where in [*((v, "graph input") for v in graph.inputs),
                     *((v, f"node '{n.name}' ({n.op})") for n in graph.nodes
                       for v in (*n.inputs, *n.outputs))]:
        if v.dtype in refused:
            hint = (f" (precision={precision!r} stores the model in {v.dtype}; pick "
                    "another precision)" if v.dtype == reduced else "")
            raise TargetError(f"the {tgt.kind} target does not support dtype {v.dtype}: "
                              f"'{v.name}' of {where} is {v.dtype}{hint}")


def _lower_once_per_workload(groups: list[FusedGroup], schedule: Callable[..., Any],
                             tuned: Mapping[str, Any], family: str) -> list[PrimFunc]:
    """The kernel of each group, lowered (and later compiled) once per workload key.

    Groups with equal keys compute the same thing on same-shaped buffers (weights are
    arguments, never baked in), so the repeated layers of a transformer or ResNet
    stage share one kernel: less to compile, a smaller artifact. A tuned schedule that
    stores an input in another layout (``layout`` steps) needs that input to be a weight
    the build can transpose; where it is not, the group gets the default schedule."""
    by_key: dict[tuple[str, bool, tuple[int, ...]], PrimFunc] = {}
    out = []
    for g in groups:
        key = workload_key(g)
        steps = tuned.get(key)
        usable = steps is None or all(
            g.inputs[int(s.args[0][2:])].is_constant for s in steps if s.kind == "layout")
        # the default rules store some weights transposed: only groups with the same
        # inputs constant can share their kernel
        constant = tuple(i for i, v in enumerate(g.inputs) if v.is_constant)
        if (key, usable, constant) not in by_key:
            by_key[key, usable, constant] = lower_group(
                g, f"tsm_kernel_{len(by_key)}", schedule, steps if usable else None, constant,
                default_transforms(g, family, constant), family)
        out.append(by_key[key, usable, constant])
    return out


def fused_groups(mod: Graph, params: Mapping[str, np.ndarray] | None = None, opt_level: int = 2,
                 dump: Callable[[str, str], None] | None = None,
                 timings: list[tuple[str, float]] | None = None,
                 target: str | Target | None = None, index_checks: bool = True,
                 precision: str = "fp32",
                 ) -> tuple[Graph, list[FusedGroup], dict[int, View]]:
    """The optimized graph, its kernel groups and where the values that share another's
    bytes live (reshapes, Concats in place: value uid -> View), exactly as ``build``
    lowers them for ``target``: the auto-tuner extracts its tasks here, so the workloads
    it tunes are the ones ``build`` looks up in the records. ``index_checks`` adds the
    run-time checks of indices (after the passes, so that none of them folds a check
    away or into another). ``precision`` runs after the passes that fold weights (a
    BatchNorm folded into its convolution is converted once, folded)."""
    graph = _bind_params(mod.copy(), params or {})
    _copy_passthrough_outputs(graph)
    tgt = Target.parse(target) if target is not None else None
    lanes = 0
    if (tgt is not None and tgt.family == "cpu" and activation_layout(tgt) == "blocked"
            and opt_level >= 2):
        lanes = target_resources(tgt).lanes(4)
    pm = default_pipeline(opt_level, _integer_products(tgt, lanes))
    reduced = precision_dtype(precision)
    if reduced is not None:
        pm.add("reduce_precision", lambda g: reduce_precision(g, reduced), 0)
    if tgt is not None and tgt.family == "cpu":
        pm.add("widen_inputs_first", widen_inputs_first, 0)
    takes = _pointwise_products(tgt)
    if takes is not None:
        # after reduce_precision: it decides which products are float16
        pm.add("pointwise_as_matmul", lambda g: pointwise_as_matmul(g, takes), 1)
    if lanes:
        # windows run on blocks of the CPU's float lanes (passes/blocked_layout.py)
        pm.add("block_layouts", lambda g: block_layouts(g, lanes), 2)
    pm.dump = dump
    graph = pm.run(graph)
    if index_checks:
        add_index_checks(graph)
    if timings is not None:
        timings += pm.timings
    # the CPU runtime places every plan buffer by its offset in one workspace; others
    # (OpenCL) give each its own memory, so only there can a value live inside another
    in_place = opt_level >= 1 and tgt is not None and tgt.family == "cpu"
    views = concat_views(graph) if in_place else ConcatViews()
    groups = fuse_ops(graph, enabled=opt_level >= 1, standalone=views.nodes)
    homes = dict(views.views)
    if opt_level >= 1:
        for uid, src in _reshape_aliases(groups, graph.outputs).items():
            homes[uid] = homes.get(src.uid, View(src, 0, whole=True))
    groups = [g for g in groups if not _moves_no_data(g, homes, views)]
    return graph, groups, homes


def _integer_products(tgt: Target | None, lanes: int) -> IntegerProducts | None:
    """Which quantized products ``tgt`` computes in integers (passes/integer_products.py):
    where its integer kernels were measured faster than what they replace.

    A CPU: the QOperator ops' int32 products always (2.5x faster on AVX2, 6x with VNNI,
    than int32 multiplies), a QDQ model's float ones where it has integer dot products
    (``CpuResources.int8_dot``; without them, on AVX2, 1.2x slower than float32),
    convolutions where they run channel-blocked (``lanes``). AArch64 with dotprod or
    i8mm counts as having them: one ``udot``/``usdot`` does 16 byte products where a
    float ``fmla`` does 4, from a quarter of the weight bytes, the ratio that made VNNI
    pay (not timed on AArch64 hardware: none was at hand; qemu's times mean nothing).
    A GPU: the QOperator ops' always, a QDQ model's float ones where the target has a
    packed four-byte dot (``vulkan -integer-dot-product=1``), each tiled by its rules
    (schedules/gpu_integer.py). Measured with bench/quantized_gpu.py against the float
    products they replace (bench/results/quantized_gpu_*_2026-12-05.txt): on an H100 the
    integer kernels took 0.87x (MobileNetV2) and 0.90x (an MLP, batch 32) of the float
    kernels' time with packed dots, but 1.62x and 1.72x without; on CPU drivers they won
    even without (lavapipe 0.24-0.83x, PoCL 0.32-0.98x), not what a GPU target is for.
    (Untiled, before those rules, they ran 2-5x slower.) Without a target (a graph
    only), every one that qualifies."""
    if tgt is None:
        return IntegerProducts()
    if tgt.family != "cpu":
        return IntegerProducts(dequantized=gpu_resources(tgt).integer_dot_product)
    return IntegerProducts(conv_block=lanes, dequantized=target_resources(tgt).int8_dot)


def _pointwise_products(tgt: Target | None) -> TakesProduct | None:
    """Which pointwise convolutions ``tgt`` computes as matrix products
    (passes/pointwise_convs.py): on a GPU whose float16 products run on cooperative
    matrices, those whose product that kernel takes (gpu_coop.takes_matmul), which
    then run on the matrix units instead of the convolution rule's scalar multiply-adds
    (gpu_conv.py): ResNet-50 in float16 on an H100, 2.81 ms of kernels against 2.92
    (bench/results/quantized_gpu_vulkan_h100_2026-12-05.txt, its end). Elsewhere none:
    the tiled product (gpu_gemm.py) and the convolution
    rule both multiply scalars, and a CPU's convolutions have rules of their own; the
    rewrite would only trade one for the other, unmeasured."""
    if tgt is None or tgt.family == "cpu":
        return None
    resources = gpu_resources(tgt)
    if not resources.matrix_shapes:
        return None
    return lambda a, b: takes_matmul(a, b, resources)


def _bind_params(graph: Graph, params: Mapping[str, np.ndarray]) -> Graph:
    if not params:
        return graph
    by_name = {c.name: c for c in graph.constants()}
    for name, array in params.items():
        c = by_name.get(name)
        if c is None:
            continue
        a = np.asarray(array)
        if tuple(a.shape) != c.shape or str(a.dtype) != c.dtype:
            raise ModelError(f"param '{name}' has {a.dtype}{list(a.shape)} but the model "
                             f"expects {c.dtype}{list(c.shape)}")
        c.data = np.ascontiguousarray(a)
    return graph


def _copy_passthrough_outputs(graph: Graph) -> None:
    """A graph output that is a graph input needs a kernel to copy it into its own buffer."""
    input_ids = {v.uid for v in graph.inputs}
    for i, v in enumerate(graph.outputs):
        if v.uid in input_ids:
            out = Value(f"{v.name}_out", v.shape, v.dtype)
            node = Node("copy", [v], [out], {}, f"copy_{v.name}")
            out.producer = node
            graph.nodes.append(node)
            graph.outputs[i] = out


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _reshape_aliases(groups: list[Any], outputs: list[Value]) -> dict[int, Value]:
    """Reshape-only groups move no data: their output shares the input's bytes. A graph
    output gets its own bytes where its size is not the same expression as its source's
    (a reshape to sizes computed from an input's values, equal only at run time): the
    plan gives an output a buffer of exactly its size, static or computed per run."""
    returned = {v.uid for v in outputs}
    aliases: dict[int, Value] = {}
    for g in groups:
        if all(n.op == "reshape" for n in g.nodes) and len(g.inputs) == 1 \
                and not g.inputs[0].is_constant and len(g.outputs) == 1:
            src = aliases.get(g.inputs[0].uid, g.inputs[0])
            out = g.outputs[0]
            if out.uid in returned and out.nbytes != src.nbytes:
                continue
            aliases[out.uid] = src
    return aliases


def _moves_no_data(g: Any, homes: dict[int, View], views: ConcatViews) -> bool:
    """A group that needs no kernel: reshapes of a value, or a Concat in place."""
    if len(g.nodes) == 1 and id(g.nodes[0]) in views.nodes:
        return True
    return len(g.outputs) == 1 and g.outputs[0].uid in homes and all(
        n.op == "reshape" for n in g.nodes)


def _weight_layouts(graph: Graph, groups: list[Any], funcs: list[PrimFunc]
                    ) -> list[tuple[Value, str | None]]:
    """Each constant with the layouts it is stored in (``_layout_key``; None: as it is)."""
    wanted: dict[int, list[str]] = {}
    plain: set[int] = {v.uid for v in graph.outputs}
    for g, f in zip(groups, funcs):
        layouts = f.attrs.get("layouts", {})
        for i, v in enumerate(g.inputs):
            if i in layouts:
                key = _layout_key(layouts[i])
                if key not in wanted.setdefault(v.uid, []):
                    wanted[v.uid].append(key)
            else:
                plain.add(v.uid)
    out: list[tuple[Value, str | None]] = []
    for c in graph.constants():
        if c.uid in plain or c.uid not in wanted:
            out.append((c, None))
        out += [(c, key) for key in wanted.get(c.uid, [])]
    return out


def _layout_key(layout: dict[str, Any]) -> str:
    return json.dumps(layout, sort_keys=True)


def _make_plan(graph: Graph, groups: list[Any], funcs: list[PrimFunc], tgt: Target,
               homes: dict[int, View]) -> tuple[Plan, bytes]:
    """``funcs[i]`` is the kernel step ``i`` calls (steps may share one); ``homes`` says
    which values live in another's bytes (:func:`fused_groups`)."""
    def root(v: Value) -> int:
        return homes[v.uid].root.uid if v.uid in homes else v.uid

    buffers: list[Buffer] = []
    buffer_of: dict[Any, int] = {}
    # Weights: every constant read by a kernel or returned, packed 64-byte aligned; a
    # kernel that stores a weight in another axis order gets a transposed copy (and the
    # weight is stored only that way when nothing else reads it as it is).
    chunks: list[bytes] = []
    offset = 0
    for c, key in _weight_layouts(graph, groups, funcs):
        assert c.data is not None
        data = c.data if key is None else to_stored(c.data, **json.loads(key))
        raw = np.ascontiguousarray(data).tobytes()
        buffer_of[c.uid if key is None else (c.uid, key)] = len(buffers)
        buffers.append(Buffer("param", offset, len(raw), c.name))
        pad = _align(len(raw)) - len(raw)
        chunks.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    blob = b"".join(chunks)
    # Workspace: inputs (pinned), group outputs and kernel scratch, by lifetime. A value
    # that lives in another's bytes extends that one's lifetime instead of having its own.
    sizes: dict[Any, Dim] = {}
    first: dict[Any, int] = {}
    last: dict[Any, int] = {}
    end = len(groups)
    for v in graph.inputs:
        sizes[v.uid], first[v.uid], last[v.uid] = v.nbytes, -1, end
    for step, (g, f) in enumerate(zip(groups, funcs)):
        for v in g.outputs:
            key = root(v)
            sizes[key] = homes[v.uid].root.nbytes if v.uid in homes else v.nbytes
            first[key] = min(first.get(key, step), step)
            last[key] = max(last.get(key, step), step)
        for k, buf in enumerate(f.scratch):
            key = ("scratch", step, k)
            sizes[key], first[key], last[key] = buf.nbytes, step, step
        for v in g.inputs:
            if root(v) in last:
                last[root(v)] = max(last[root(v)], step)
    for v in graph.results():
        if root(v) in last:
            last[root(v)] = end
    # Sizes known only at run time: the runtime places those buffers once it knows the
    # symbols (after the static workspace); the kernels that use symbols read their values
    # from a small static buffer per distinct tuple, filled before each run (so pinned).
    symbols = plan_symbols(graph, funcs)
    symbolic = [key for key, size in sizes.items() if not isinstance(size, int)]
    static_sizes: dict[Any, int] = {k: v for k, v in sizes.items() if isinstance(v, int)}
    pinned = {v.uid for v in graph.inputs}
    symbol_tuples = sorted({tuple(f.attrs["symbols"]) for f in funcs if f.attrs.get("symbols")})
    for names in symbol_tuples:
        key = ("symbols", names)
        static_sizes[key], first[key], last[key] = 8 * len(names), -1, end
        pinned.add(key)
    mem = plan_memory(static_sizes, first, last, pinned=pinned)
    for planned, off in mem.offsets.items():
        buffer_of[planned] = len(buffers)
        names = planned[1] if isinstance(planned, tuple) and planned[0] == "symbols" else None
        buffers.append(Buffer("workspace", off, static_sizes[planned], symbols=names))
    for key in symbolic:
        buffer_of[key] = len(buffers)
        buffers.append(Buffer("workspace", 0, 0, symbolic_nbytes=str(sizes[key]),
                              first_step=max(first[key], 0), last_step=last[key]))

    def buffer(v: Value) -> int:
        """The plan buffer of ``v``: its root's, or a range of it where ``v`` is a part."""
        home = homes.get(v.uid)
        if home is None or (home.offset == 0 and (home.whole
                                                  or v.nbytes == sizes.get(home.root.uid))):
            return buffer_of[root(v)]
        if not all(isinstance(d, int) for d in (sizes[home.root.uid], home.offset, v.nbytes)):
            # the runtime places a symbolic buffer whole: it has no parts at fixed offsets
            raise ModelError(f"'{v.name}' would live inside '{home.root.name}', whose size is "
                             "known only at run time; such values need their own buffer")
        key = ("part", home.root.uid, home.offset, v.nbytes)
        if key not in buffer_of:
            buffer_of[key] = len(buffers)
            buffers.append(Buffer("workspace", mem.offsets[home.root.uid] + home.offset,
                                  v.nbytes))
        return buffer_of[key]

    steps: list[Step] = []
    for step, (g, f) in enumerate(zip(groups, funcs)):
        layouts = f.attrs.get("layouts", {})
        args = [buffer_of[(v.uid, _layout_key(layouts[i]))] if i in layouts else buffer(v)
                for i, v in enumerate(g.inputs)] + [buffer(v) for v in g.outputs]
        args += [buffer_of[("scratch", step, k)] for k in range(len(f.scratch))]
        if f.attrs.get("symbols"):  # the kernel contract: the symbols' values come last
            args.append(buffer_of[("symbols", tuple(f.attrs["symbols"]))])
        # the kernel's name in every report, and how its tuning records' workload begins
        steps.append(Step(f.name, tuple(args), kernel_label(g.name, f.attrs["workload"]),
                          tuple(n.name for n in g.nodes)))

    def io(v: Value) -> Tensor:
        return Tensor(v.name, tuple(d if isinstance(d, int) else str(d) for d in v.shape),
                      v.dtype, buffer(v))

    plan = Plan(
        target=str(tgt),
        device=tgt.info.device,  # the runtime reads which device runs it from here
        symbols=symbols,
        inputs=tuple(io(v) for v in graph.inputs),
        outputs=tuple(io(v) for v in graph.outputs),
        # an int32 per check, nonzero after a run that must raise the message instead
        checks=tuple(Check(buffer(c.flag), c.message) for c in graph.checks),
        # equalities of sizes that shape inference assumed: every run checks them
        assumptions=tuple(dict.fromkeys(
            Assumption(str(a.lhs), str(a.rhs), a.reason) for a in graph.assumptions
            if free_symbols((a.lhs, a.rhs)) <= set(symbols))),
        computed=tuple(ComputedSize(c.name, c.expr, c.reason) for c in graph.computed
                       if c.name in symbols),
        # the sizes kernels count: read after the step that writes the count
        counted=tuple(CountedSize(c.name, buffer(c.count), _step_of(c.count, groups),
                                  str(c.bound), c.reason)
                      for c in graph.counted if c.name in symbols),
        kernels=tuple(Kernel(f.name, tuple(f.attrs.get("ops", [])),
                             tuple(f.attrs.get("nodes", [])))
                      for f in {id(f): f for f in funcs}.values()),
        steps=tuple(steps),
        buffers=tuple(buffers),
        workspace_bytes=mem.workspace_bytes,
        params_bytes=len(blob),
        memory={"planned_bytes": mem.workspace_bytes, "unplanned_bytes": mem.naive_bytes},
        producer=_versions(tgt),
    )
    return plan, blob


def _step_of(v: Value, groups: list[Any]) -> int:
    """The step (the group) that writes ``v``."""
    return next(i for i, g in enumerate(groups) if any(o.uid == v.uid for o in g.outputs))


def _check_hints(hints: Mapping[str, int], symbols: Sequence[str]) -> None:
    """Refuse a hint for a size the model does not have, or one below 1."""
    unknown = sorted(set(hints) - set(symbols))
    if unknown:
        have = ", ".join(f"'{s}'" for s in symbols) or "none (every size is fixed)"
        raise ModelError(f"size hints for {', '.join(repr(n) for n in unknown)}, which the "
                         f"model does not have; its sizes known at run time: {have}")
    for name, value in hints.items():
        if not isinstance(value, int) or value < 1:
            raise ModelError(f"the size hint for '{name}' must be an integer >= 1, got "
                             f"{value!r}")


def plan_symbols(graph: Graph, funcs: Sequence[PrimFunc] = ()) -> tuple[str, ...]:
    """Every symbol the graph's sizes and ``funcs`` use, sorted; a ModelError names those
    no input gives. A run learns each symbol from the first input axis whose size is that
    bare symbol (``[batch, 16]`` gives ``batch``) and checks every other size against it,
    so a symbol only an expression (``seq + 1``) or an intermediate value has is one the
    runtime could never know."""
    used: set[str] = set()
    for v in [*graph.inputs, *(o for n in graph.nodes for o in n.outputs), *graph.outputs]:
        used |= free_symbols(v.shape)
    for f in funcs:
        used |= set(f.attrs.get("symbols", ()))
    given = {str(d) for v in graph.inputs for d in v.shape
             if isinstance(d, Sym) and str(d).isidentifier()}
    given |= {c.name for c in (*graph.computed, *graph.counted)}
    for c in graph.computed:  # every run computes (and checks) them all
        used |= {c.name} | expr_symbols(c.expr)
    for c in graph.counted:
        used |= {c.name} | free_symbols(c.bound)
    missing = sorted(used - given)
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        are, them = ("are", "them") if len(missing) > 1 else ("is", "it")
        raise ModelError(
            f"the size{'s' if len(missing) > 1 else ''} {names} {are} known only at run "
            f"time, but no input has {them} as the size of an axis, so a run could not "
            f"learn {them}; fix {them} with --input-shape (or from_onnx(shapes=...))")
    return tuple(sorted(used))


def _versions(tgt: Target) -> dict[str, str]:
    """The versions of what made the artifact: the compiler, the runtime it is for, and
    the plug-in of its target."""
    from importlib.metadata import PackageNotFoundError, version

    dists = ["tensorsmith-ir", "tensorsmith-runtime", "tensorsmith-frontend-onnx"]
    dists += [tgt.info.distribution] if tgt.info.distribution else []
    out = {}
    for dist in dists:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            continue
    return out
