"""``python -m tensorsmith.runtime.vulkan [--json]``: the Vulkan devices' facts (probe.py)."""

from __future__ import annotations

import json
import sys

from .probe import describe_all, report

if __name__ == "__main__":
    if "--json" in sys.argv[1:]:
        print(json.dumps(describe_all(), indent=1))
    else:
        print(report())
