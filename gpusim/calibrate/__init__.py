"""Calibration of the cost model's constants against measured data (op-level kernel tables first)."""
