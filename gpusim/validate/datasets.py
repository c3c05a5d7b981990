"""The validation data gpusim reads when no path is given (gpusim/validate/data/README.md says whence)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gpusim.errors import InputError
from gpusim.perf.kernel_tables import aic_data_dir

MLPERF_CSV = Path(str(resources.files("gpusim.validate") / "data" / "mlperf_calibration.csv"))
"""The published MLPerf results shipped with the package."""


def silicon_sample() -> Path | None:
    """The silicon sample inside the installed aiconfigurator-core, or None without the calibration extra."""
    data = aic_data_dir()
    path = data.parent / "silicon_sample.csv" if data is not None else None
    return path if path is not None and path.is_file() else None


def silicon_path(given: Path | None, field: str) -> Path:
    """`given`, else the installed silicon sample; an InputError naming `field` when neither is there."""
    path = given or silicon_sample()
    if path is None:
        raise InputError("command line", field, "no silicon sample given and none installed; valid: a CSV path, or "
                         "pip install 'gpusim[calibration]' (aiconfigurator-core ships the sample)")
    return path
