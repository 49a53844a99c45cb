"""Tests for rla_jax.rl.parsing and rla_jax.rl.rewards (hand-computed cases)."""

import numpy as np
import pytest

from rla_jax.rl.parsing import last_boxed, parse_action_index, parse_boxed_score
from rla_jax.rl.rewards import (
  high_risk_steps,
  integrated_step_rewards,
  outcome_from_success,
  step_mask_from_lengths,
  task_accuracy,
)


# ---------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
  "text, expected",
  [
    ("\\boxed{1}", "1"),
    ("a \\boxed{x} b \\boxed{y}", "y"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    (
      "\\boxed{a} then \\boxed{unclosed",
      None,
    ),  # last occurrence unbalanced -> no box
    ("no box here", None),
    ("", None),
    (None, None),
    (123, None),
  ],
)
def test_last_boxed(text, expected):
  assert last_boxed(text) == expected


@pytest.mark.parametrize(
  "text, expected",
  [
    ("reasoning ... \\boxed{1}", 1),
    ("\\boxed{+1}", 1),
    ("\\boxed{ -1 }", -1),
    ("\\boxed{\u22121}", -1),  # unicode minus
    ("\\boxed{\u20131}", -1),  # en dash
    ("\\boxed{-1} ... final \\boxed{1}", 1),  # last box wins
    ("\\boxed{1} ... final \\boxed{-1}", -1),
    ("\\boxed{\\text{+1}}", 1),  # nested braces, one +-1 among numbers
    ("\\boxed{Score: -1}", -1),
    ("\\boxed{step 3 gets -1}", -1),  # exactly one +-1 among {3, -1}
    ("\\boxed{1/8}", 0),  # fraction
    ("\\boxed{+1 (step 2/3)}", 0),  # any fraction -> 0
    ("\\boxed{1 or -1}", 0),  # ambiguous
    ("\\boxed{1, 1}", 0),  # several +-1 values
    ("\\boxed{0}", 0),
    ("\\boxed{2}", 0),
    ("\\boxed{11}", 0),  # 11 is not +-1
    ("\\boxed{good}", 0),
    ("\\boxed{}", 0),
    ("score 1 without box", 0),
    ("\\boxed{1", 0),  # unbalanced
    ("", 0),
    (None, 0),
    (b"\\boxed{1}", 0),  # not a str: garbage, no raise
  ],
)
def test_parse_boxed_score(text, expected):
  assert parse_boxed_score(text) == expected


@pytest.mark.parametrize(
  "text, n, expected",
  [
    ("I pick \\boxed{2}", 5, 2),
    ("\\boxed{action 3, not 1}", 5, 3),  # first integer
    ("\\boxed{1} ... \\boxed{4}", 5, 4),  # last box
    ("\\boxed{9}", 5, 4),  # clamped high
    ("\\boxed{-3}", 5, 0),  # clamped low
    ("\\boxed{\u22123}", 5, 0),  # unicode minus normalised
    ("\\boxed{none}", 5, 0),
    ("no box 3", 5, 0),
    ("\\boxed{7", 5, 0),
    (None, 3, 0),
    ("\\boxed{0}", 1, 0),
    ("\\boxed{5}", 1, 0),
  ],
)
def test_parse_action_index(text, n, expected):
  assert parse_action_index(text, n) == expected


def test_parse_action_index_rejects_bad_num_actions():
  with pytest.raises(ValueError, match="num_actions"):
    parse_action_index("\\boxed{1}", 0)


# ---------------------------------------------------------------------- rewards
def test_outcome_from_success():
  assert outcome_from_success(True) == 1
  assert outcome_from_success(False) == -1
  np.testing.assert_array_equal(
    outcome_from_success(np.array([True, False, True])), [1, -1, 1]
  )
  with pytest.raises(ValueError):
    outcome_from_success(np.array([1, 0]))


def test_step_mask_from_lengths():
  np.testing.assert_array_equal(
    step_mask_from_lengths([2, 0, 3]), [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
  )
  assert step_mask_from_lengths([1], max_steps=4).tolist() == [
    [True, False, False, False]
  ]
  with pytest.raises(ValueError):
    step_mask_from_lengths([5], max_steps=4)


def test_integrated_step_rewards_hand_computed():
  outcome = np.array([1, -1])
  scores = np.array(
    [
      [[1, 1, 0], [1, 1, 1], [0, 0, 0]],  # traj 0: 2 steps (3rd is padding)
      [[-1, -1, -1], [1, -1, 0], [-1, 1, 1]],  # traj 1: 3 steps
    ]
  )
  mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
  r = integrated_step_rewards(outcome, scores, mask)
  expected = np.array(
    [
      [1 + 2 / 3, 2.0, 0.0],
      [-2.0, -1.0, -1 + 1 / 3],
    ]
  )
  np.testing.assert_allclose(r, expected, rtol=0, atol=1e-12)
  # lam scales only the judge term.
  r_half = integrated_step_rewards(outcome, scores, mask, lam=0.5)
  np.testing.assert_allclose(
    r_half, [[1 + 1 / 3, 1.5, 0.0], [-1.5, -1.0, -1 + 1 / 6]], atol=1e-12
  )
  # lam = 0: outcome only.
  np.testing.assert_allclose(
    integrated_step_rewards(outcome, scores, mask, lam=0.0),
    [[1, 1, 0], [-1, -1, -1]],
  )


def test_integrated_step_rewards_bounds_and_padding_ignored():
  rng = np.random.default_rng(0)
  outcome = rng.choice([-1, 1], size=6)
  scores = rng.choice([-1, 0, 1], size=(6, 5, 3))
  mask = step_mask_from_lengths(rng.integers(0, 6, size=6), 5)
  r = integrated_step_rewards(outcome, scores, mask)
  assert np.all(np.abs(r) <= 2.0)
  assert np.all(r[~mask] == 0)
  # Changing scores at padded positions must not change anything.
  scores2 = scores.copy()
  scores2[~mask] = 1
  np.testing.assert_array_equal(
    integrated_step_rewards(outcome, scores2, mask), r
  )


@pytest.mark.parametrize(
  "outcome, scores, mask, match",
  [
    ([1, 2], np.zeros((2, 1, 3), int), np.ones((2, 1), bool), "outcome values"),
    (
      [1, -1],
      np.full((2, 1, 3), 2),
      np.ones((2, 1), bool),
      "step_scores must be in",
    ),
    ([1, -1], np.zeros((3, 1, 3), int), np.ones((3, 1), bool), "shape"),
    (
      [1, -1],
      np.zeros((2, 1, 3), int),
      np.ones((2, 2), bool),
      "step_mask has shape",
    ),
    ([1, -1], np.zeros((2, 1, 0), int), np.ones((2, 1), bool), "M"),
  ],
)
def test_integrated_step_rewards_rejects_bad_input(
  outcome, scores, mask, match
):
  with pytest.raises(ValueError, match=match):
    integrated_step_rewards(np.array(outcome), scores, mask)


def test_high_risk_steps():
  scores = np.array(
    [[-1, -1, -1], [-1, 1, -1], [0, -1, -1], [-1, -1, -1], [-1, -1, -1]]
  )
  assert high_risk_steps(scores, 5) == [0, 3, 4]
  assert high_risk_steps(scores, 3) == [
    0
  ]  # steps beyond the trajectory length are ignored
  assert high_risk_steps(scores, 0) == []
  with pytest.raises(ValueError):
    high_risk_steps(scores, 6)


def test_task_accuracy():
  assert task_accuracy(np.array([True, False, False, True])) == 0.5
  assert task_accuracy(np.array([], dtype=bool)) == 0.0
  with pytest.raises(ValueError):
    task_accuracy(np.array([1, 0]))
