"""``tensorsmith devices``: the Vulkan devices of this machine and what each offers the
compiler (cooperative matrices, subgroup size, workgroup memory), with the target string
that compiles for it. Run it on the device; compile anywhere with the string it prints.
The runtime alone does the same: ``python -m tensorsmith.runtime.vulkan``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

EPILOG = """\
examples:
  tensorsmith devices
  tensorsmith compile model.onnx -t "vulkan -cooperative-matrix=16x16x16 -subgroup-size=32"

--json prints a list of objects: device, name, type, vulkan, subgroup_size,
shared_memory_bytes, max_invocations, features ({name: bool}), cooperative_matrix (the
driver's list, e.g. "16x16x16 float16 x float16 + float32 -> float32 (subgroup)") and target.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "devices",
        parents=parents,
        help="list Vulkan devices, their cooperative matrices and the target string for each",
        description="List this machine's Vulkan devices with what the compiler may use on "
        "each (cooperative-matrix shapes, subgroup size, workgroup memory, features) and "
        "the target string that compiles for it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorsmith.runtime.vulkan.probe import describe_all, report

    print(json.dumps(describe_all(), indent=1) if args.json else report())
    return 0
