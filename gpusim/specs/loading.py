"""Reading YAML files into pydantic models, with errors that name the file and the field."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpusim.errors import InputError

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
    """Validate `data` as `model`; the first error names its field and what was expected (a check across fields
    names its field by starting its message with `FIELD: `)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])  # a misspelt name first
        loc = [str(p) for p in err["loc"] if "[" not in str(p)]  # not pydantic's union-member tags
        field = ".".join(loc) or "-"
        message = _unknown_field(model, loc) if err["type"] == "extra_forbidden" else err["msg"]
        message = message.removeprefix("Value error, ")  # pydantic's prefix for a validator's own message
        head, named, rest = message.partition(": ")
        if not loc and named and head in model.model_fields:
            field, message = head, rest
        raise InputError(source, field, message) from None


def _unknown_field(model: type[BaseModel], loc: list[str]) -> str:
    """'unknown field; did you mean X?', with the valid fields of the (nested) model that lacks it."""
    for part in loc[:-1]:
        info = model.model_fields.get(part)
        options = getattr(info.annotation, "__args__", (info.annotation,)) if info is not None else ()
        nested = [a for a in options if isinstance(a, type) and issubclass(a, BaseModel)]
        if not nested:
            return "unknown field"
        model = nested[0]
    valid = list(model.model_fields)
    close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown field; {hint}valid: {', '.join(valid)}"


def load_yaml_model(model: type[M], path: Path) -> M:
    """Read and validate one YAML file."""
    return validate(model, read_yaml(path), str(path))
