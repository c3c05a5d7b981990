"""Shipped models and MLPerf benchmarks, installed as `gpusim.workloads`."""
