"""Launch recipes of the harnesses that measured the silicon sample (gpusim/validate/launch_recipes.yaml): the
deployment fields a row's launch set, applied to every aggregated row whose `when` they match."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Dtype
from gpusim.specs.loading import load_yaml_model
from gpusim.specs.sourced import Grade

RECIPES_FILE = Path(__file__).with_name("launch_recipes.yaml")


@dataclass(frozen=True)
class LaunchedRow:
    """What a recipe may match of one aggregated silicon row, as the reader has it."""

    backend: str
    mode: str
    model: str
    system: str
    weights: str
    isl: int
    osl: int
    concurrency: int
    tp: int
    """GPUs of the instance (gpusim's tp)."""
    attention_dp: bool
    version: str = ""
    """The engine's version as the row records it (`backend_version`: 0.19.0, nightly-…)."""


class When(BaseModel):
    """The conditions of a recipe; every stated one must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str | None = None
    mode: str | None = None
    models: tuple[str, ...] | None = None
    systems: tuple[str, ...] | None = None
    weights: Dtype | None = None
    isl: int | None = None
    osl: int | None = None
    attention_dp: bool | None = None
    tp_below: int | None = None
    concurrency_from: int | None = None
    concurrency_below: int | None = None
    versions: tuple[str, ...] | None = None
    """Engine versions (`backend_version`): the launch scripts change with the image they pin."""

    def matches(self, row: LaunchedRow) -> bool:
        equal = (("backend", row.backend), ("mode", row.mode), ("weights", row.weights), ("isl", row.isl),
                 ("osl", row.osl), ("attention_dp", row.attention_dp))
        return (all(getattr(self, name) is None or getattr(self, name) == value for name, value in equal)
                and (self.models is None or row.model in self.models)
                and (self.systems is None or row.system in self.systems)
                and (self.versions is None or row.version in self.versions)
                and (self.tp_below is None or row.tp < self.tp_below)
                and (self.concurrency_from is None or row.concurrency >= self.concurrency_from)
                and (self.concurrency_below is None or row.concurrency < self.concurrency_below))


class Recipe(BaseModel):
    """One launch recipe: where it comes from, which rows it covers, the deployment fields it sets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    harness: str
    source: str
    grade: Grade
    when: When
    launch: dict[str, Any] = Field(min_length=1)
    """Deployment fields and their values, typed as the Deployment types them. A `max_num_tokens` is per
    data-parallel engine, as the engines' flags are (`--max-num-batched-tokens` per vLLM DP engine, TensorRT-LLM's
    `max_num_tokens` per attention-DP rank); the silicon reader multiplies it by the row's attention-DP size."""
    note: str | None = None
    """The status note after '<harness> launch: ', formatted with the settings; default one '<field> <value>'
    note per setting."""

    @field_validator("launch")
    @classmethod
    def _deployment_fields(cls, launch: dict[str, Any]) -> dict[str, Any]:
        fields = Deployment.model_fields
        unknown = [name for name in launch if name not in fields]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a deployment field; valid: {', '.join(fields)}")
        return {name: TypeAdapter(_field_type(name)).validate_python(value) for name, value in launch.items()}

    def notes(self) -> list[str]:
        lead = f"{self.harness} launch: "
        if self.note is not None:
            return [lead + self.note.format(**self.launch)]
        return [f"{lead}{name} {value}" for name, value in self.launch.items()]


def _field_type(name: str) -> Any:
    """A Deployment field's type with its constraints (ge=1, …)."""
    info = Deployment.model_fields[name]
    return Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation


class LaunchRecipes(BaseModel):
    """launch_recipes.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recipes: tuple[Recipe, ...]


@cache
def launch_recipes(path: Path = RECIPES_FILE) -> tuple[Recipe, ...]:
    """The recipes of `path` (the shipped file by default), checked."""
    return load_yaml_model(LaunchRecipes, path).recipes


def launch_settings(row: LaunchedRow, recipes: tuple[Recipe, ...] | None = None) -> tuple[dict[str, Any], list[str]]:
    """(deployment fields, status notes) of every recipe that matches `row`, in file order (a later recipe's
    setting wins)."""
    settings: dict[str, Any] = {}
    notes: list[str] = []
    for recipe in launch_recipes() if recipes is None else recipes:
        if recipe.when.matches(row):
            settings.update(recipe.launch)
            notes += recipe.notes()
    return settings, notes
