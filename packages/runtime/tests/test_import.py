"""Importing the runtime stays cheap: no NumPy, ctypes or loader until first use."""

from __future__ import annotations

import os
import subprocess
import sys


def test_import_loads_nothing_heavy() -> None:
    code = (
        "import sys, tensorsmith.runtime as rt\n"
        "heavy = [m for m in ('numpy', 'ctypes', 'tensorsmith.runtime.module',"
        " 'tensorsmith.runtime.artifact') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_lazy_names_resolve() -> None:
    import tensorsmith.runtime as rt

    assert rt.FORMAT_VERSION == 2
    assert callable(rt.read_artifact) and callable(rt.write_artifact)
    assert rt.GraphModule.__name__ == "GraphModule"
    try:
        rt.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("unknown attribute did not raise")
