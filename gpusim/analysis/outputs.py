"""Names of the files a sweep writes into its folder (`gpusim.sweep`), which the plots and the report read."""

RESULTS = "results.parquet"
"""One row per point: its parameters and summary (or its error)."""
RESULTS_CSV = "results.csv"
"""The same rows, for spreadsheets."""
