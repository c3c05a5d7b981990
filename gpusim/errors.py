"""User-facing input errors: one line naming the file, the field and what would be valid."""

from __future__ import annotations


class InputError(Exception):
    """A malformed or impossible input. The CLI prints it as one line and exits with status 2."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source, self.field, self.message = source, field, message
        super().__init__(source, field, message)  # args rebuild it (SimPy re-raises, pickling)

    def __str__(self) -> str:
        return f"{self.source}: {self.field}: {self.message}"


def unknown_name(source: str, field: str, name: str, valid: list[str]) -> InputError:
    """The error for a name that is not one of the known ones."""
    return InputError(source, field, f"unknown {name!r}; valid: {', '.join(sorted(valid))}")
