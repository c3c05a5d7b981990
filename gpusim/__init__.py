"""gpusim: a discrete-event simulator of GPU racks serving LLM inference."""

from gpusim.api import Result, run, run_spec

__version__ = "0.1.0"
__all__ = ["Result", "run", "run_spec"]
