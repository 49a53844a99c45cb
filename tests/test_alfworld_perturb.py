"""Environment adaptation: perturbed games are valid, solvable,
change the goal as asked and their task text names the new goal."""

import numpy as np
import pytest

from rla_jax.envs.alfworld import (
  apply_goal_tokens,
  describe_game_for_proposal,
  expert_plan,
  generate_split,
  make_env,
  perturb_game,
)
from rla_jax.envs.alfworld.perturb import _instances
from rla_jax.envs.alfworld.types_tables import TASK_TYPE_NAMES


def _solves(game) -> bool:
  env = make_env("native", 1)
  env.reset([game])
  won = [False]
  for cmd in expert_plan(game):
    _, won, _, _ = env.step([cmd])
  return won == [True]


def test_perturbations_are_solvable_and_change_the_goal():
  games = generate_split("valid_seen", 36, seed=2, room_size="small")
  rng = np.random.default_rng(0)
  made = {"harder": 0, "easier": 0}
  for g in games:
    for direction in ("harder", "easier"):
      p = perturb_game(g, direction, rng)
      if p is None:
        continue
      made[direction] += 1
      assert (
        p.game_id != g.game_id and p.task_type == g.task_type and _solves(p)
      )
      assert p.object_target.lower() in p.task_text
      assert (p.toggle_target or p.parent_target).lower() in p.task_text
      steps_old, steps_new = len(expert_plan(g)), len(expert_plan(p))
      if direction == "harder":
        assert (
          steps_new > steps_old
          or _instances(p, p.object_target) < _instances(g, g.object_target)
          or len(p.objects) > len(g.objects)
        )
      else:
        assert steps_new <= steps_old
  assert made["harder"] >= 18 and made["easier"] >= 18


def test_apply_goal_tokens_rules():
  games = generate_split("valid_seen", 40, seed=0, room_size="full")
  g = next(x for x in games if x.task_type == "pick_and_place_simple")
  objs = sorted({t for _, t in g.objects} - {"DeskLamp", "FloorLamp"})
  done = 0
  for o in objs:
    for r in sorted({t for _, t, _ in g.receptacles}):
      try:
        new = apply_goal_tokens(g, o + "Type", r)  # suffix optional
      except ValueError:
        continue
      assert (new.object_target, new.parent_target) == (o, r) and _solves(new)
      assert f"{o.lower()} " in new.task_text + " " and new.task_text.endswith(
        r.lower()
      )
      swapped = apply_goal_tokens(
        g, r + "Type", o + "Type"
      )  # reversed order is swapped back
      assert swapped == new
      done += 1
  assert done >= 3
  with pytest.raises(ValueError, match="unknown"):
    apply_goal_tokens(g, "UnicornType", "FridgeType")
  with pytest.raises(ValueError):
    apply_goal_tokens(
      g, "TowelType", "CoffeeMachineType"
    )  # a coffee machine holds only mugs
  look = next(x for x in games if x.task_type == "look_at_obj_in_light")
  with pytest.raises(ValueError):
    apply_goal_tokens(
      look, look.object_target, "CounterTopType"
    )  # look tasks need a lamp


def test_describe_game_for_proposal_lists_world():
  for g in generate_split("valid_unseen", 6, seed=0, room_size="small"):
    text = describe_game_for_proposal(g)
    assert g.task_text in text and f"{g.object_target}Type" in text
    for _, t, _ in g.receptacles:
      assert f"{t}Type:" in text
    assert "canContain" in text and "inReceptacle" in text
  assert {
    g.task_type
    for g in generate_split("valid_unseen", 12, seed=0, room_size="small")
  } <= set(TASK_TYPE_NAMES)
