"""gpusim's silicon errors beside NVIDIA AIConfigurator 0.12.0's, configuration by configuration.

    gpusim validate silicon --held-out --out out/silicon
    python benchmarks/aic_compare.py out/silicon/rows.csv --baseline PATH [--silicon PATH]

--baseline PATH is a report of AIConfigurator 0.12.0 (PyPI `aiconfigurator==0.12.0`, Apache-2.0) run on its
own silicon sample; the repository does not ship one. Its Appendix A has one Markdown row per configuration:
`exact`, then model, system, backend and mode (split by escaped pipes), rows predicted / rows, then TTFT and
TPOT each as MAPE, median, bias and share <= 25% (percentages). --silicon defaults to the sample inside
the installed aiconfigurator-core (`aiconfigurator_core/systems/silicon_sample.csv`), as `gpusim validate
silicon` does. The baseline gives AIC's MAPE per exact configuration
(model | system | backend | mode) over the rows AIC predicts, not per row, so the comparison is made on the
configurations both predict (at least `--min-rows` rows each): gpusim's MAPE over its rows of the
configuration beside AIC's, and both averaged with the weights of gpusim's rows. AIC's rows are all it
predicts of a configuration; gpusim's are those of `rows.csv` (the held-out 30% with `--held-out`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpusim.errors import InputError
from gpusim.validate.datasets import silicon_path
from gpusim.validate.silicon import read_rows, scored_table

_ROW = re.compile(r"^\| exact \| (?P<config>.+?) \| (?P<n>\d+) / \d+ \| (?P<ttft>[\d.]+) \|"
                  r"(?:[^|]*\|){3} (?P<tpot>[\d.]+) \|")
"""One configuration of Appendix A: rows predicted, TTFT MAPE, then (after median, bias, share ≤ 25%) TPOT MAPE."""


def aic_configs(path: Path) -> pd.DataFrame:
    """AIC's per-configuration rows predicted and MAPE (fractions) from the baseline's Appendix A."""
    out = []
    for line in path.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            model, system, backend, mode = (p.strip() for p in m["config"].split("\\|"))
            out.append({"model": model, "system": system, "backend": backend, "mode": mode, "aic_rows": int(m["n"]),
                        "aic_ttft": float(m["ttft"]) / 100, "aic_tpot": float(m["tpot"]) / 100})
    return pd.DataFrame(out)


def compare(rows_csv: Path, baseline: Path, silicon: Path, min_rows: int = 5) -> pd.DataFrame:
    """One row per configuration both predict: gpusim's rows and MAPE beside AIC's."""
    pred = pd.read_csv(rows_csv)
    sample = read_rows(silicon)
    t = scored_table(sample.set_index("id").loc[pred["id"]].reset_index(), pred, sample)
    t = t[t["predicted"]].assign(model=t["model_path"].str.split("/").str[-1])
    for m in ("ttft", "tpot"):
        t[f"ape_{m}"] = (t[f"predicted_{m}"] / t[f"measured_{m}"] - 1).abs()
    ours = (t.groupby(["model", "system", "backend", "mode"])
            .agg(rows=("id", "size"), ttft=("ape_ttft", "mean"), tpot=("ape_tpot", "mean")).reset_index())
    both = ours.merge(aic_configs(baseline), on=["model", "system", "backend", "mode"])
    return both[(both["rows"] >= min_rows) & (both["aic_rows"] >= min_rows)].reset_index(drop=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=Path, help="rows.csv of `gpusim validate silicon --out`")
    ap.add_argument("--baseline", type=Path,
                    help="AIConfigurator 0.12.0's accuracy report on its silicon sample (Appendix A: MAPE per config)")
    ap.add_argument("--silicon", type=Path, help="silicon_sample.csv (default: the installed aiconfigurator-core's)")
    ap.add_argument("--min-rows", type=int, default=5)
    args = ap.parse_args()
    if args.baseline is None or not args.baseline.is_file():
        given = "not given" if args.baseline is None else f"{str(args.baseline)!r} is not a file"
        print(f"aic_compare.py: --baseline: {given}; expected the path of AIConfigurator's accuracy report "
              "(Markdown with an Appendix A table of '| exact | model \\| system \\| backend \\| mode | ...' rows)",
              file=sys.stderr)
        return 2
    try:
        silicon = silicon_path(args.silicon, "--silicon")
    except InputError as e:
        print(f"aic_compare.py: {e}", file=sys.stderr)
        return 2
    d = compare(args.rows, args.baseline, silicon, args.min_rows)
    print("| configuration | gpusim rows | TTFT gpusim / AIC | TPOT gpusim / AIC |\n|---|---|---|---|")
    for r in d.itertuples():
        print(f"| {r.model}, {r.system}, {r.backend}, {r.mode} | {r.rows} | {r.ttft:.0%} / {r.aic_ttft:.0%} | "
              f"{r.tpot:.0%} / {r.aic_tpot:.0%} |")
    w = d["rows"]
    print(f"\n{len(d)} configurations, {int(w.sum())} gpusim rows; weighted by gpusim's rows: TTFT "
          f"{np.average(d['ttft'], weights=w):.1%} (AIC {np.average(d['aic_ttft'], weights=w):.1%}), TPOT "
          f"{np.average(d['tpot'], weights=w):.1%} (AIC {np.average(d['aic_tpot'], weights=w):.1%}); gpusim "
          f"lower in TTFT on {(d['ttft'] < d['aic_ttft']).sum()}, in TPOT on {(d['tpot'] < d['aic_tpot']).sum()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
