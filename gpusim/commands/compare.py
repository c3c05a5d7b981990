"""`gpusim compare`: one question on several systems or experiment files, side by side with ratios."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpusim.commands.run import SCENARIOS, _qps
from gpusim.errors import InputError

if TYPE_CHECKING:
    from gpusim.compare import Side

_SHARED = ("systems", "benchmark", "model", "scenario", "qps", "duration_s", "samples", "seed", "timing")
EXPERIMENT_KEYS = {"benchmark", "scenario", "qps", "deployment", "trace", "concurrency", "samples", "duration_s"}
"""A YAML side with any of these keys is an experiment file; any other YAML is a system profile."""


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compare", help="one question on several systems or experiment files, with ratios",
                       description="Run the same question on every side and print one table with each side's "
                                   "deployment and its ratios to the first side.")
    c.add_argument("sides", nargs="+", help="systems (gb200-nvl72, or a system YAML by path) or experiment YAMLs")
    c.add_argument("--benchmark", help="MLPerf benchmark (default deepseek-r1; an experiment file's own wins)")
    c.add_argument("--model", help="serve this model instead of the benchmark's")
    c.add_argument("--scenario", choices=SCENARIOS)
    c.add_argument("--qps", type=_qps, help="Poisson arrival rate, or `peak` (server, interactive)")
    c.add_argument("--systems", type=int, help="systems joined over the scale-out fabric, on every side")
    c.add_argument("--duration", dest="duration_s", type=float, help="seconds of arrivals (Offline: sizes the run)")
    c.add_argument("--samples", type=int, help="requests to issue")
    c.add_argument("--seed", type=int)
    c.add_argument("--timing", choices=["roofline", "table"])
    c.add_argument("--same-deployment", action="store_true",
                   help="every side runs the first side's deployment (a what-if diff: what changed, what moved, why)")
    c.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for a deployment search")
    c.add_argument("--json", action="store_true", help="print exactly one JSON object")
    c.set_defaults(func=_cmd_compare)


def side(text: str, flags: dict) -> Side:
    """A side from its command-line word: an experiment YAML (its fields, then the flags), else a system by name
    or path, with the flags."""
    from gpusim.compare import Side
    from gpusim.specs.experiment import RunSpec, load_run_spec
    from gpusim.specs.loading import read_yaml, validate

    path = Path(text)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = read_yaml(path)
        if isinstance(data, dict) and EXPERIMENT_KEYS & data.keys():
            base = load_run_spec(path)
            return Side(path.stem, validate(RunSpec, {**base.model_dump(exclude_unset=True), **flags}, text), text)
    return Side(path.stem if path.suffix else text, validate(RunSpec, {"hardware": text, **flags}, "command line"),
                "command line")


def _cmd_compare(args: argparse.Namespace) -> int:
    from gpusim.compare import compare

    flags = {k: getattr(args, k) for k in _SHARED if getattr(args, k) is not None}
    sides = [side(s, flags) for s in args.sides]
    if len({s.label for s in sides}) < len(sides):
        raise InputError("command line", "sides", "two sides have the same name; give each side once")
    result = compare(sides, args.same_deployment, args.workers)
    summary = result.summary()
    print(json.dumps(summary) if args.json else format_comparison(summary))
    return 0


def format_comparison(c: dict) -> str:
    """The comparison as a text table: one column per side, ratios to the first side in parentheses."""
    from gpusim.compare import METRICS

    sides = c["sides"]
    width = 2 + max(24, *(len(s[k] or "") for s in sides for k in ("label", "deployment", "deployment_origin")))
    rows: list[tuple[str, list[str]]] = [
        ("", [s["label"] for s in sides]),
        ("deployment", [s["deployment"] for s in sides]),
        ("  from", [s["deployment_origin"] or "" for s in sides]),
        ("GPUs", [str(s["num_gpus"]) for s in sides]),
    ]
    for key, label, fmt in METRICS:
        cells = []
        for s in sides:
            v = s.get(key)
            v = None if v is None else v * 1e3 if key.startswith("tpot") else v
            r = s["ratios"].get(key) if s["ratios"] else None
            cells.append("—" if v is None else fmt.format(v) + (f" ({r:.2f}x)" if r is not None else ""))
        rows.append((label, cells))
    steps = [s["decode_step"] for s in sides]
    if all(steps):
        rows.append((_step_title(c["decode_shape"]), [""] * len(sides)))
        for part in ("total", "compute", "memory", "communication", "overhead"):
            base = steps[0][f"{part}_s"]
            rows.append((f"  {part} ms", [f"{st[f'{part}_s'] * 1e3:.2f}" + (
                f" ({st[f'{part}_s'] / base:.2f}x)" if i and base else "") for i, st in enumerate(steps)]))
        for op in _moved_ops(steps):
            rows.append((f"  {op} ms", [f"{st['by_op'].get(op, 0.0) * 1e3:.2f}" for st in steps]))
    held = "every side on the first side's deployment" if c["same_deployment"] else "each side on its own deployment"
    lines = [f"compare {c['benchmark']}, scenario {c['scenario']} ({held})"]
    lines += [f"{label:<28}" + "".join(f"{cell:<{width}}" for cell in cells) for label, cells in rows]
    for s in sides[1:]:
        if s["changes"]:
            lines.append(f"what changed, {sides[0]['label']} → {s['label']}:")
            lines += [f"  {line}" for line in s["changes"]]
    return "\n".join(line.rstrip() for line in lines)


def _step_title(shape: dict | None) -> str:
    if not shape:
        return "decode step (first side's)"
    seqs = shape["decode_seqs"]
    return f"decode step, {seqs:,} seqs × {shape['decode_context'] / max(1, seqs):,.0f} ctx"


def _moved_ops(steps: list[dict], n: int = 4) -> list[str]:
    """The `n` ops whose time differs most between the sides (largest first)."""
    ops = {op for st in steps for op in st["by_op"]}
    spread = {op: max(st["by_op"].get(op, 0.0) for st in steps) - min(st["by_op"].get(op, 0.0) for st in steps)
              for op in ops}
    return [op for op in sorted(spread, key=lambda o: -spread[o]) if spread[op] > 0][:n]
