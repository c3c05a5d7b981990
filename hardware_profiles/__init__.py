"""Shipped hardware profiles (systems, GPUs, fabrics, software, costs), installed as `gpusim.hardware_profiles`."""
