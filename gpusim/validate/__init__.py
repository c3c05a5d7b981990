"""Validation against measured data: the silicon sample (closed-loop runs) and published MLPerf results."""
