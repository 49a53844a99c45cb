"""The judge's start-to-end change and its cluster-bootstrap standard error
(rla_jax/rl/judge_change.py) and the step votes and recalls it compares
(rla_jax/rl/judge_accuracy.py), on hand-computed cases."""

import math

import numpy as np
import pytest

from rla_jax.rl.judge_accuracy import StepVotes, judge_breakdown, step_votes
from rla_jax.rl.judge_change import judge_change


def test_breakdown_by_hand():
  b = judge_breakdown(np.array([1, 1, -1, -1, 1]), np.array([1, -1, -1, -1, 1]))
  assert b.plus_recall == 1.0
  assert b.minus_recall == pytest.approx(2 / 3)
  assert b.balanced == pytest.approx(5 / 6)
  assert b.positive_rate == pytest.approx(3 / 5)
  assert b.label_positive_rate == pytest.approx(2 / 5)


def test_breakdown_without_a_class_is_nan():
  b = judge_breakdown(np.array([1, -1]), np.array([-1, -1]))
  assert math.isnan(b.plus_recall) and math.isnan(b.balanced)
  assert b.minus_recall == 0.5


def test_step_votes_keeps_real_steps_with_their_episode():
  # 2 episodes, K = 3, m = 3; episode 1 has 2 real steps.
  scores = np.array(
    [
      [[1, 1, -1], [1, -1, 0], [-1, -1, -1]],
      [[1, 1, 1], [0, 1, 1], [1, 1, 1]],
    ]
  )
  mask = np.array([[True, True, True], [True, True, False]])
  labels = [[1, -1, -1], [-1, 1]]
  sv = step_votes(scores, mask, labels)
  np.testing.assert_array_equal(sv.votes, [1, -1, -1, 1, 1])
  np.testing.assert_array_equal(sv.labels, [1, -1, -1, -1, 1])
  np.testing.assert_array_equal(sv.episode, [0, 0, 0, 1, 1])


def _votes(votes, labels, episode):
  return StepVotes(np.array(votes), np.array(labels), np.array(episode))


def test_unchanged_judge_has_zero_change_and_stderr():
  sv = _votes([1, -1, -1, 1], [1, -1, 1, 1], [0, 0, 1, 1])
  c = judge_change(sv, sv, draws=200)
  assert c.change == 0.0 and c.stderr == 0.0
  assert (c.num_steps, c.num_episodes) == (4, 2)


def test_bootstrap_matches_the_exact_resampling_distribution():
  # Episode 0 (labels +1, -1): start votes -1, -1 -> end +1, -1.
  # Episode 1 (labels +1, -1): votes +1, -1 at both ends.
  # Resamples of 2 episodes: {0,0} (p 1/4) diff 1 - 0.5 = 0.5; {1,1}
  # (1/4) diff 0; {0,1} (1/2) diff 1 - 0.75 = 0.25. Mean 0.25, variance
  # (1/4) 0.25^2 + (1/4) 0.25^2 = 0.03125.
  start = _votes([-1, -1, 1, -1], [1, -1, 1, -1], [0, 0, 1, 1])
  end = _votes([1, -1, 1, -1], [1, -1, 1, -1], [0, 0, 1, 1])
  c = judge_change(start, end, draws=40000, seed=3)
  assert c.start.balanced == 0.75 and c.end.balanced == 1.0
  assert c.change == 0.25
  assert c.stderr == pytest.approx(math.sqrt(0.03125), abs=0.004)
  assert judge_change(start, end, draws=500, seed=1) == judge_change(
    start, end, draws=500, seed=1
  )


def test_different_steps_are_refused():
  a = _votes([1, -1], [1, -1], [0, 1])
  b = _votes([1, -1], [1, 1], [0, 1])
  with pytest.raises(ValueError, match="different steps"):
    judge_change(a, b)


def test_record_has_the_flat_keys():
  sv = _votes([1, -1, -1, 1], [1, -1, 1, 1], [0, 0, 1, 1])
  r = judge_change(sv, sv, draws=10).record()
  assert r["balanced_start"] == r["balanced_end"] == pytest.approx(5 / 6)
  assert r["plus_recall_end"] == pytest.approx(2 / 3)
  assert r["label_positive_rate"] == 0.75 and r["num_episodes"] == 2


def test_outcome_shares_by_hand():
  from types import SimpleNamespace

  from rla_jax.rl.judge_change import outcome_shares

  episodes = [SimpleNamespace(won=w) for w in (True, False, True)]
  labels = [[-1, -1, 1], [1, -1, 1, 1], [1]]
  shares = outcome_shares(episodes, labels)
  assert shares["won_share"] == 2 / 3
  # +1 steps: 1 in episode 0, 3 in lost episode 1, 1 in episode 2
  assert (shares["plus_steps"], shares["plus_steps_in_lost_share"]) == (
    5,
    3 / 5,
  )
  # won episodes' steps: -1 -1 +1 +1
  assert (shares["won_steps"], shares["minus_steps_in_won_share"]) == (4, 2 / 4)


def test_consistency_target_by_hand():
  """Episode 0 won, episode 1 lost; 3 votes a step. Pushed (mixed votes):
  e0 s0 R = 1 + 1/3 > 0 -> +1 (label +1: toward); e0 s1 unanimous, not
  pushed; e1 s0 R = -4/3 -> -1 (label +1: away); e1 s1 R = -2/3 -> -1
  (label -1: toward). Weights: e0 keeps 3 samples, e1 6 -> 9/6 and 9/12."""
  from rla_jax.rl.judge_change import consistency_target

  scores = np.array(
    [
      [[1, 1, -1], [-1, -1, -1]],
      [[1, -1, -1], [1, 1, -1]],
    ]
  )
  mask = np.ones((2, 2), bool)
  t = consistency_target(scores, mask, [True, False], [[1, -1], [1, -1]])
  w0, w1 = 1.5, 0.75
  assert t.toward_plus == pytest.approx(w0 / (w0 + w1))
  assert t.toward_minus == pytest.approx(1.0)
  assert t.balanced == pytest.approx((w0 / (w0 + w1) + 1.0) / 2)
  # Majorities: e0 s0 +1 (right), e1 s0 -1 (wrong), e1 s1 +1 (wrong).
  assert t.judge_balanced == pytest.approx((w0 / (w0 + w1) + 0.0) / 2)
  assert (t.pushed_steps, t.num_steps) == (3, 4)
  # A step past an episode's end is never pushed.
  mask[1, 1] = False
  short = consistency_target(scores, mask, [True, False], [[1, -1], [1]])
  assert (short.pushed_steps, short.num_steps) == (2, 3)
  assert np.isnan(short.toward_minus)


def test_votes_by_verb_by_hand():
  """Episode 0 won (go, open), episode 1 lost (go, take; its step 1 is
  past the mask). Majorities: e0 [+1, -1], e1 [-1, .]."""
  from rla_jax.rl.judge_change import votes_by_verb

  scores = np.array(
    [
      [[1, 1, -1], [-1, -1, 1]],
      [[-1, -1, 1], [1, 1, 1]],
    ]
  )
  mask = np.array([[True, True], [True, False]])
  out = votes_by_verb(
    [["go to desk 1", "open drawer 2"], ["go to bed 1", "take pen 1"]],
    [True, False],
    scores,
    mask,
    [[-1, 1], [1, 1]],
  )
  assert out == {
    "go": {
      "lost": {"steps": 1, "label_plus": 1.0, "judge_plus": 0.0},
      "won": {"steps": 1, "label_plus": 0.0, "judge_plus": 1.0},
    },
    "open": {"won": {"steps": 1, "label_plus": 1.0, "judge_plus": 0.0}},
  }
