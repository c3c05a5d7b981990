"""Reading YAML files into pydantic models, with errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpusim.errors import InputError, unknown_name

ROOT = Path(__file__).resolve().parents[2]
"""The repository root, where hardware_profiles/, workloads/ and experiments/ live."""

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> dict:
    """Parse a YAML mapping, turning syntax errors into an InputError."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(str(path), "-", "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), "-", "is a directory, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), "-", f"not UTF-8 text (byte {exc.start}): not a YAML file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "-"
        raise InputError(str(path), where, f"malformed YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "-", "expected a YAML mapping at the top level")
    return data


def validate(model: type[M], data: dict, source: str) -> M:
    """Validate `data` as `model`; the first error names its field and what was expected."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "-"
        raise InputError(source, field, err["msg"]) from None


def load_yaml_model(model: type[M], path: Path) -> M:
    """Read and validate one YAML file."""
    return validate(model, read_yaml(path), str(path))


def catalog(folder: Path) -> dict[str, Path]:
    """Map each `*.yaml` file stem in `folder` to its path."""
    return {p.stem: p for p in sorted(Path(folder).glob("*.yaml"))}


def load_named(model: type[M], folder: Path, name: str, field: str) -> M:
    """Load the YAML named `name` from `folder`, or fail listing the valid names."""
    files = catalog(folder)
    if name not in files:
        raise unknown_name("command line", field, name, list(files))
    return load_yaml_model(model, files[name])
