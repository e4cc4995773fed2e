"""Graph passes and the pass manager that runs them."""

from .dce import eliminate_dead_code
from .fold_constants import fold_constants
from .fuse import FusedGroup, fuse_ops
from .manager import PassManager, default_pipeline
from .memory_plan import MemoryPlan, plan_memory

__all__ = ["FusedGroup", "MemoryPlan", "PassManager", "default_pipeline",
           "eliminate_dead_code", "fold_constants", "fuse_ops", "plan_memory"]
