"""Graph passes and the pass manager that runs them."""

from .concat_views import ConcatViews, View, concat_views
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_constants import fold_constants
from .fuse import FusedGroup, fuse_ops
from .manager import PassManager, default_pipeline
from .memory_plan import MemoryPlan, plan_memory
from .simplify import simplify_graph

__all__ = ["ConcatViews", "FusedGroup", "MemoryPlan", "PassManager", "View", "concat_views",
           "default_pipeline", "eliminate_common_subexpressions", "eliminate_dead_code",
           "fold_constants", "fuse_ops", "plan_memory", "simplify_graph"]
