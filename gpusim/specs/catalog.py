"""Where profiles live: the shipped ones (package data), the folders of `GPUSIM_PATH`, and files given by path.

Each kind of profile has a shipped folder inside the package (`gpusim.hardware_profiles` and `gpusim.workloads`,
which are the repository's top-level `hardware_profiles/` and `workloads/`). `GPUSIM_PATH` lists more folders
(separated by the OS path separator, `:` on Linux), each laid out by kind: `systems/`, `gpus/`, `fabrics/`,
`software/`, `models/`, `benchmarks/`. A name is looked up in the `GPUSIM_PATH` folders first, in order, then
in the shipped ones. A reference that ends in `.yaml`/`.yml` or contains a `/` is a file: relative to the
file that names it (or to the working directory on the command line).
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from gpusim.errors import InputError
from gpusim.specs.loading import read_yaml, validate

M = TypeVar("M", bound=BaseModel)

KINDS: dict[str, tuple[str, str]] = {
    "systems": ("hardware_profiles", "systems"),
    "gpus": ("hardware_profiles", "gpus"),
    "fabrics": ("hardware_profiles", "fabrics"),
    "software": ("hardware_profiles", "software"),
    "models": ("workloads", "models"),
    "benchmarks": ("workloads", "benchmarks"),
}
"""Kind of profile -> (shipped data package under gpusim, its folder)."""

ENV = "GPUSIM_PATH"


def shipped_root(package: str) -> Path:
    """The folder of a shipped data package, `hardware_profiles` or `workloads`: a checkout's own (the code
    imported from a repository, editable install or on sys.path, reads the profiles beside it, not those an
    editable install of another checkout maps the package to), else the installed package's."""
    root = Path(__file__).resolve().parents[2]
    if (root / package / "__init__.py").is_file():
        return root / package
    return Path(str(resources.files(f"gpusim.{package}")))


def shipped_dir(kind: str) -> Path:
    """The shipped folder of one kind of profile."""
    package, folder = KINDS[kind]
    return shipped_root(package) / folder


def user_dirs(kind: str) -> list[Path]:
    """The `GPUSIM_PATH` folders for `kind` that exist, in order."""
    entries = [e for e in os.environ.get(ENV, "").split(os.pathsep) if e]
    return [Path(e).expanduser() / kind for e in entries if (Path(e).expanduser() / kind).is_dir()]


def catalog(kind: str) -> dict[str, Path]:
    """Every name of `kind` with its file; a `GPUSIM_PATH` folder's file shadows a later one of the same name."""
    return _catalog(kind, os.environ.get(ENV, ""))


@cache
def _catalog(kind: str, _env: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in [*user_dirs(kind), shipped_dir(kind)]:
        for path in sorted(folder.glob("*.yaml")):
            found.setdefault(path.stem, path)
    return dict(sorted(found.items()))


def is_path(ref: str) -> bool:
    """True when `ref` names a file rather than a profile."""
    return ref.endswith((".yaml", ".yml")) or "/" in ref or os.sep in ref


def resolve(kind: str, ref: str, source: str, field: str, base: Path | None = None) -> Path:
    """The file `ref` names: a path (relative to `base`, a referencing file's folder) or a catalog name."""
    what = kind.removesuffix("s")
    if is_path(ref):
        path = Path(ref).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise InputError(source, field, f"file {str(path)!r} not found; valid: a {what} name "
                             f"({', '.join(catalog(kind))}) or a YAML file")
        return path.resolve()
    files = catalog(kind)
    if ref not in files:
        raise InputError(source, field, f"unknown {ref!r}; valid: {', '.join(files)}, or a path to a {what} YAML file")
    return files[ref]


def names(kind: str) -> list[str]:
    """The profile names of `kind`, shipped and from `GPUSIM_PATH`."""
    return list(catalog(kind))


def load_ref(model: type[M], kind: str, ref: str, field: str, source: str = "command line",
             base: Path | None = None, refs: dict[str, str] | None = None) -> M:
    """Load the profile `ref` names. `refs` maps the file's own reference fields to their kinds: a reference
    that is a relative path is made absolute against the file's folder, so it resolves from anywhere."""
    path = resolve(kind, ref, source, field, base)
    return _load(model, path, tuple(sorted((refs or {}).items())), path.stat().st_mtime_ns)


def clear_cache() -> None:
    """Forget parsed files and folder listings (after writing a profile in this process)."""
    _load.cache_clear()
    _catalog.cache_clear()


@cache
def _load(model: type[M], path: Path, refs: tuple[tuple[str, str], ...], _mtime_ns: int) -> M:
    """One parsed file (cached per file version: a rewritten profile is read again)."""
    data = read_yaml(path)
    for name, kind in refs:
        value = data.get(name)
        if isinstance(value, str):  # checked here, so a bad reference names this file
            target = resolve(kind, value, str(path), name, path.parent)
            data[name] = str(target) if is_path(value) else value
    return validate(model, data, str(path))
