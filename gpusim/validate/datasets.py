"""The validation data gpusim reads when no path is given (reference/README.md in the repository says whence)."""

from __future__ import annotations

from pathlib import Path

from gpusim.errors import InputError
from gpusim.perf.kernel_tables import aic_data_dir

MLPERF_CSV = Path(__file__).resolve().parents[2] / "reference" / "mlperf_calibration.csv"
"""The published MLPerf results in a clone of the repository, compared with and never predicted from (they are
kept out of the package: an installed gpusim is given the file's path)."""


OTHER_VENDORS_CSV = MLPERF_CSV.with_name("mlperf_other_vendors.csv")
"""Published MLPerf results of other vendors' systems (AMD Instinct): validation only, never calibrated on."""
HELD_OUT_CSV = MLPERF_CSV.with_name("mlperf_held_out.csv")
"""NVIDIA's published MLPerf results on systems outside the calibration set (Vera Rubin NVL72): validation only."""


def cited(csv: Path) -> str:
    """How a page or profile names a published-results file: the repository's own path for a shipped one, else
    the file's name (never a path outside the repository)."""
    shipped = csv.resolve() in (MLPERF_CSV, OTHER_VENDORS_CSV, HELD_OUT_CSV)
    return f"reference/{csv.name}" if shipped else csv.name


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
