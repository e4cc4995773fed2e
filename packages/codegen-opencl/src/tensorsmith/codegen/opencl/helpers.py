"""Small inline functions the emitted kernels call, written once per program as needed.

OpenCL C's built-ins differ from the tensor IR's semantics in two places, and these
helpers close the gap the same way the LLVM backend does: integer ``floordiv`` /
``floormod`` round toward minus infinity (C's ``/`` and ``%`` truncate), and float
``max`` / ``min`` propagate NaN (``fmax`` / ``fmin`` return the other operand).
Without ``cl_khr_fp16`` a float16 value is computed in ``float``, and ``round_half``
rounds a float (or a double) to the nearest float16 (ties to even), as a float, by
``vstore_half_rte``/``vload_half`` on a private 16-bit word: the one way to round to
half that needs no extension (``convert_half`` and ``half`` variables need it).

Helpers are named by operation and OpenCL type, so each is defined at most once; they
are plain functions (OpenCL C 1.1 has no ``static``, and C99 ``inline`` alone may leave
no definition to call), which every OpenCL compiler inlines anyway.
"""

from __future__ import annotations

_FLOORDIV = """\
{t} tsm_floordiv_{t}({t} a, {t} b) {{
  {t} q = ({t})(a / b), r = ({t})(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(q - 1) : q;
}}"""
_FLOORMOD = """\
{t} tsm_floormod_{t}({t} a, {t} b) {{
  {t} r = ({t})(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(r + b) : r;
}}"""
_MAX = """\
{t} tsm_max_{t}({t} a, {t} b) {{
  return isnan(a) ? a : (isnan(b) ? b : fmax(a, b));
}}"""
_MIN = """\
{t} tsm_min_{t}({t} a, {t} b) {{
  return isnan(a) ? a : (isnan(b) ? b : fmin(a, b));
}}"""
_ROUND_HALF = """\
float tsm_round_half_{t}({t} a) {{
  ushort bits;
  vstore_half_rte(a, 0, (__private half*)&bits);
  return vload_half(0, (__private const half*)&bits);
}}"""
_TEMPLATES = {"floordiv": _FLOORDIV, "floormod": _FLOORMOD, "max": _MAX, "min": _MIN,
              "round_half": _ROUND_HALF}


class Helpers:
    """The helpers one program needs, in the order first asked for."""

    def __init__(self) -> None:
        self._wanted: dict[tuple[str, str], None] = {}

    def call(self, op: str, ctype: str, *args: str) -> str:
        """An expression calling helper ``op`` for ``ctype`` on ``args``."""
        self._wanted[(op, ctype)] = None
        return f"tsm_{op}_{ctype}({', '.join(args)})"

    def source(self) -> str:
        return "\n".join(_TEMPLATES[op].format(t=ctype) for op, ctype in self._wanted)
