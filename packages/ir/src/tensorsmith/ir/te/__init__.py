"""Tensor expressions, schedules and the loop-nest tensor IR they lower to."""

from . import tensor as te_tensor
from .expr import (
           Expr,
           IterVar,
           Var,
           cast,
           const,
           erf,
           exp,
           log,
           maximum,
           minimum,
           select,
           sqrt,
           tanh,
)
from .lower import lower
from .schedule import Schedule, Step, create_schedule, replay
from .stmt import Buffer, PrimFunc
from .tensor import Tensor, compute, placeholder, reduce_axis

sum = te_tensor.sum  # noqa: A001
max = te_tensor.max  # noqa: A001
min = te_tensor.min  # noqa: A001
prod = te_tensor.prod

__all__ = ["Buffer", "Expr", "IterVar", "PrimFunc", "Schedule", "Step", "Tensor", "Var", "cast",
           "compute", "const", "create_schedule", "erf", "exp", "log", "lower", "max",
           "maximum", "min", "minimum", "placeholder", "prod", "reduce_axis", "replay",
           "select", "sqrt", "sum", "tanh"]
