"""Subcommands of `gpusim`: each module defines `register(subparsers)` and the functions it binds."""
