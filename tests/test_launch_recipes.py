"""Launch recipes as data (gpusim/validate/launch_recipes.yaml): checked on load, applied generically. What the
shipped recipes do to silicon rows is tested in test_validate.py (test_inferencex_*)."""

from __future__ import annotations

import pytest

from gpusim.errors import InputError
from gpusim.specs.deployment import BatchWait
from gpusim.validate.recipes import LaunchedRow, launch_recipes, launch_settings

ROW = LaunchedRow(backend="trtllm", mode="agg", model="toy", system="b200_sxm", weights="fp8", isl=1024, osl=1024,
                  concurrency=64, tp=4, attention_dp=False)

TOY = """recipes:
  - name: toy-wait
    harness: Toy
    source: a toy launch script
    grade: D
    when: {models: [toy], concurrency_from: 32, tp_below: 8}
    launch: {batch_wait: {timeout_iters: 5, max_tokens_ratio: 0.5}}
  - name: toy-tokens
    harness: Toy
    source: a toy launch script
    grade: D
    when: {models: [toy]}
    launch: {max_num_tokens: 4096}
    note: tokens {max_num_tokens}
"""


def test_every_shipped_recipe_names_its_source_and_grade() -> None:
    recipes = launch_recipes()
    assert len(recipes) >= 6
    assert all(r.source.strip() and r.grade in "ABCD" for r in recipes)
    assert len({r.name for r in recipes}) == len(recipes)


def test_recipes_apply_by_their_conditions_in_file_order(tmp_path) -> None:
    path = tmp_path / "recipes.yaml"
    path.write_text(TOY)
    recipes = launch_recipes(path)
    settings, notes = launch_settings(ROW, recipes)
    assert settings == {"batch_wait": BatchWait(timeout_iters=5, max_tokens_ratio=0.5), "max_num_tokens": 4096}
    assert notes == ["Toy launch: batch_wait timeout_iters=5 max_tokens_ratio=0.5", "Toy launch: tokens 4096"]
    wide = LaunchedRow(**{**ROW.__dict__, "tp": 8})
    assert launch_settings(wide, recipes)[0] == {"max_num_tokens": 4096}
    other = LaunchedRow(**{**ROW.__dict__, "model": "other"})
    assert launch_settings(other, recipes) == ({}, [])


@pytest.mark.parametrize(("lines", "field", "says"), [
    ("    launch: {max_num_tokens: 4096}", "recipes.0.source", "Field required"),
    ("    source: s\n    launch: {max_num_token: 4096}", "recipes.0.launch",
     "'max_num_token' is not a deployment field; valid: tp, pp, ep"),
    ("    source: s\n    launch: {max_num_tokens: 0}", "recipes.0.launch", "greater than or equal to 1"),
    ("    source: s\n    launch: {max_num_tokens: 1}\n    whenever: {}", "recipes.0.whenever", "unknown field"),
])
def test_a_bad_recipe_file_names_the_file_and_field(tmp_path, lines, field, says) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"recipes:\n  - name: x\n    harness: H\n    grade: D\n    when: {{}}\n{lines}\n")
    with pytest.raises(InputError) as info:
        launch_recipes(path)
    assert (info.value.source, info.value.field) == (str(path), field)
    assert says in info.value.message
