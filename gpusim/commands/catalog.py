"""`gpusim list` and `gpusim show`: the profiles gpusim knows, with sources and derived figures."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("list", help="list hardware, models or benchmarks")
    ls.add_argument("kind", choices=["hardware", "models", "benchmarks"])
    ls.set_defaults(func=_cmd_list)
    sh = sub.add_parser("show", help="show one profile with its sources and derived figures")
    sh.add_argument("kind", choices=list(_KINDS))
    sh.add_argument("name", help="a profile name, or a YAML file by path")
    sh.add_argument("--yaml", action="store_true",
                    help="print the profile's own file, a starting point for your own (see docs/own-hardware.md)")
    sh.set_defaults(func=_cmd_show)

_KINDS = {"hardware": "systems", "gpu": "gpus", "fabric": "fabrics", "software": "software", "model": "models",
          "benchmark": "benchmarks"}
"""`gpusim show KIND` -> the catalog kind (gpusim/specs/catalog.py)."""


def _cmd_list(args: argparse.Namespace) -> int:
    from gpusim.specs.benchmark import benchmark_names
    from gpusim.specs.hardware import all_profiles
    from gpusim.specs.model import model_names

    if args.kind == "hardware":
        for kind, names in all_profiles().items():
            print(f"{kind}: {', '.join(names)}")
    else:
        print("\n".join(model_names() if args.kind == "models" else benchmark_names()))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    import yaml

    from gpusim.items import is_item, load_any_model
    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.catalog import resolve
    from gpusim.specs.hardware import load_hardware

    if args.yaml:
        print(resolve(_KINDS[args.kind], args.name, "command line", args.kind).read_text(), end="")
        return 0
    if args.kind == "hardware":
        hw = load_hardware(args.name)
        doc = {"system": hw.system.model_dump(exclude_none=True), "gpu": hw.gpu.model_dump(exclude_none=True),
               "nvlink": hw.nvlink.model_dump(exclude_none=True),
               "scaleout": hw.scaleout.model_dump(exclude_none=True),
               "derived": {k: round(v, 3) for k, v in hw.derived().items()}}
    elif args.kind == "model":
        m = load_any_model(args.name)
        doc = m.model_dump(exclude_none=True) if is_item(m) else {**m.model_dump(exclude_none=True), "derived": {
            "total_params_b": round(m.total_params / 1e9, 2), "active_params_b": round(m.active_params / 1e9, 2),
            "kv_bytes_per_token_bf16": m.kv_bytes_per_token(2)}}
    elif args.kind == "benchmark":
        doc = load_benchmark(args.name).model_dump(exclude_none=True)
    else:
        from gpusim.specs.hardware import load_fabric, load_gpu
        from gpusim.specs.software import load_software

        load = {"gpu": load_gpu, "fabric": load_fabric, "software": load_software}[args.kind]
        doc = load(args.name).model_dump(exclude_none=True)
    print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), end="")
    return 0
