"""The execution plan as C: the tables ``tsm_runtime.c`` runs (see csrc/tsm_plan.h)."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorsmith.ir.symbolic import Dim, fold, free_symbols, math_prod, parse_dim, symbol

if TYPE_CHECKING:
    from tensorsmith.runtime.plan import Plan, Tensor


def c_string(text: str) -> str:
    """A C string literal for arbitrary text (split so no line gets huge)."""
    out = []
    for ch in text.encode("utf-8"):
        if ch in (0x22, 0x5C):
            out.append("\\" + chr(ch))
        elif 0x20 <= ch < 0x7F and ch != 0x3F:  # '?' avoids trigraphs
            out.append(chr(ch))
        else:
            out.append(f"\\{ch:03o}")
    # Chunk by escape unit, never inside one, so no line of C gets huge.
    pieces = ["".join(out[i:i + 1000]) for i in range(0, len(out), 1000)] or [""]
    return "\n".join(f'"{p}"' for p in pieces)


def c_bytes(name: str, text: str) -> str:
    """A NUL-terminated byte array: no escaping rules and no string-literal length limits."""
    data = text.encode("utf-8") + b"\0"
    rows = [", ".join(str(b) for b in data[i:i + 32]) for i in range(0, len(data), 32)]
    return f"static const char {name}[] = {{\n  " + ",\n  ".join(rows) + "\n};"


def plan_source(plan: Plan, metadata: dict[str, Any], params_bytes: int,
                params_id: bytes) -> str:
    """plan.c: the plan's tables, the metadata, and the size and id of the weights that
    the artifact appends to the library (csrc/tsm_params.c maps them)."""
    kinds = {"param": "TSM_PARAM", "workspace": "TSM_WORKSPACE"}
    lines = ['#include "tsm_plan.h"', ""]
    for k in plan.kernels:
        lines.append(f"TSM_INTERNAL extern void {k.name}(void **args);")
    lines.append("")

    def io_table(name: str, ios: Sequence[Tensor]) -> None:
        rows = []
        for i, v in enumerate(ios):
            shape, buffer = v.shape, v.buffer
            assert buffer is not None, f"{name} {v.name!r} has no buffer"
            # a symbolic size is 0 here: symbolic_source's tables say where it comes from
            nbytes = 0 if v.is_symbolic else plan.buffers[buffer].nbytes
            if shape:
                dims = ", ".join(str(d) if isinstance(d, int) else "0" for d in shape)
                lines.append(f"static const int64_t {name}{i}_shape[] = {{{dims}}};")
                shape_ref = f"{name}{i}_shape"
            else:
                shape_ref = "0"
            rows.append(f"  {{{c_string(v.name)}, \"{v.dtype}\", {len(shape)}, "
                        f"{shape_ref}, {nbytes}, {buffer}}}")
        body = ",\n".join(rows) if rows else "  {0, 0, 0, 0, 0, 0}"
        lines.append(f"static const tsm_io {name}s[] = {{\n{body}\n}};")

    io_table("input", plan.inputs)
    io_table("output", plan.outputs)
    rows = ["  {TSM_DYNAMIC, 0, 0}" if b.is_symbolic
            else f"  {{{kinds[b.kind]}, {b.offset}, {b.nbytes}}}" for b in plan.buffers]
    lines.append("static const tsm_buffer buffers[] = {\n"
                 + (",\n".join(rows) or "  {0, 0, 0}") + "\n};")
    step_rows = []
    for i, s in enumerate(plan.steps):
        lines.append(f"static const int step{i}_args[] = {{{', '.join(map(str, s.args))}}};")
        step_rows.append(f"  {{{s.kernel}, {len(s.args)}, step{i}_args, {c_string(s.label)}}}")
    lines.append("static const tsm_step steps[] = {\n"
                 + (",\n".join(step_rows) or "  {0, 0, 0, 0}") + "\n};")
    checks = plan.checks
    check_rows = [f"  {{{c.buffer}, {c_string(c.message)}}}" for c in checks]
    lines.append("static const tsm_check checks[] = {\n"
                 + (",\n".join(check_rows) or "  {0, 0}") + "\n};")
    if plan.is_symbolic:
        lines += symbolic_source(plan)
    lines.append(c_bytes("metadata_json", json.dumps(metadata, sort_keys=True)))
    lines.append(
        "TSM_INTERNAL const tsm_plan tsm_graph_plan = {\n"
        f"  {len(plan.buffers)}, buffers, {len(plan.steps)}, steps,\n"
        f"  {len(plan.inputs)}, inputs, {len(plan.outputs)}, outputs,\n"
        f"  {plan.workspace_bytes},\n"
        f"  metadata_json, {params_bytes}, {{{', '.join(str(b) for b in params_id)}}},\n"
        f"  {len(checks)}, checks, {'&symbolic' if plan.is_symbolic else '0'}\n}};")
    lines.append(cpu_check_source(metadata.get("cpu_features", [])))
    return "\n".join(lines) + "\n"


class _Sizes:
    """The symbolic sizes of a plan, numbered as compute_sizes writes them: the symbols
    first (size k is symbol k), then each distinct expression once, by its canonical text."""

    def __init__(self, symbols: Sequence[str]) -> None:
        self.symbols = tuple(symbols)
        self.dims: list[Dim] = [symbol(n) for n in self.symbols]
        self.index = {n: k for k, n in enumerate(self.symbols)}

    def of(self, d: Dim, where: str) -> int:
        """The index of size ``d`` (a Sym), numbering it if it is new."""
        unknown = free_symbols(d) - set(self.symbols)
        if unknown:
            raise ValueError(f"the plan's {where} uses {sorted(unknown)}, which are not among "
                             f"its symbols {list(self.symbols)}")
        key = str(d)
        if key not in self.index:
            self.index[key] = len(self.dims)
            self.dims.append(d)
        return self.index[key]

    def c_expression(self, d: Dim) -> str:
        """``d`` as C over ``s`` (the symbols' values), every operation checked (tsm_plan.h's
        tsm_size_*: they set ``bad`` on an overflow or a division by zero)."""
        ops = {op: _c_call(f"tsm_size_{op}", checked=op not in ("max", "min"))
               for op in ("add", "mul", "floordiv", "mod", "max", "min")}
        return fold(d, lambda c: f"INT64_C({c})", lambda n: f"s[{self.index[n]}]", ops)


def symbolic_source(plan: Plan) -> list[str]:
    """The C of a plan with symbols: ``compute_sizes`` (every size that depends on them,
    from their values), the tables that say which size each symbolic axis, tensor and
    buffer has, the buffers' lifetimes, the symbol buffers, and ``symbolic``, the
    tsm_symbolic that tsm_graph_plan points at (csrc/tsm_plan.h, "dynamic shapes")."""
    sizes = _Sizes(plan.symbols)
    lines: list[str] = []

    def io_sizes(name: str, ios: Sequence[Tensor]) -> None:
        rows = []
        for i, v in enumerate(ios):
            if not v.is_symbolic:
                rows.append("  {0, -1}")
                continue
            dims = [d if isinstance(d, int) else parse_dim(d) for d in v.shape]
            where = f"{name} '{v.name}'"
            index = [-1 if isinstance(d, int) else sizes.of(d, where) for d in dims]
            nbytes = math_prod(dims) * np.dtype(v.dtype).itemsize
            lines.append(f"static const int {name}{i}_dims[] = {{{', '.join(map(str, index))}}};")
            rows.append(f"  {{{name}{i}_dims, {sizes.of(nbytes, where)}}}")
        lines.append(f"static const tsm_io_sizes {name}_sizes[] = {{\n"
                     + (",\n".join(rows) or "  {0, -1}") + "\n};")

    io_sizes("input", plan.inputs)
    io_sizes("output", plan.outputs)
    dynamic, symbol_rows = [], []
    for i, b in enumerate(plan.buffers):
        if b.is_symbolic:
            assert b.symbolic_nbytes is not None
            assert b.first_step is not None and b.last_step is not None, f"buffer {i}"
            k = sizes.of(parse_dim(b.symbolic_nbytes), f"buffer {i}")
            dynamic.append(f"  {{{i}, {k}, {b.first_step}, {b.last_step}}}")
        elif b.symbols:
            names = [sizes.index[n] for n in b.symbols]
            lines.append(f"static const int symbol_buffer{i}[] = "
                         f"{{{', '.join(map(str, names))}}};")
            symbol_rows.append(f"  {{{i}, {len(names)}, symbol_buffer{i}}}")
    lines.append("static const tsm_dynamic_buffer dynamic_buffers[] = {\n"
                 + (",\n".join(dynamic) or "  {0, 0, 0, 0}") + "\n};")
    lines.append("static const tsm_symbol_buffer symbol_buffers[] = {\n"
                 + (",\n".join(symbol_rows) or "  {0, 0, 0}") + "\n};")
    assumption_rows = [
        f"  {{{sizes.of(parse_dim(a.lhs), 'assumption')}, "
        f"{sizes.of(parse_dim(a.rhs), 'assumption')}, {c_string(a.message)}}}"
        for a in plan.assumptions]
    lines.append("static const tsm_assumption assumptions[] = {\n"
                 + (",\n".join(assumption_rows) or "  {0, 0, 0}") + "\n};")
    counted_rows = [
        f"  {{{sizes.index[c.name]}, {sizes.of(parse_dim(c.bound), 'counted size')}, "
        f"{c.buffer}, {c.step}, {c_string(c.message)}}}" for c in plan.counted]
    lines.append("static const tsm_counted counted[] = {\n"
                 + (",\n".join(counted_rows) or "  {0, 0, 0, 0, 0}") + "\n};")
    lines.append("static const char *const symbol_names[] = {\n"
                 + ",\n".join(f"  {c_string(n)}" for n in sizes.symbols) + "\n};")
    lines.append("static const char *const size_texts[] = {\n"
                 + ",\n".join(f"  {c_string(str(d))}" for d in sizes.dims) + "\n};")
    body = [f"  v[{k}] = {sizes.c_expression(d)};  /* {_comment(str(d))} */"
            if k >= len(sizes.symbols) else f"  v[{k}] = s[{k}];"
            for k, d in enumerate(sizes.dims)]
    lines += ["static int compute_sizes(const int64_t *s, int64_t *v) {", "  int bad = 0;",
              *body, "  return bad;", "}"]
    lines += computed_source(plan, sizes.index)
    lines.append(
        "static const tsm_symbolic symbolic = {\n"
        f"  {len(sizes.symbols)}, symbol_names, {len(sizes.dims)}, size_texts, compute_sizes,\n"
        f"  input_sizes, output_sizes, {len(dynamic)}, dynamic_buffers,\n"
        f"  {len(symbol_rows)}, symbol_buffers, {len(assumption_rows)}, assumptions,\n"
        f"  {len(plan.computed)}, computed, {'compute_values' if plan.computed else '0'},\n"
        f"  {len(counted_rows)}, counted\n}};")
    return lines


def computed_source(plan: Plan, symbol_index: dict[str, int]) -> list[str]:
    """The table of the plan's computed sizes and ``compute_values``, which computes them
    in order from the inputs' data (tsm_plan.h, ``tsm_computed``)."""
    inputs = {t.name: (i, t) for i, t in enumerate(plan.inputs)}
    rows, body = [], []
    for j, c in enumerate(plan.computed):
        k = symbol_index[c.name]
        rows.append(f"  {{{k}, {c_string(c.expr)}, {c_string(c.message)}}}")
        code, is_float = _host_c(ast.parse(c.expr, mode="eval").body, symbol_index, inputs)
        if is_float:
            raise ValueError(f"computed size {c.name!r} = {c.expr} is not an integer")
        body += [f"  s[{k}] = {code};  /* {_comment(c.name + ' = ' + c.expr)} */",
                 f"  if (*bad || s[{k}] < 1) return {j + 1};"]
    lines = ["static const tsm_computed computed[] = {\n" + (",\n".join(rows) or "  {0, 0, 0}")
             + "\n};"]
    if plan.computed:
        lines += ["static int compute_values(int64_t *s, const void *const *in, int *bad) {",
                  *body, "  return 0;", "}"]
    return lines


#: How value("input", k) reads element k of an input of each dtype, and whether as a float.
_READ = {"int64": ("int64_t", False), "int32": ("int32_t", False), "int16": ("int16_t", False),
         "int8": ("int8_t", False), "uint8": ("uint8_t", False), "uint16": ("uint16_t", False),
         "uint32": ("uint32_t", False), "bool": ("uint8_t", False), "float32": ("float", True),
         "float64": ("double", True)}


def _host_c(node: ast.AST, symbols: dict[str, int], inputs: dict[str, tuple[int, Any]]
            ) -> tuple[str, bool]:
    """A computed size's expression (runtime/shapes.py's ``host_expr`` language) as C:
    (code, whether it is a double). Integer arithmetic is checked (``bad``), as sizes' is;
    division ``/`` and float operands compute in double, as Python does."""
    def sub(n: ast.AST) -> tuple[str, bool]:
        return _host_c(n, symbols, inputs)

    def as_double(code: str, is_float: bool) -> str:
        return code if is_float else f"((double){code})"

    if isinstance(node, ast.Constant) and type(node.value) is int:
        return f"INT64_C({node.value})", False
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return repr(node.value), True
    if isinstance(node, ast.Name):
        return f"s[{symbols[node.id]}]", False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        code, f = sub(node.operand)
        return (f"(-{code})", True) if f else (f"tsm_size_mul({code}, -1, bad)", False)
    if isinstance(node, ast.BinOp):
        (a, fa), (b, fb) = sub(node.left), sub(node.right)
        if isinstance(node.op, ast.Div) or fa or fb:
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
            if type(node.op) not in ops:
                raise ValueError(f"'{ast.unparse(node)}': // and % take integers")
            return f"({as_double(a, fa)} {ops[type(node.op)]} {as_double(b, fb)})", True
        if isinstance(node.op, ast.Sub):
            return f"tsm_size_add({a}, tsm_size_mul({b}, -1, bad), bad)", False
        names = {ast.Add: "add", ast.Mult: "mul", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
        return f"tsm_size_{names[type(node.op)]}({a}, {b}, bad)", False
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
               ast.GtE: ">="}
        (a, fa), (b, fb) = sub(node.left), sub(node.comparators[0])
        if fa or fb:
            a, b = as_double(a, fa), as_double(b, fb)
        return f"((int64_t)({a} {ops[type(node.ops[0])]} {b}))", False
    if isinstance(node, ast.IfExp):
        (c, fc), (a, fa), (b, fb) = sub(node.test), sub(node.body), sub(node.orelse)
        c = f"({c} != 0.0)" if fc else c
        if fa or fb:
            return f"({c} ? {as_double(a, fa)} : {as_double(b, fb)})", True
        return f"({c} ? {a} : {b})", False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn, args = node.func.id, node.args
        if fn == "value":
            name, k = args[0].value, args[1].value  # type: ignore[attr-defined]
            i, tensor = inputs[name]
            count = math.prod(int(d) for d in tensor.shape)
            if not 0 <= k < count or tensor.dtype not in _READ:
                raise ValueError(f"value({name!r}, {k}): input {name!r} is "
                                 f"{tensor.dtype}{list(tensor.shape)}")
            ctype, is_float = _READ[tensor.dtype]
            cast = "double" if is_float else "int64_t"
            return f"(({cast})((const {ctype} *)in[{i}])[{k}])", is_float
        if fn in ("floor", "ceil"):
            code, f = sub(args[0])
            return (f"tsm_size_{fn}({code}, bad)" if f else code), False
        if fn in ("max", "min"):
            (a, fa), (b, fb) = sub(args[0]), sub(args[1])
            if fa or fb:
                return f"__builtin_f{fn}({as_double(a, fa)}, {as_double(b, fb)})", True
            return f"tsm_size_{fn}({a}, {b})", False
    raise ValueError(f"'{ast.unparse(node)}' is not a computed size's expression")


def _c_call(function: str, checked: bool) -> Callable[[str, str], str]:
    """How ``fold`` writes one operation: a call of ``function`` (with ``&bad`` if checked)."""
    if checked:
        return lambda a, b: f"{function}({a}, {b}, &bad)"
    return lambda a, b: f"{function}({a}, {b})"


def _comment(text: str) -> str:
    """``text`` safe inside a C comment."""
    return text.replace("*/", "* /").replace("/*", "/ *")


#: Extension names that ``__builtin_cpu_supports`` takes, as LLVM spells them, by the
#: compilers that know them (an unknown name fails the compile): GCC and Clang since
#: version 8 ...
_BUILTIN_NAMES_8 = (
    "sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "sse4a", "avx", "avx2", "fma",
    "fma4", "xop", "bmi", "bmi2", "popcnt", "aes", "pclmul", "avx512f", "avx512vl",
    "avx512bw", "avx512dq", "avx512cd", "avx512vbmi", "avx512ifma", "avx512vpopcntdq",
    "avx512vbmi2", "gfni", "vpclmulqdq", "avx512vnni", "avx512bitalg",
)  # fmt: skip
#: ... and GCC 12 and Clang 19 on. Older compilers check the first group only (the
#: Python runtime checks every feature before it loads the library either way).
_BUILTIN_NAMES_NEWER = (
    "avx512bf16", "avx512vp2intersect", "avx512fp16", "avxvnni", "f16c", "lzcnt", "movbe",
    "adx", "sha", "vaes", "amx-tile", "amx-int8", "amx-bf16",
)  # fmt: skip

#: Which of those groups the compiler of plan.c knows: 0 none (or not x86), 1 the first,
#: 2 both.
_CPU_NAMES_KNOWN = """\
#if !defined(__x86_64__) && !defined(__i386__)
#define TSM_CPU_NAMES 0
#elif defined(__clang__)
#define TSM_CPU_NAMES (__clang_major__ >= 19 ? 2 : __clang_major__ >= 8)
#elif defined(__GNUC__)
#define TSM_CPU_NAMES (__GNUC__ >= 12 ? 2 : __GNUC__ >= 8)
#else
#define TSM_CPU_NAMES 0
#endif
"""


def cpu_check_source(features: list[str]) -> str:
    """``tsm_plan_missing_cpu_feature(i)``: the i-th of ``features`` (the metadata's
    ``cpu_features``) that the running CPU lacks, NULL past the last. tsm_model_create
    calls it first, so a C program gets an error naming them instead of SIGILL.

    ``__builtin_cpu_supports`` takes string literals only, hence one test per feature.
    It reads what libgcc (or compiler-rt), linked in statically, found with CPUID and
    XGETBV; plan.c is compiled for the baseline CPU, so the check runs on any x86 CPU."""
    first, newer = (
        [f'  if (!__builtin_cpu_supports("{f}") && index-- == 0) return "{f}";' for f in group]
        for group in (
            [f for f in features if f in _BUILTIN_NAMES_8],
            [f for f in features if f in _BUILTIN_NAMES_NEWER],
        )
    )
    body = [
        "TSM_INTERNAL const char *tsm_plan_missing_cpu_feature(int index) {",
        "#if TSM_CPU_NAMES >= 1",
        "  __builtin_cpu_init();",
        *first,
        "#endif",
        "#if TSM_CPU_NAMES >= 2",
        *newer,
        "#endif",
        "  (void)index;",
        "  return 0;",
        "}",
    ]
    return _CPU_NAMES_KNOWN + "\n".join(body)
