"""The analytical cost model: batch step → seconds (step.py), HBM plan (memory.py), and their parts."""

from gpusim.perf.memory import MemoryPlan, plan_memory
from gpusim.perf.step import BatchShape, StepBreakdown, StepCostModel

__all__ = ["BatchShape", "MemoryPlan", "StepBreakdown", "StepCostModel", "plan_memory"]
