"""Tests for rla_jax.rl.advantages (hand-computed
cases + an independent loop reference)."""

import math

import numpy as np
import pytest

from rla_jax.rl.advantages import (
  accuracy_in_band,
  consistency_feedback_rewards,
  group_zscore,
  outcome_balance_weights,
  policy_sample_keep_mask,
  standardize_by_step_index,
  standardize_over_judgements,
)
from rla_jax.rl.rewards import integrated_step_rewards, step_mask_from_lengths

S3 = math.sqrt(1.5)  # z-score of (1, 3, 5) at the ends: 2 / sqrt(8/3)


def _loop_step_index_reference(r_lists, eps=1e-8):
  """Independent list-of-lists version of the
  per-step-index rule (reference sec. 3.1)."""
  out = [list(seq) for seq in r_lists]
  for k in range(max((len(s) for s in out), default=0)):
    idx = [j for j in range(len(out)) if k < len(out[j])]
    if len(idx) <= 1:
      continue
    vals = [out[j][k] for j in idx]
    mu = sum(vals) / len(vals)
    std = (sum((v - mu) ** 2 for v in vals) / len(vals)) ** 0.5
    for j, v in zip(idx, vals, strict=True):
      out[j][k] = 0.0 if std <= eps else (v - mu) / std
  return out


def test_standardize_by_step_index_hand_computed():
  r = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 0.0], [5.0, 0.0, 0.0]])
  mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], bool)
  # k=0: (1,3,5) -> (-sqrt(1.5), 0, sqrt(1.5));
  # k=1: (2,2) std 0 -> 0; k=2: lone traj 0.
  a = standardize_by_step_index(r, mask)
  np.testing.assert_allclose(
    a, [[-S3, 0, 3.0], [0, 0, 0], [S3, 0, 0]], atol=1e-12
  )
  a0 = standardize_by_step_index(r, mask, lone_step="zero")
  np.testing.assert_allclose(
    a0, [[-S3, 0, 0], [0, 0, 0], [S3, 0, 0]], atol=1e-12
  )


def test_standardize_by_step_index_matches_loop_reference_random():
  rng = np.random.default_rng(1)
  for _ in range(20):
    n, k_max = 8, 12
    lengths = rng.integers(0, k_max + 1, size=n)
    mask = step_mask_from_lengths(lengths, k_max)
    outcome = rng.choice([-1, 1], size=n)
    scores = rng.choice([-1, 0, 1], size=(n, k_max, 3))
    r = integrated_step_rewards(outcome, scores, mask)
    expected = _loop_step_index_reference(
      [list(r[i, : lengths[i]]) for i in range(n)]
    )
    got = standardize_by_step_index(r, mask)
    for i in range(n):
      np.testing.assert_allclose(got[i, : lengths[i]], expected[i], atol=1e-12)
      assert np.all(got[i, lengths[i] :] == 0)


def test_standardize_by_step_index_leading_batch_dims():
  rng = np.random.default_rng(2)
  r = rng.normal(size=(4, 5, 6))
  mask = rng.random((4, 5, 6)) < 0.7
  batched = standardize_by_step_index(r, mask)
  for g in range(4):
    np.testing.assert_allclose(
      batched[g], standardize_by_step_index(r[g], mask[g]), atol=1e-12
    )


def test_standardize_by_step_index_errors():
  with pytest.raises(ValueError, match="lone_step"):
    standardize_by_step_index(
      np.zeros((2, 2)), np.ones((2, 2), bool), lone_step="keep"
    )
  with pytest.raises(ValueError, match="mask has shape"):
    standardize_by_step_index(np.zeros((2, 2)), np.ones((2, 3), bool))


def test_group_zscore():
  np.testing.assert_allclose(
    group_zscore([1.0, 0.0, 0.0, 1.0]), [1, -1, -1, 1], atol=1e-12
  )
  np.testing.assert_allclose(
    group_zscore([0.25, 0.5, 0.75]),
    [-math.sqrt(1.5), 0, math.sqrt(1.5)],
    atol=1e-12,
  )
  np.testing.assert_array_equal(group_zscore([0.3, 0.3, 0.3]), [0, 0, 0])
  np.testing.assert_array_equal(group_zscore([7.0]), [0.0])
  batched = group_zscore([[1.0, 0.0], [2.0, 2.0]])
  np.testing.assert_allclose(batched, [[1, -1], [0, 0]])
  assert group_zscore(np.zeros((2, 0))).shape == (2, 0)


@pytest.mark.parametrize("value, n", [(0.1, 3), (0.7, 6), (1 / 3, 10)])
def test_group_zscore_constant_group_with_rounding_std_is_zero(value, n):
  # The float std of these constant groups is a rounding residue, not 0: a
  # `std == 0` test would divide by it and give every sample |A| = 1.
  x = np.full(n, value)
  assert 0 < x.std() < 1e-15
  np.testing.assert_array_equal(group_zscore(x), np.zeros(n))


@pytest.mark.parametrize(
  "acc, low, high, expected",
  [
    (1 / 8, 1 / 8, 7 / 8, True),  # inclusive low
    (7 / 8, 1 / 8, 7 / 8, True),  # inclusive high
    (0.0, 1 / 8, 7 / 8, False),  # all-fail group dropped
    (1.0, 1 / 8, 7 / 8, False),  # all-success group dropped
    (0.2, 0.2, 0.8, True),
    (1 / 5, 0.2, 0.8, True),
    (0.125, 0.2, 0.8, False),
    (0.5, 0.2, 0.8, True),
  ],
)
def test_accuracy_in_band(acc, low, high, expected):
  assert accuracy_in_band(acc, low, high) is expected


def test_accuracy_in_band_rejects_inverted_band():
  with pytest.raises(ValueError):
    accuracy_in_band(0.5, 0.8, 0.2)


def test_policy_sample_keep_mask():
  a = np.array([[0.5, 0.0, 0.0], [-1.0, 2.0, 0.0]])
  mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
  np.testing.assert_array_equal(
    policy_sample_keep_mask(a, mask), [[1, 0, 0], [1, 1, 0]]
  )
  np.testing.assert_array_equal(
    policy_sample_keep_mask(a, mask, drop_zero_advantage=False), mask
  )


def test_consistency_feedback_and_judgement_standardisation_hand_computed():
  outcome = np.array([1, -1])
  scores = np.array(
    [
      [[1, 1, 0], [1, 1, 1]],  # traj 0 (success)
      [[1, -1, 0], [0, 0, 0]],  # traj 1 (fail); step 1 is padding
    ]
  )
  mask = np.array([[1, 1], [1, 0]], bool)
  r = integrated_step_rewards(outcome, scores, mask)  # [[5/3, 2], [-1, 0]]
  raw = consistency_feedback_rewards(r, scores, mask)
  np.testing.assert_allclose(
    raw,
    [
      [[5 / 3, 5 / 3, -2], [2, 2, 2]],
      [[-1, 1, -2], [0, 0, 0]],
    ],
    atol=1e-12,
  )
  a, keep = standardize_over_judgements(raw, mask)
  r2, r14 = math.sqrt(2), math.sqrt(14)
  np.testing.assert_allclose(
    a,
    [
      [
        [1 / r2, 1 / r2, -r2],
        [0, 0, 0],
      ],  # (a, a, b) pattern; all-equal -> skipped
      [
        [-1 / r14, 5 / r14, -4 / r14],
        [0, 0, 0],
      ],  # deviations (-1/3, 5/3, -4/3)
    ],
    atol=1e-12,
  )
  np.testing.assert_array_equal(
    keep, [[[1, 1, 1], [0, 0, 0]], [[1, 1, 1], [0, 0, 0]]]
  )


def test_standardize_over_judgements_drops_exact_zero_advantage():
  raw = np.array([[[1.0, 0.0, -1.0]]])
  a, keep = standardize_over_judgements(raw, np.ones((1, 1), bool))
  np.testing.assert_allclose(
    a, [[[math.sqrt(1.5), 0.0, -math.sqrt(1.5)]]], atol=1e-12
  )
  np.testing.assert_array_equal(keep, [[[True, False, True]]])


def test_standardize_over_judgements_single_sample_is_skipped():
  a, keep = standardize_over_judgements(
    np.array([[[3.0]]]), np.ones((1, 1), bool)
  )
  assert a.tolist() == [[[0.0]]] and not keep.any()


def test_consistency_feedback_rejects_bad_shapes_and_scores():
  with pytest.raises(ValueError, match="shape"):
    consistency_feedback_rewards(
      np.zeros((2, 3)), np.zeros((2, 2, 3), int), np.ones((2, 3), bool)
    )
  with pytest.raises(ValueError, match="scores must be in"):
    consistency_feedback_rewards(
      np.zeros((1, 1)), np.full((1, 1, 3), 5), np.ones((1, 1), bool)
    )


def test_outcome_balance_weights_hand_computed():
  won = np.array([True, False, False])
  keep = np.zeros((3, 4, 3), bool)
  keep[0, 0, :2] = True  # 2 samples from the won episode
  keep[1, :, 0] = True  # 4 + 2 = 6 from the lost ones
  keep[2, :2, 1] = True
  w = outcome_balance_weights(won, keep)
  # n = 8: won 8 / (2 * 2) = 2, lost 8 / (2 * 6) = 2/3; each class sums to 4.
  np.testing.assert_allclose(w, [2.0, 2 / 3, 2 / 3])
  per_episode = keep.reshape(3, -1).sum(1)
  assert np.isclose((w * per_episode)[won].sum(), (w * per_episode)[~won].sum())
  # One class only (or nothing kept): unweighted.
  np.testing.assert_array_equal(
    outcome_balance_weights(won, keep & ~won[:, None, None]), 1.0
  )
  np.testing.assert_array_equal(
    outcome_balance_weights(won, np.zeros_like(keep)), 1.0
  )


def test_task_scale_divides_by_one_std_per_task():
  # Two rollouts: the first won (O = +1) at k = 0 and ended; rollouts 1-2
  # failed and reach k = 1 with different judge means.
  r = np.array([[2.0, 0.0], [0.0, -0.5], [0.0, -1.5]])
  mask = np.array([[1, 0], [1, 1], [1, 1]], bool)
  valid = r[mask]  # 2, 0, 0, -0.5, -1.5
  task_std = valid.std()
  got = standardize_by_step_index(r, mask, scale="task")
  k0 = (r[:, 0] - r[:, 0].mean()) / task_std
  k1 = (r[1:, 1] - r[1:, 1].mean()) / task_std  # +-0.5 / task_std
  np.testing.assert_allclose(got[:, 0], k0, atol=1e-12)
  np.testing.assert_allclose(got[1:, 1], k1, atol=1e-12)
  assert got[0, 1] == 0
  # The paper's scale gives the same k = 1 pair unit size instead.
  paper = standardize_by_step_index(r, mask)
  np.testing.assert_allclose(paper[1:, 1], [1.0, -1.0], atol=1e-12)
  # Batched groups use their own std; an all-equal group is all zeros.
  batched = standardize_by_step_index(
    np.stack([r, np.ones_like(r)]), np.stack([mask, mask]), scale="task"
  )
  np.testing.assert_allclose(batched[0], got, atol=1e-12)
  assert np.all(batched[1] == 0)
  with pytest.raises(ValueError, match="scale"):
    standardize_by_step_index(r, mask, scale="group")
