"""RuleBasedEnvModel: harder / easier proposals include a move one generator
level up / down next to the perturbations, rank it as the strongest change,
never pass the top level, and are valid, expert-solvable and deterministic."""

import numpy as np

from rla_jax.envs.alfworld import (
  expert_plan,
  game_level,
  generate_split,
  make_env,
)
from rla_jax.envs.alfworld.generator import validate_game
from rla_jax.rl.env_model import Feedback, RuleBasedEnvModel

EXTREME = Feedback(accuracy=1.0, failed=[])  # all succeed: strongest change
MILD = Feedback(accuracy=0.9, failed=[])


def _games(level, n=3, seed=6):
  return generate_split("train", n, seed=seed, levels=[level])


def _solves(game) -> bool:
  env = make_env("native", 1)
  env.reset([game])
  won = [False]
  for cmd in expert_plan(game):
    _, won, _, _ = env.step([cmd])
  return won == [True]


def test_harder_candidates_of_level_1_include_level_2_of_the_same_type():
  model = RuleBasedEnvModel()
  for g in _games(1):
    cands = model.candidates(g, "harder", np.random.default_rng(0))
    up = [v for v in cands if game_level(v) == 2]
    assert up and all(v.task_type == g.task_type for v in up)
    assert all(validate_game(v) and _solves(v) for v in cands)
    chosen = model.propose(g, "harder", EXTREME, np.random.default_rng(0))
    assert game_level(chosen) == 2 and chosen.scene == g.scene
    mild = model.propose(g, "harder", MILD, np.random.default_rng(0))
    assert mild in cands
    plain = RuleBasedEnvModel(level_moves=False)
    assert all(  # perturbations only: the room's receptacles stay
      v.receptacles == g.receptacles
      for v in plain.candidates(g, "harder", np.random.default_rng(0))
    )
    assert any(v.receptacles != g.receptacles for v in cands)


def test_easier_candidates_of_level_2_include_level_1():
  model = RuleBasedEnvModel()
  for g in _games(2):
    cands = model.candidates(g, "easier", np.random.default_rng(0))
    assert any(game_level(v) == 1 for v in cands)
    assert all(_solves(v) for v in cands)
    fail_all = Feedback(accuracy=0.0, failed=[])
    chosen = model.propose(g, "easier", fail_all, np.random.default_rng(0))
    assert game_level(chosen) == 1 and chosen.task_type == g.task_type


def test_top_level_harder_proposals_stay_at_level_4():
  model = RuleBasedEnvModel()
  tops = [g for g in _games(4, n=4) if game_level(g) == 4]
  assert tops
  for g in tops:
    for v in model.candidates(g, "harder", np.random.default_rng(0)):
      # no fresh game: only perturbations, which keep the room's receptacles
      assert game_level(v) == 4 and v.receptacles == g.receptacles
      assert _solves(v)


def test_proposals_are_deterministic_in_the_rng():
  model = RuleBasedEnvModel()
  g = _games(1, n=1, seed=9)[0]
  for direction, feedback in (("harder", EXTREME), ("easier", MILD)):
    a = model.propose(g, direction, feedback, np.random.default_rng(3))
    b = model.propose(g, direction, feedback, np.random.default_rng(3))
    assert a is not None and a == b
