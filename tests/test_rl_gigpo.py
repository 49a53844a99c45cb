"""GiGPO step credit: discounted outcome returns, anchor-state groups and the
combined advantage, on hand-computed cases; the reward config's checks."""

import math
import types

import numpy as np
import pytest

from configs import alfworld
from rla_jax.errors import ConfigError
from rla_jax.rl.advantages import (
  anchor_state_advantages,
  discounted_outcome_returns,
  gigpo_advantages,
)
from rla_jax.rl.phases import StepSamples
from rla_jax.rl.training_data import RewardConfig, state_ids

# Three rollouts of one task: won in 2 steps, lost after 3, won in 1.
OUTCOME = np.array([1.0, -1.0, 1.0])
MASK = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0]], bool)
# All start in state 0; rollouts 0 and 1 meet again in state 1 at step 1.
IDS = np.array([[0, 1, -1], [0, 1, 2], [0, -1, -1]])


def _z(values):
  v = np.asarray(values, float)
  return (v - v.mean()) / v.std()


def test_discounted_outcome_returns_pay_the_outcome_at_the_last_step():
  G = discounted_outcome_returns(OUTCOME, MASK, gamma=0.5)
  np.testing.assert_allclose(
    G, [[0.5, 1.0, 0.0], [-0.25, -0.5, -1.0], [1.0, 0.0, 0.0]]
  )
  with pytest.raises(ValueError, match="prefixes"):
    discounted_outcome_returns(OUTCOME, MASK[:, ::-1], gamma=0.5)
  with pytest.raises(ValueError, match="gamma"):
    discounted_outcome_returns(OUTCOME, MASK, gamma=0.0)


def test_anchor_groups_standardise_steps_of_the_same_state_only():
  G = discounted_outcome_returns(OUTCOME, MASK, gamma=0.5)
  A = anchor_state_advantages(G, IDS, MASK)
  s0 = _z([0.5, -0.25, 1.0])  # the three first steps
  expected = [[s0[0], 1.0, 0.0], [s0[1], -1.0, 0.0], [s0[2], 0.0, 0.0]]
  np.testing.assert_allclose(A, expected, atol=1e-12)
  # hand value of the first step's z-score: (0.5 - 5/12) / sqrt(19/72)
  assert math.isclose(A[0, 0], (0.5 - 5 / 12) / math.sqrt(19 / 72))
  # a lone state (rollout 1, step 2) and equal returns give 0
  same = anchor_state_advantages(np.ones((3, 3)), IDS, MASK)
  assert (same == 0).all()


def test_gigpo_adds_the_episode_zscore_and_omega_times_the_step_term():
  A = gigpo_advantages(OUTCOME, IDS, MASK, gamma=0.5, omega=0.5)
  episode = _z(OUTCOME)  # (0.707, -1.414, 0.707)
  step = anchor_state_advantages(
    discounted_outcome_returns(OUTCOME, MASK, 0.5), IDS, MASK
  )
  np.testing.assert_allclose(
    A, np.where(MASK, episode[:, None] + 0.5 * step, 0)
  )
  assert math.isclose(A[1, 2], -math.sqrt(2))  # lone state: episode term only
  assert A[2, 1] == 0.0  # past the end


def test_state_ids_are_equal_exactly_for_equal_prompts():
  eps = [
    types.SimpleNamespace(prompt_texts=["a", "b"]),
    types.SimpleNamespace(prompt_texts=["a", "c", "b"]),
  ]
  ids = state_ids(eps, 3)
  assert ids[0, 0] == ids[1, 0] and ids[0, 1] == ids[1, 2]
  assert ids[1, 1] not in (ids[0, 0], ids[0, 1]) and ids[0, 2] == -1


def _reward_section(**kw):
  """The default preset's config.reward, set to outcome-only GiGPO."""
  section = alfworld.get_config().reward
  section.update({"use_judge_signal": False, "advantage": "gigpo", **kw})
  return section


def test_reward_config_checks_the_advantage_mode():
  assert RewardConfig.from_config(_reward_section()).advantage == "gigpo"
  with pytest.raises(ConfigError, match="config.reward.advantage"):
    RewardConfig.from_config(_reward_section(advantage="gae"))
  with pytest.raises(ConfigError, match="use_judge_signal=False"):
    RewardConfig.from_config(_reward_section(use_judge_signal=True))
  with pytest.raises(ConfigError, match="gigpo_gamma"):
    RewardConfig.from_config(_reward_section(gigpo_gamma=1.5))


def test_task_samples_train_on_gigpo_advantages():
  from rla_jax.rl.training_data import task_samples

  texts = [["a", "b"], ["a", "b", "c"], ["a"]]
  eps = [
    types.SimpleNamespace(
      won=bool(o > 0),
      num_steps=len(t),
      prompt_texts=t,
      prompt_ids=[[1, 2]] * len(t),
      response_ids=[[3]] * len(t),
      logprobs=[[-0.5]] * len(t),
    )
    for o, t in zip(OUTCOME, texts, strict=True)
  ]
  scores = np.zeros((3, 3, 2), np.int32)
  cfg = RewardConfig.from_config(_reward_section(gigpo_gamma=0.5))
  policy, _, stats = task_samples(
    eps, scores, MASK, None, [0, 1, 2], cfg, train_rm=False
  )
  assert stats["policy_in_band"]
  want = gigpo_advantages(OUTCOME, IDS, MASK, gamma=0.5, omega=1.0)[MASK]
  np.testing.assert_allclose([s.advantage for s in policy], want[want != 0])
  # 6 real steps; all but the lone state (rollout 1, step 2) get step credit
  assert (stats["gigpo_steps"], stats["gigpo_credited_steps"]) == (6, 5)
  samples = StepSamples()
  samples.add(policy, [], stats)
  samples.add([], [], {"policy_in_band": False, "rm_in_band": False})
  m = samples.metrics()
  assert m["train/gigpo_step_credit_share"] == 5 / 6
  assert (m["train/policy_samples"], m["train/policy_tasks_in_band"]) == (
    len(policy),
    1,
  )
  assert "train/gigpo_step_credit_share" not in StepSamples().metrics()
