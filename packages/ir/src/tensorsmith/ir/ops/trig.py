"""``sin`` and ``cos``: rotary position embeddings (LLaMA and kin) take them of position
frequencies, which are constants that fold at import; runtime uses lower to libm."""

from __future__ import annotations

import numpy as np

from ..te.expr import call
from .elementwise import unary

unary("sin", lambda x, a: call("sin", x), lambda x, a: np.sin(x))
unary("cos", lambda x, a: call("cos", x), lambda x, a: np.cos(x))
