"""The `gpusim` command. Each module in gpusim/commands/ adds one or more subcommands."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import gpusim.commands
from gpusim.errors import InputError

EXIT_INPUT = 2


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"gpusim: error: {exc}", file=sys.stderr)
        return EXIT_INPUT


def parser() -> argparse.ArgumentParser:
    """The argument parser with every command module's subcommands (`register(subparsers)`)."""
    p = argparse.ArgumentParser(prog="gpusim", description="Simulate GPU racks serving LLM inference.")
    sub = p.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(gpusim.commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"gpusim.commands.{info.name}").register(sub)
    return p


if __name__ == "__main__":
    sys.exit(main())
