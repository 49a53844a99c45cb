"""The shared phases of an RL step (rla_jax.rl.phases) on a small TaskPool."""

import numpy as np
import pytest

from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.phases import (
  Resolution,
  StepJudgements,
  StepRollouts,
  TaskGroup,
  adapt_tasks,
  draw_task_groups,
  group_rows,
  resolve_candidates,
)


def _pool_with_candidates():
  pool = TaskPool(["g0", "g1", "g2"], low=0.2, high=0.8)
  pool.propose("0", "g0-hard", "harder", 1.0)
  pool.propose("2", "g2-easy", "easier", 0.0)
  return pool


def test_task_group_kind_and_draw_order():
  pool = _pool_with_candidates()
  groups = draw_task_groups([("1", "g1")], pool)
  assert groups == (
    TaskGroup("active", "1", "g1"),
    TaskGroup("candidate", "0", "g0-hard"),
    TaskGroup("candidate", "2", "g2-easy"),
  )
  assert [g.is_candidate for g in groups] == [False, True, True]
  with pytest.raises(ValueError, match="TaskGroup.kind"):
    TaskGroup("pending", "0", "g0")


def test_group_rows_are_contiguous_blocks():
  assert group_rows(3, 2) == ([0, 1], [2, 3], [4, 5])
  with pytest.raises(ValueError, match="as many"):
    StepRollouts((TaskGroup("active", "0", "g0"),), group_rows(2, 1), (0.5,))


def test_resolve_accepts_rejects_and_deletes_rejected_tasks():
  pool = _pool_with_candidates()
  registry = {k: k for k in ("g0", "g1", "g2", "g0-hard", "g2-easy")}
  groups = draw_task_groups([("1", "g1")], pool)
  # slot 0's harder candidate: 0.5 < parent 1.0 and >= low -> accepted;
  # slot 2's easier candidate: 0.0 -> never accepted
  rolled = StepRollouts(groups, group_rows(3, 2), (0.5, 0.5, 0.0))
  res = resolve_candidates(pool, registry, rolled, step=7)
  assert res.evaluated == {"0": 0.5, "2": 0.0}
  assert res.accepted == {"0": True, "2": False}
  assert res.num_accepted == 1
  assert [res.is_used(g) for g in groups] == [True, True, False]
  assert rolled.used_indices(res) == [0, 1]
  # per rollout of the flat batch: both groups' 2 rollouts, not the third's
  assert rolled.used_rollouts(res) == [True] * 4 + [False] * 2
  assert rolled.active_indices() == [0]
  assert "g2-easy" not in registry and "g0-hard" in registry
  assert pool.active_tasks() == [("0", "g0-hard"), ("1", "g1"), ("2", "g2")]
  assert pool.pending == {}


def test_adapt_tasks_proposes_from_the_current_group_with_the_set_rule():
  for low_inclusive, expected in ((True, {"0", "1"}), (False, {"0"})):
    pool = TaskPool(["g0", "g1", "g2"], low=0.2, high=0.8)
    registry = {"g0": "g0", "g1": "g1", "g2": "g2"}
    groups = draw_task_groups(pool.active_tasks(), pool)
    # slot 0 too easy; slot 1 exactly at low; slot 2 in band
    rolled = StepRollouts(groups, group_rows(3, 5), (1.0, 0.2, 0.6))
    calls = []

    def propose(i, direction, calls=calls, groups=groups):
      calls.append((i, direction))
      return f"{groups[i].task_id}-{direction}"

    n = adapt_tasks(
      pool,
      registry,
      rolled,
      Resolution({}, {}),
      propose,
      variant_id=lambda v: v,
      low_inclusive=low_inclusive,
    )
    assert n == len(expected)
    assert {groups[i].slot for i, _ in calls} == expected
    assert {s: rec["candidate_id"] for s, rec in pool.pending.items()} == {
      "0": "g0-harder",
      **({"1": "g1-easier"} if low_inclusive else {}),
    }
    assert "g0-harder" in registry


def test_adapt_tasks_skips_a_variant_already_in_the_registry():
  pool = TaskPool(["g0"], low=0.2, high=0.8)
  registry = {"g0": "g0"}
  groups = draw_task_groups(pool.active_tasks(), pool)
  rolled = StepRollouts(groups, group_rows(1, 2), (1.0,))
  n = adapt_tasks(
    pool,
    registry,
    rolled,
    Resolution({}, {}),
    lambda i, d: "g0",
    variant_id=lambda v: v,
    low_inclusive=True,
  )
  assert n == 0 and pool.pending == {}


def test_step_judgements_of_a_judge_and_unjudged():
  class Judged:
    scores = np.array([[[1.0, -1.0]]])
    mask = np.array([[True]])

  judged = Judged()
  record = StepJudgements.of(judged)
  assert record.judgements is judged
  assert record.scores is judged.scores and record.mask is judged.mask
  # episodes of 2, 0 and 3 steps, padded to 3; one all-zero vote per step
  none = StepJudgements.unjudged([2, 0, 3])
  assert none.judgements is None
  np.testing.assert_array_equal(
    none.mask, [[True, True, False], [False] * 3, [True] * 3]
  )
  assert none.scores.shape == (3, 3, 1) and not none.scores.any()
