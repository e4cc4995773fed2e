"""The execution plan as C: the tables ``tsm_runtime.c`` runs (see csrc/tsm_plan.h)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
            nbytes = plan.buffers[buffer].nbytes
            if shape:
                lines.append(f"static const int64_t {name}{i}_shape[] = "
                             f"{{{', '.join(str(d) for d in shape)}}};")
                shape_ref = f"{name}{i}_shape"
            else:
                shape_ref = "0"
            rows.append(f"  {{{c_string(v.name)}, \"{v.dtype}\", {len(shape)}, "
                        f"{shape_ref}, {nbytes}, {buffer}}}")
        body = ",\n".join(rows) if rows else "  {0, 0, 0, 0, 0, 0}"
        lines.append(f"static const tsm_io {name}s[] = {{\n{body}\n}};")

    io_table("input", plan.inputs)
    io_table("output", plan.outputs)
    rows = [f"  {{{kinds[b.kind]}, {b.offset}, {b.nbytes}}}" for b in plan.buffers]
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
    lines.append(c_bytes("metadata_json", json.dumps(metadata, sort_keys=True)))
    lines.append(
        "TSM_INTERNAL const tsm_plan tsm_graph_plan = {\n"
        f"  {len(plan.buffers)}, buffers, {len(plan.steps)}, steps,\n"
        f"  {len(plan.inputs)}, inputs, {len(plan.outputs)}, outputs,\n"
        f"  {plan.workspace_bytes},\n"
        f"  metadata_json, {params_bytes}, {{{', '.join(str(b) for b in params_id)}}},\n"
        f"  {len(checks)}, checks\n}};")
    lines.append(cpu_check_source(metadata.get("cpu_features", [])))
    return "\n".join(lines) + "\n"


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
