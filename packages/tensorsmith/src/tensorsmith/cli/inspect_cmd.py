"""``tensorsmith inspect``: what an artifact holds, read from its metadata alone.

No native code is loaded and no device is touched, so it works on any artifact (a CPU
library built for another architecture, a Vulkan or OpenCL artifact on a machine without
a GPU) and is safe on a file of unknown origin. The file is still validated (footer,
format version, checksum), so a damaged copy is reported as such.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tensorsmith.cli._common import describe, existing_file, kernel_lines, named_kernels

EPILOG = """\
examples:
  tensorsmith inspect mlp.so
  tensorsmith inspect resnet_vulkan.so --json | python -m json.tool

--json prints one object: path, file_bytes, format_version, target, target_kind,
device (the runtime device that runs it: tensorsmith run --device), producer
({distribution: version}), inputs and outputs ([{name, shape, dtype}]), kernels
([{name, symbol, ops, nodes}]: name as run --profile and tune print it, e.g.
fused_matmul_add_relu#40de, whose digits begin the workload key of its tuning records;
symbol its function, e.g. tsm_kernel_0), steps (kernel calls per run), workspace_bytes,
unplanned_workspace_bytes (what the intermediates would need without memory planning, or
null), params_bytes, payload_bytes and sections ({name: bytes}).
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "inspect",
        parents=parents,
        help="describe an artifact: target, versions, inputs, outputs, kernels, memory",
        description="Describe an artifact from its metadata: target, format and producer "
        "versions, inputs and outputs, kernels with the ops they fuse, steps, planned "
        "memory, weights and file size. Loads no native code, so it works for any target.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("artifact", help="artifact written by 'tensorsmith compile'")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)


def summary(path: str) -> dict[str, Any]:
    """The artifact's description as plain data (what ``--json`` prints)."""
    from tensorsmith.runtime.artifact import read_artifact

    artifact = read_artifact(path)
    meta = artifact.metadata
    memory = meta.get("memory") if isinstance(meta.get("memory"), dict) else {}
    sections = meta.get("sections") if isinstance(meta.get("sections"), dict) else {}
    return {
        "path": str(artifact.path),
        "file_bytes": artifact.path.stat().st_size,
        "format_version": artifact.format_version,
        "target": str(meta.get("target", "unknown")),
        "target_kind": artifact.target,
        "device": artifact.plan.runs_on,
        "producer": dict(meta.get("producer") or {}),
        "inputs": _tensors(meta.get("inputs")),
        "outputs": _tensors(meta.get("outputs")),
        "kernels": named_kernels(meta),
        "steps": len(meta.get("steps") or []),
        "workspace_bytes": meta.get("workspace_bytes"),
        "symbols": list(artifact.plan.symbols),
        "computed": {c.name: c.expr for c in artifact.plan.computed},
        "counted": {c.name: {"bound": c.bound, "step": c.step, "by": c.message}
                    for c in artifact.plan.counted},
        "dynamic_buffers": [b.symbolic_nbytes for b in artifact.plan.buffers if b.is_symbolic],
        "unplanned_workspace_bytes": memory.get("unplanned_bytes"),
        "params_bytes": meta.get("params_bytes"),
        "payload_bytes": artifact.payload_length,
        "sections": {name: int(span[1]) for name, span in sections.items()},
    }


def _tensors(entries: Any) -> list[dict[str, Any]]:
    return [
        {"name": e.get("name"), "shape": list(e.get("shape") or []), "dtype": e.get("dtype")}
        for e in entries or []
        if isinstance(e, dict)
    ]


def size(n: Any) -> str:
    """'46,738,880 bytes (44.6 MiB)'; 'unknown' when the metadata lacks it."""
    if not isinstance(n, int):
        return "unknown"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"


def format_text(info: dict[str, Any]) -> str:
    """The description for a terminal, one fact a line."""
    lines = [
        f"artifact   {info['path']}",
        f"file       {size(info['file_bytes'])}",
        f"target     {info['target']}",
        f"device     {info['device'] or 'unknown'}",
        f"format     version {info['format_version']}",
    ]
    producer = sorted(info["producer"].items()) or [("unknown", "")]
    lines += [
        f"{'producer' if i == 0 else '':<10} {name} {version}".rstrip()
        for i, (name, version) in enumerate(producer)
    ]
    for kind in ("inputs", "outputs"):
        lines.append(f"{kind:<10} {len(info[kind])}")
        lines += [f"  {describe(t)}" for t in info[kind]]
    lines.append(f"kernels    {len(info['kernels'])} ({info['steps']} steps per run)")
    lines += kernel_lines(info["kernels"])
    shaped = [n for n in info["symbols"]
              if n not in info["computed"] and n not in info["counted"]]
    if shaped:
        lines.append(f"symbols    {', '.join(shaped)} (sizes known at run time, "
                     "taken from the inputs' shapes)")
    if info["computed"]:
        lines.append(f"computed   {len(info['computed'])} sizes, from inputs' values before "
                     "each run:")
        lines += [f"  {name} = {expr}" for name, expr in info["computed"].items()]
    if info["counted"]:
        lines.append(f"counted    {len(info['counted'])} sizes, counted by kernels during the "
                     "run (buffers placed for the bound):")
        lines += [f"  {name} - 1 = the count of {c['by']} (step {c['step']}), at most "
                  f"{c['bound']} - 1" for name, c in info["counted"].items()]
    lines.append(f"memory     workspace {size(info['workspace_bytes'])}")
    if info["dynamic_buffers"]:
        from tensorsmith.ir.symbolic import parse_dim

        total = sum((parse_dim(b) for b in info["dynamic_buffers"]), 0)
        lines.append(f"           + {len(info['dynamic_buffers'])} buffers sized per run, placed "
                     f"when the sizes change (at most {total} bytes together)")
    planned, unplanned = info["workspace_bytes"], info["unplanned_workspace_bytes"]
    if not info["symbols"] and isinstance(planned, int) and isinstance(unplanned, int) \
            and unplanned > 0:
        lines.append(
            f"           {size(unplanned)} without memory planning "
            f"(planning saves {100.0 * (1 - planned / unplanned):.0f}%)"
        )
    lines.append(f"weights    {size(info['params_bytes'])}")
    lines.append(f"payload    {size(info['payload_bytes'])}")
    if info["sections"]:
        lines.append(f"sections   {len(info['sections'])}")
        lines += [f"  {name}  {size(n)}" for name, n in info["sections"].items()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    path = existing_file(args.artifact, "artifact")
    info = summary(str(path))
    print(json.dumps(info, indent=2) if args.json else format_text(info))
    return 0
