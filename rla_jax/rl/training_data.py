"""Turning one task's rollouts and judgements into training samples.

Policy (paper eq. R = O + lambda * mean S; reference section 3.1):
  R[n, k] = O_n + lambda * mean_j S[n, k, j] for every real step,
  A = step-index standardisation of R within the task, samples with A == 0
  dropped; only tasks whose accuracy is inside the policy band contribute.
Reward model (consistency feedback; reference section 4):
  raw[n, k, j] = R[n, k] * S[n, k, j] (-2 if unparseable), standardised over
  the m judgements of the same step; only tasks with accuracy inside the
  reward-model band contribute.
Every sample carries its own prompt, response and behaviour log-probs, so
filtering can never shift an advantage onto another sample.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rla_jax.config_fields import from_section
from rla_jax.errors import ConfigError
from rla_jax.rl.advantages import (
  LONE_STEP_MODES,
  STEP_SCALE_MODES,
  accuracy_in_band,
  anchor_state_advantages,
  consistency_feedback_rewards,
  discounted_outcome_returns,
  gigpo_advantages,
  outcome_balance_weights,
  policy_sample_keep_mask,
  standardize_by_step_index,
  standardize_over_judgements,
)
from rla_jax.rl.rewards import integrated_step_rewards, outcome_from_success
from rla_jax.rl.samples import Sample

# Keys of config.reward read by the loop's judge and RM training, not by
# RewardConfig.
REWARD_LOOP_KEYS = (
  "m",
  "train_rm",
  "judge_sampling",
  "max_new_tokens",
  "judge_batch",
  "step_signal",
  "judged_steps_per_task",
)
# Where S comes from: the judge's m votes; the expert's progress label of
# every step (one vote); or the expert's labels on only the step columns a
# judge would have judged (reward.judged_steps_per_task), which separates
# the labels from the steps they cover.
STEP_SIGNALS = ("judge", "expert", "expert_columns")


@dataclasses.dataclass(frozen=True)
class RewardConfig:
  """How one task's rollouts and judgements become advantages.

  lam: weight of the step-wise judge signal in R; use_judge_signal False
  gives outcome-only R = O; policy_band / rm_band: the (low, high) task
  accuracies whose policy / reward-model samples are trained on;
  lone_step: advantage at a step index only one rollout reached ("raw": R,
  "zero": 0; `standardize_by_step_index`); step_scale: the std the
  step-index advantages divide by ("step_index", the paper's, or "task",
  one per task group); drop_zero_advantage: drop policy
  samples with A == 0; advantage: "step_index" (the paper's per-step-index
  z-score of R, `standardize_by_step_index`) or "gigpo" (outcome-only
  step credit through anchor states, `gigpo_advantages`, with gigpo_gamma
  and gigpo_omega; needs use_judge_signal False); rm_balance_outcomes:
  weight the reward model's advantages so won and lost episodes count
  equally (`outcome_balance_weights`; the reference does not).
  """

  lam: float = 1.0
  use_judge_signal: bool = True
  policy_band: tuple[float, float] = (0.125, 0.875)
  rm_band: tuple[float, float] = (0.2, 0.8)
  lone_step: str = "raw"
  step_scale: str = "step_index"
  drop_zero_advantage: bool = True
  advantage: str = "step_index"
  gigpo_gamma: float = 0.95
  gigpo_omega: float = 1.0
  rm_balance_outcomes: bool = False

  @classmethod
  def from_config(
    cls, section, *, where: str = "config.reward"
  ) -> RewardConfig:
    """Every field from the key of its name in `section` (config.reward);
    the loop's own keys (REWARD_LOOP_KEYS) are accepted and skipped.

    Raises:
      ConfigError: naming the key (`where`.<key>) of a missing field, an
        unknown key, a value of the wrong type or an unknown lone_step.
    """
    cfg = from_section(cls, section, where=where, other_keys=REWARD_LOOP_KEYS)
    if cfg.lone_step not in LONE_STEP_MODES:
      raise ConfigError(
        f"{where}.lone_step: {cfg.lone_step!r} is not one of {LONE_STEP_MODES}"
      )
    if cfg.step_scale not in STEP_SCALE_MODES:
      raise ConfigError(
        f"{where}.step_scale: {cfg.step_scale!r} is not one of "
        f"{STEP_SCALE_MODES}"
      )
    if cfg.advantage not in ADVANTAGE_MODES:
      raise ConfigError(
        f"{where}.advantage: {cfg.advantage!r} is not one of {ADVANTAGE_MODES}"
      )
    if cfg.advantage == "gigpo" and cfg.use_judge_signal:
      raise ConfigError(
        f"{where}.advantage='gigpo' is step credit without a judge: set "
        f"{where}.use_judge_signal=False"
      )
    if not 0.0 < cfg.gigpo_gamma <= 1.0:
      raise ConfigError(f"{where}.gigpo_gamma={cfg.gigpo_gamma} not in (0, 1]")
    return cfg


ADVANTAGE_MODES = ("step_index", "gigpo")


def state_ids(episodes, num_steps: int) -> np.ndarray:
  """[N, K] int ids of the steps' states: equal iff the policy was shown
  the same prompt (observation, history and candidates); -1 past an
  episode's end."""
  ids, out = {}, np.full((len(episodes), num_steps), -1, np.int64)
  for n, ep in enumerate(episodes):
    for k, text in enumerate(ep.prompt_texts[:num_steps]):
      out[n, k] = ids.setdefault(text, len(ids))
  return out


def policy_advantages(episodes, outcome, R, M, cfg: RewardConfig):
  """[N, K] policy advantages of one task group under cfg.advantage."""
  if cfg.advantage == "gigpo":
    return gigpo_advantages(
      outcome,
      state_ids(episodes, M.shape[1]),
      M,
      gamma=cfg.gigpo_gamma,
      omega=cfg.gigpo_omega,
    )
  return standardize_by_step_index(
    R, M, lone_step=cfg.lone_step, scale=cfg.step_scale
  )


def gigpo_credit_counts(episodes, outcome, M, cfg: RewardConfig) -> dict:
  """{"gigpo_steps": the group's real steps, "gigpo_credited_steps": those
  whose anchor-state advantage A_S (`anchor_state_advantages`) is not 0}."""
  step = anchor_state_advantages(
    discounted_outcome_returns(outcome, M, cfg.gigpo_gamma),
    state_ids(episodes, M.shape[1]),
    M,
  )
  return {
    "gigpo_steps": int(M.sum()),
    "gigpo_credited_steps": int((step[M] != 0).sum()),
  }


def _images(table, *index) -> tuple:
  """The prompt images at table[index...] (GUI episodes and judgements
  carry them), or () for text prompts (table None)."""
  if table is None:
    return ()
  for i in index:
    table = table[i]
  return tuple(table)


@dataclasses.dataclass(frozen=True)
class TaskRollouts:
  """One task's N rollouts (rows: their indices in the step's episodes),
  judge scores S [N, K, m] (float32), real-step mask M [N, K], success
  won and outcome O [N], and step rewards R [N, K] = O + lambda * mean S."""

  episodes: list
  rows: list[int]
  scores: np.ndarray
  mask: np.ndarray
  won: np.ndarray
  accuracy: float
  outcome: np.ndarray
  rewards: np.ndarray


def task_rollouts(
  episodes, scores, mask, rows: list[int], cfg: RewardConfig
) -> TaskRollouts:
  """The task's rows of episodes / scores / mask and its rewards
  R[n, k] = O_n + lambda * mean_j S[n, k, j] (S = 0 without the judge)."""
  eps = [episodes[i] for i in rows]
  S = scores[rows].astype(np.float32)
  M = mask[rows]
  won = np.array([e.won for e in eps])
  outcome = outcome_from_success(won).astype(np.float32)
  S_used = S if cfg.use_judge_signal else np.zeros_like(S)
  R = integrated_step_rewards(outcome, S_used, M, lam=cfg.lam)
  return TaskRollouts(eps, rows, S, M, won, float(won.mean()), outcome, R)


def policy_samples(task: TaskRollouts, cfg: RewardConfig) -> list[Sample]:
  """One sample per real step with advantage A under cfg.advantage (the
  step-index standardisation of R, or GiGPO's), A == 0 dropped if
  cfg.drop_zero_advantage."""
  A = policy_advantages(
    task.episodes, task.outcome, task.rewards, task.mask, cfg
  )
  keep = policy_sample_keep_mask(A, task.mask, cfg.drop_zero_advantage)
  return [
    Sample(
      ep.prompt_ids[k],
      ep.response_ids[k],
      ep.logprobs[k],
      float(A[n, k]),
      _images(getattr(ep, "prompt_images", None), k),
    )
    for n, ep in enumerate(task.episodes)
    for k in range(ep.num_steps)
    if keep[n, k]
  ]


def reward_model_samples(
  task: TaskRollouts, judgements, cfg: RewardConfig
) -> list[Sample]:
  """One sample per judgement j of step k of rollout n, with the consistency
  feedback raw[n, k, j] = R[n, k] * S[n, k, j] (-2 if unparseable)
  standardised over the step's m judgements as its advantage (weighted so
  won and lost episodes count equally if cfg.rm_balance_outcomes)."""
  raw = consistency_feedback_rewards(task.rewards, task.scores, task.mask)
  A, keep = standardize_over_judgements(raw, task.mask)
  if cfg.rm_balance_outcomes:
    A = A * outcome_balance_weights(task.won, keep)[:, None, None]
  images = getattr(judgements, "prompt_images", None)
  return [
    Sample(
      judgements.prompt_ids[row][k],
      judgements.response_ids[row][k][j],
      judgements.logprobs[row][k][j],
      float(A[n, k, j]),
      _images(images, row, k),
    )
    for n, row in enumerate(task.rows)
    for k in range(task.episodes[n].num_steps)
    for j in range(task.scores.shape[2])
    if keep[n, k, j]
  ]


def task_samples(
  episodes,
  scores: np.ndarray,
  mask: np.ndarray,
  judgements,
  rows: list[int],
  cfg: RewardConfig,
  *,
  train_rm: bool,
) -> tuple[list[Sample], list[Sample], dict]:
  """Policy and reward-model samples of one task.

  episodes: all episodes of the step; rows: indices of this task's N
  rollouts; scores: [N_all, K, m]; mask: [N_all, K]. Returns (policy
  samples, reward-model samples, stats).
  """
  task = task_rollouts(episodes, scores, mask, rows, cfg)
  acc = task.accuracy
  stats = {"accuracy": acc, "policy_in_band": False, "rm_in_band": False}
  policy, rm = [], []
  if accuracy_in_band(acc, *cfg.policy_band):
    stats["policy_in_band"] = True
    policy = policy_samples(task, cfg)
    if cfg.advantage == "gigpo":
      stats.update(
        gigpo_credit_counts(task.episodes, task.outcome, task.mask, cfg)
      )
  if train_rm and accuracy_in_band(acc, *cfg.rm_band):
    stats["rm_in_band"] = True
    rm = reward_model_samples(task, judgements, cfg)
  return policy, rm, stats
