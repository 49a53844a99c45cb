"""Judge metrics of rla_jax.rl.evaluation on hand-computed cases."""

import math

import numpy as np

from rla_jax.rl import evaluation

# 2 trajectories x 3 step slots x m=3 votes; trajectory 1 has 2 real steps.
SCORES = np.array(
  [
    [[1, 1, -1], [-1, -1, 1], [1, 0, 1]],  # votes +1, -1, +1
    [[0, 1, -1], [1, 1, 1], [1, 1, 1]],  # votes -1, +1, (padding)
  ]
)
MASK = np.array([[True, True, True], [True, True, False]])
LABELS = [[1, 1, -1], [-1, 1]]


def test_majority_vote_needs_a_strict_majority_of_plus_ones():
  np.testing.assert_array_equal(
    evaluation.majority_vote(SCORES), [[1, -1, 1], [-1, 1, 1]]
  )
  assert evaluation.majority_vote(np.array([1, -1])) == -1  # tie


def test_process_accuracy_and_breakdown_by_hand():
  # real steps: (vote, label) = (+,+) (-,+) (+,-) (-,-) (+,+)
  assert evaluation.rm_process_accuracy(SCORES, MASK, LABELS) == 3 / 5
  out = evaluation.rm_process_breakdown(SCORES, MASK, LABELS)
  assert out["positive_rate"] == 3 / 5
  # recall of +1: 2 of 3; recall of -1: 1 of 2
  assert math.isclose(out["balanced_accuracy"], (2 / 3 + 1 / 2) / 2)


def test_breakdown_with_one_class_or_no_steps():
  out = evaluation.rm_process_breakdown(SCORES, MASK, [[1, 1, 1], [1, 1]])
  assert math.isnan(out["balanced_accuracy"])
  empty = evaluation.rm_process_breakdown(SCORES, np.zeros_like(MASK), LABELS)
  assert math.isnan(empty["positive_rate"])


def test_outcome_accuracy_by_hand():
  # mean step scores: traj 0 = 4/9 > 0 -> predicts success; traj 1 = 3/6 > 0
  assert (
    evaluation.rm_outcome_accuracy(SCORES, MASK, np.array([True, False]))
    == 1 / 2
  )


def test_judge_metrics_gathers_the_four_by_hand():
  out = evaluation.judge_metrics(SCORES, MASK, LABELS, np.array([True, False]))
  assert out["eval/rm_process_accuracy"] == 3 / 5
  assert out["eval/rm_positive_rate"] == 3 / 5
  assert math.isclose(
    out["eval/rm_process_balanced_accuracy"], (2 / 3 + 1 / 2) / 2
  )
  # mean real-step scores: trajectory 0 (1+1-1-1-1+1+1+0+1)/9 > 0 -> won,
  # right; trajectory 1 (0+1-1+1+1+1)/6 > 0 -> won, wrong.
  assert out["eval/rm_outcome_accuracy"] == 1 / 2
