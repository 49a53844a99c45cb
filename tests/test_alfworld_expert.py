"""Oracle expert: exact distances (vs
brute-force BFS), plans, progress labels."""

import random
from collections import deque

import pytest

from rla_jax.envs.alfworld import (
  expert_plan,
  generate_split,
  label_progress,
  next_action,
)
from rla_jax.envs.alfworld.engine import CompiledGame
from rla_jax.envs.alfworld.expert import distance, replay
from rla_jax.envs.alfworld.types_tables import TASK_TYPE_NAMES

_STATIC = ("look", "inventory", "help", "examine_r", "examine_o", "slice")


def _key(st):
  return (
    st.agent_loc,
    tuple(st.held),
    tuple(frozenset(c) for c in st.contents),
    frozenset(st.opened),
    frozenset(st.clean),
    frozenset(st.hot),
    frozenset(st.cool),
    frozenset(st.toggled),
  )


def _bfs_distance(cg: CompiledGame, start, limit: int = 14) -> float:
  """True distance-to-goal by breadth-first search over the engine's own
  transitions (actions that cannot change goal-relevant facts are skipped)."""
  if cg.goal_satisfied(start):
    return 0
  seen, frontier = {_key(start)}, deque([(start, 0)])
  while frontier:
    st, d = frontier.popleft()
    if d >= limit:
      continue
    for action in cg.actions(st).values():
      if action[0] in _STATIC:
        continue
      nxt = st.copy()
      cg.apply(nxt, action)
      if cg.goal_satisfied(nxt):
        return d + 1
      k = _key(nxt)
      if k not in seen:
        seen.add(k)
        frontier.append((nxt, d + 1))
  return float("inf")


def _tiny_games():
  games = generate_split("train", 120, seed=11, room_size="small")
  picked = {}
  for g in games:
    if len(g.receptacles) <= 5 and len(g.objects) <= 6:
      picked.setdefault(g.task_type, []).append(g)
  return [g for t in TASK_TYPE_NAMES for g in picked.get(t, [])[:2]]


def test_expert_distance_matches_bfs_on_random_states():
  games = _tiny_games()
  assert {g.task_type for g in games} == set(TASK_TYPE_NAMES)
  rng = random.Random(0)
  checked = 0
  for g in games:
    cg = CompiledGame(g)
    for _trial in range(8):
      st = cg.initial_state()
      for _ in range(rng.randint(0, 6)):  # random walk to an arbitrary state
        adm = cg.admissible_commands(st)
        cg.step(st, rng.choice(adm))
        if cg.goal_satisfied(st):
          break
      assert distance(cg, st) == _bfs_distance(cg, st), (g.task_type, g.game_id)
      checked += 1
  assert checked == 8 * len(games)


def test_expert_plan_wins_and_progress_labels():
  games = generate_split("valid_unseen", 30, seed=3, room_size="small")
  for g in games:
    plan = expert_plan(g)
    assert plan and len(plan) <= 50
    for k, a in enumerate(plan):
      assert label_progress(g, plan[:k], a), (g.game_id, k, a)
      assert next_action(g, plan[:k]) is not None
    assert replay(g, plan)[2] is True
    assert not label_progress(g, [], "look")
    assert not label_progress(g, [], "dance wildly")
    assert not label_progress(
      g, plan, "look"
    )  # already won: nothing is progress
    with pytest.raises(ValueError):
      label_progress(
        g, plan + ["look"], "look"
      )  # actions after the win are refused


def test_following_progress_labels_from_any_state_reaches_goal_in_d_steps():
  rng = random.Random(1)
  for g in generate_split("valid_seen", 24, seed=5, room_size="small"):
    cg = CompiledGame(g)
    st = cg.initial_state()
    history = []
    for _ in range(
      rng.randint(1, 8)
    ):  # wander (possibly picking up junk, opening things)
      a = rng.choice(cg.admissible_commands(st))
      cg.step(st, a)
      history.append(a)
      if cg.goal_satisfied(st):
        break
    if cg.goal_satisfied(st):
      continue
    d = distance(cg, st)
    for _ in range(int(d)):
      good = [
        a for a in cg.admissible_commands(st) if label_progress(g, history, a)
      ]
      assert good, (g.game_id, history)
      a = rng.choice(good)
      cg.step(st, a)
      history.append(a)
    assert cg.goal_satisfied(st), (g.game_id, history)
