"""Default schedules per target family: the rules most users will ever run."""

from .cpu import schedule_cpu

__all__ = ["schedule_cpu"]
