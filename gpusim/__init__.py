"""gpusim: a discrete-event simulator of GPU racks serving LLM inference."""

from gpusim.api import Found, Result, Submission, mlperf, run, run_spec, search

__version__ = "0.1.0"
__all__ = ["Found", "Result", "Submission", "mlperf", "run", "run_spec", "search"]
