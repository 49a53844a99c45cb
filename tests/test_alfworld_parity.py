"""Parity: the native engine and the installed alfworld/textworld engine give
identical observations, sorted admissible command lists and won flags, on expert
and random (incl. invalid) command sequences over 50+ generated games of all 6
task types, a few perturbed and full-size games, two games of each difficulty
level 1-4 and one level move, and an ALFRED-style mangled-id game file. The
expert wins in TextWorld too."""

import os
import random
import tempfile

import numpy as np
import pytest

os.environ.setdefault(
  "ALFWORLD_DATA", tempfile.mkdtemp(prefix="rla_alfworld_test_")
)
pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from rla_jax.envs.alfworld import (
  expert_plan,
  game_level,
  generate_split,
  level_move,
  load_game,
  make_env,
  next_action,
  perturb_game,
)
from rla_jax.envs.alfworld.levels import LEVELS
from rla_jax.envs.alfworld.types_tables import TASK_TYPE_NAMES

INVALID = [
  "jump",
  "go to the moon",
  "take apple 9 from fridge 9",
  "look ",
  "Look",
  "open",
  "",
]


def _parity_games():
  small = generate_split(
    "valid_seen", 24, seed=0, room_size="small"
  ) + generate_split("valid_unseen", 24, seed=0, room_size="small")
  rng = np.random.default_rng(0)
  perturbed = [
    p
    for p in (
      perturb_game(small[0], "harder", rng),
      perturb_game(small[1], "easier", rng),
    )
    if p
  ]
  full = generate_split("valid_unseen", 2, seed=1, room_size="full")
  return small + perturbed + full + _level_games()


def _level_games():
  """Two generated games per difficulty level, and a level-1 game's move to
  level 2 (fixed room and scene); every level is a game_level here."""
  games = [
    g
    for level in sorted(LEVELS)
    for g in generate_split("valid_unseen", 2, seed=level, levels=[level])
  ]
  moved = level_move(
    games[0], "harder", np.random.default_rng(0), split="valid_unseen"
  )
  assert game_level(moved) == 2 and moved.scene == games[0].scene
  games.append(moved)
  assert {game_level(g) for g in games} == set(LEVELS)
  return games


def _compare(nat_out, tw_out, where):
  (o1, i1), (o2, i2) = nat_out, tw_out
  assert o1 == o2, where
  assert i1["admissible_commands"] == i2["admissible_commands"], where
  assert i1["won"] == i2["won"], where


def _run_episode(nat, tw, game, commands_for, where):
  _compare(nat.reset([game]), tw.reset([game]), (where, "reset"))
  history = []
  for k in range(50):
    if nat.done[0]:
      break
    cmd = commands_for(game, history, nat)
    if cmd is None:
      break
    o1, w1, d1, i1 = nat.step([cmd])
    o2, w2, d2, i2 = tw.step([cmd])
    _compare((o1, i1), (o2, i2), (where, k, cmd))
    assert (w1, d1) == (w2, d2)
    history.append(cmd)
  return nat._won[0], tw._won[0]


@pytest.mark.slow
def test_native_matches_textworld(tmp_path):
  from test_alfworld_engine import alfred_style_file

  games = _parity_games()
  assert len(games) >= 50 and {g.task_type for g in games} == set(
    TASK_TYPE_NAMES
  )
  games.append(load_game(alfred_style_file(tmp_path)))
  nat, tw = make_env("native", 1), make_env("textworld", 1)
  rng = random.Random(0)

  def expert(game, history, env):
    plan = expert_plan(game)
    return plan[len(history)] if len(history) < len(plan) else None

  def mixed(
    game, history, env
  ):  # random admissible / invalid / expert moves: reaches deep states
    if len(history) >= 10:
      return None
    u = rng.random()
    if u < 0.2:
      return rng.choice(INVALID)
    if u < 0.5:
      return next_action(game, history) or "look"
    return rng.choice(env._adm[0])

  for i, g in enumerate(games):
    won_native, won_tw = _run_episode(
      nat, tw, g, expert, (i, g.game_id, "expert")
    )
    assert won_native and won_tw, (i, g.game_id)
    _run_episode(nat, tw, g, mixed, (i, g.game_id, "mixed"))
