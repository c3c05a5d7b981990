"""Pydantic schemas and loaders for hardware, models, benchmarks, deployments and experiments."""
