"""gpusim: a discrete-event simulator of GPU racks serving LLM inference."""

__version__ = "0.1.0"
