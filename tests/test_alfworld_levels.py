"""Generator difficulty levels: game_level of generated games, leveled
splits, bad levels, and level moves (a fresh game one level up / down in the
same room kind and scene) that are valid, expert-solvable and deterministic."""

import numpy as np
import pytest

from rla_jax.envs.alfworld import (
  expert_plan,
  game_level,
  generate_split,
  level_move,
  level_variant,
  make_env,
)
from rla_jax.envs.alfworld.generator import generate_valid_game, validate_game
from rla_jax.envs.alfworld.level_moves import classifies_at, level_target
from rla_jax.envs.alfworld.levels import LEVELS
from rla_jax.envs.alfworld.rooms import split_scenes
from rla_jax.envs.alfworld.types_tables import OPENABLE_RECEPTACLES


def _solves(game) -> bool:
  env = make_env("native", 1)
  env.reset([game])
  won = [False]
  for cmd in expert_plan(game):
    _, won, _, _ = env.step([cmd])
  return won == [True]


def _target_starts_closed(game) -> bool:
  rec_type = {r: t for r, t, _ in game.receptacles}
  obj_type = dict(game.objects)
  wanted = {game.object_target, game.toggle_target} - {""}
  return any(
    f[0] == "inReceptacle"
    and obj_type[f[1]] in wanted
    and rec_type[f[2]] in OPENABLE_RECEPTACLES
    for f in game.facts
  )


def _level_games(level, n=12, seed=3, split="train"):
  return generate_split(split, n, seed=seed, levels=[level])


def test_game_level_of_generated_games_of_each_level():
  by_level = {level: _level_games(level) for level in LEVELS}
  for level, games in by_level.items():
    assert all(game_level(g) <= level for g in games), level
    assert {g.task_type for g in games} <= set(LEVELS[level].task_types)
  assert all(
    3 <= len(g.receptacles) <= 4 and not _target_starts_closed(g)
    for g in by_level[1]
  )
  assert all(5 <= len(g.receptacles) <= 7 for g in by_level[2])
  assert {game_level(g) for g in by_level[1]} == {1}
  assert {game_level(g) for g in by_level[2]} == {2}
  treated = [g for g in by_level[3] if g.task_type.startswith("pick_")]
  treated = [g for g in treated if "then" in g.task_type]
  assert treated and all(game_level(g) == 3 for g in treated)
  assert any(game_level(g) == 4 for g in by_level[4])
  assert any(len(g.receptacles) > 7 for g in by_level[4])
  # level 2 (unlike level 1) lets targets start in closed receptacles
  assert any(_target_starts_closed(g) for g in _level_games(2, n=24))


def test_generate_split_with_levels_is_deterministic_and_alternates():
  mixed = generate_split("valid_seen", 10, seed=1, levels=[1, 2])
  assert mixed == generate_split("valid_seen", 10, seed=1, levels=[1, 2])
  assert {g.task_type for g in mixed} <= set(LEVELS[1].task_types)
  assert [game_level(g) for g in mixed] == [1, 2] * 5
  assert mixed != generate_split("valid_seen", 10, seed=1, levels=[1])
  for bad in ([5], [0], [1, 9], ["2"], [True]):
    with pytest.raises(ValueError, match=repr(bad[-1])):
      generate_split("train", 3, seed=0, levels=bad)
  with pytest.raises(ValueError, match="levels"):
    generate_split("train", 3, seed=0, levels=[])


def test_which_levels_a_task_type_classifies_at():
  assert [k for k in LEVELS if classifies_at("pick_and_place_simple", k)] == [
    1,
    2,
    4,
  ]
  assert [
    k for k in LEVELS if classifies_at("pick_heat_then_place_in_recep", k)
  ] == [3, 4]
  assert [k for k in LEVELS if classifies_at("pick_two_obj_and_place", k)] == [
    4
  ]


def test_level_moves_keep_type_room_and_scene_and_are_solvable():
  cases = [(1, "harder", 2), (2, "easier", 1), (2, "harder", 4)]
  for level, direction, expected in cases:
    for g in _level_games(level, n=4, seed=5):
      v = level_move(g, direction, np.random.default_rng(0))
      assert v is not None and game_level(v) == expected, (level, direction)
      assert (v.task_type, v.room, v.scene) == (g.task_type, g.room, g.scene)
      assert validate_game(v) == expert_plan(v) and _solves(v)
  top = _level_games(4, n=4, seed=5)
  assert all(level_target(g, "harder") is None for g in top)
  assert all(
    level_move(g, "harder", np.random.default_rng(0)) is None for g in top
  )
  bottom = _level_games(1, n=2, seed=5)
  assert all(
    level_move(g, "easier", np.random.default_rng(0)) is None for g in bottom
  )


def test_easier_move_without_the_type_draws_a_type_of_the_lower_level():
  two = [g for g in _level_games(4, n=12, seed=3) if "two" in g.task_type]
  assert two
  for g in two:
    v = level_move(g, "easier", np.random.default_rng(1))
    assert v is not None and game_level(v) < 4
    assert v.task_type in LEVELS[3].task_types and v.room == g.room
    assert _solves(v)


def test_level_variant_keeps_held_out_scenes_out_of_train():
  for g in _level_games(1, n=4, seed=2, split="valid_unseen"):
    v = level_variant(g, 2, np.random.default_rng(0))
    assert v.room == g.room and v.scene in split_scenes("train", g.room)
    assert game_level(v) == 2
    same = level_variant(g, 2, np.random.default_rng(0), split="valid_unseen")
    assert same.scene == g.scene
  with pytest.raises(ValueError, match="7"):
    level_variant(g, 7, np.random.default_rng(0))


def test_level_moves_are_deterministic_in_the_rng():
  g = _level_games(1, n=1, seed=8)[0]
  a = level_move(g, "harder", np.random.default_rng(4))
  b = level_move(g, "harder", np.random.default_rng(4))
  assert a == b
  others = {
    level_move(g, "harder", np.random.default_rng(s)).game_id for s in range(5)
  }
  assert len(others) > 1


def test_fixed_room_and_scene_are_checked():
  with pytest.raises(ValueError, match="bathroom"):
    generate_valid_game(
      "train", 0, 0, "pick_heat_then_place_in_recep", room="bathroom"
    )
  held_out = split_scenes("valid_unseen", "kitchen")[0]
  with pytest.raises(ValueError, match=str(held_out)):
    generate_valid_game(
      "train", 0, 0, "pick_and_place_simple", room="kitchen", scene=held_out
    )
