"""Advantages for the policy and the reward model (reference secs. 3.1, 4, 5).

Dimension letters: N trajectories of one task group, K step index, M judge
samples per step, G samples of one group (coding).

All functions are pure numpy, float64, and accept extra *leading* batch
dimensions (e.g. [T, N, K] for T task groups) where documented.

Deliberate deviations from the reference (sec. 11 bugs are not copied):
- Zero-variance tests use ``std <= eps`` everywhere (the reference RM path tests
  the float variance ``== 0``, which a mean of equal floats may miss by
  rounding).
- The keep masks returned here are applied to prompts, responses and advantages
  *together* by the caller; there is no separate reward list that could be
  shifted (the reference trainer misaligns rewards when it drops long prompts,
  sec. 3.3).
"""

from __future__ import annotations

import numpy as np

from rla_jax.rl.rewards import (
  VALID_SCORES,
  _as_bool_mask,
  step_mask_from_lengths,
)

UNPARSEABLE_JUDGEMENT_REWARD = -2.0
LONE_STEP_MODES = ("raw", "zero")
STEP_SCALE_MODES = ("step_index", "task")


def _bool_mask(mask, shape, name: str) -> np.ndarray:
  return _as_bool_mask(mask, tuple(shape), name)


def _masked_zscore(values: np.ndarray, mask: np.ndarray, axis: int, eps: float):
  """Masked population z-score along ``axis``; returns (z, count, std).

  z = (x - mean) / std over the entries with mask; 0 where std <= eps or masked.
  """
  x = np.where(mask, values, 0.0)
  count = mask.sum(axis=axis, keepdims=True)
  safe = np.maximum(count, 1)
  mean = x.sum(axis=axis, keepdims=True) / safe
  var = (np.where(mask, values - mean, 0.0) ** 2).sum(
    axis=axis, keepdims=True
  ) / safe
  std = np.sqrt(var)
  ok = std > eps
  z = np.where(mask & ok, (values - mean) / np.where(ok, std, 1.0), 0.0)
  return z, count, std


def standardize_by_step_index(
  rewards,
  mask,
  eps: float = 1e-8,
  lone_step: str = "raw",
  scale: str = "step_index",
) -> np.ndarray:
  """Per-step-index z-score of step rewards
  within one task group (reference sec. 3.1).

  For each step index k let J_k = {i : mask[i, k]} (trajectories that reach
  step k):
    |J_k| >= 2:  A[i, k] = (R[i, k] - mean_{J_k} R[:, k]) / std_{J_k} R[:, k]
                 (population std); A[:, k] = 0 if std <= eps.
    |J_k| == 1:  lone_step="raw"  -> A[i, k] = R[i, k] (the reference's
                                     behaviour)
                 lone_step="zero" -> A[i, k] = 0.
  A = 0 where mask is False.

  scale="task" divides by one std per task group instead, that of R over
  all its steps (every (i, k) with mask), so a step index whose rollouts
  all share an outcome keeps the judge's differences at their own size,
  λ·(mean_j S[i, k, j] - mean_{J_k}), next to the outcome's ±1, rather
  than rescaled to unit variance (with scale="step_index", the paper's,
  the judge alone sets the advantage of every step only failures reach);
  0 where that std <= eps.

  Args:
    rewards: [..., N, K] integrated rewards R (see
      ``rewards.integrated_step_rewards``).
    mask: [..., N, K] bool step mask.
  Returns:
    A: [..., N, K] float64.
  """
  if lone_step not in LONE_STEP_MODES:
    raise ValueError(
      f"standardize_by_step_index: lone_step must be one of {LONE_STEP_MODES}, "
      f"got {lone_step!r}"
    )
  r = np.asarray(rewards, dtype=np.float64)
  if r.ndim < 2:
    raise ValueError(
      "standardize_by_step_index: rewards must have shape [..., N, K], got "
      f"{r.shape}"
    )
  if scale not in STEP_SCALE_MODES:
    raise ValueError(
      f"standardize_by_step_index: scale must be one of {STEP_SCALE_MODES}, "
      f"got {scale!r}"
    )
  m = _bool_mask(mask, r.shape, "standardize_by_step_index")
  z, count, std = _masked_zscore(r, m, axis=-2, eps=eps)
  if scale == "task":
    task = r.reshape(*r.shape[:-2], 1, -1)
    _, _, task_std = _masked_zscore(
      task, m.reshape(task.shape), axis=-1, eps=eps
    )
    # task_std: [..., 1, 1]
    ok = task_std > eps
    z = np.where(ok & (std > eps), z * std / np.where(ok, task_std, 1.0), 0.0)
  lone = m & (count == 1)
  lone_value = r if lone_step == "raw" else np.zeros_like(r)
  return np.where(lone, lone_value, z)


def group_zscore(rewards, eps: float = 1e-8) -> np.ndarray:
  """GRPO group z-score (coding policy, reference sec. 3.1 / 5).

  A[g] = (r[g] - mean(r)) / std(r) with the population std over the last axis
  [..., G]; all zeros where std <= eps (e.g. every sample got the same reward,
  whose float std may be a rounding residue such as 1e-17, not 0). G = 0
  gives an empty result.
  """
  r = np.asarray(rewards, dtype=np.float64)
  if r.ndim < 1:
    raise ValueError(
      f"group_zscore: rewards must have shape [..., G], got {r.shape}"
    )
  z, _, _ = _masked_zscore(r, np.ones(r.shape, dtype=bool), axis=-1, eps=eps)
  return z


def accuracy_in_band(acc: float, low: float, high: float) -> bool:
  """Group filter: True iff ``low <= acc <= high`` (both bounds inclusive).

  Reference sec. 3.1 / 4: the AlfWorld policy trains on groups with acc in [1/8,
  7/8] (drops all-success and all-fail groups for N = 8); RM data comes from
  groups with acc in [0.2, 0.8]; coding uses [0.2, 0.8].
  """
  if not low <= high:
    raise ValueError(f"accuracy_in_band: low={low} must be <= high={high}")
  return bool(low <= acc <= high)


def policy_sample_keep_mask(
  advantages, mask, drop_zero_advantage: bool = True
) -> np.ndarray:
  """Which (i, k) policy samples to train on:
  ``mask & (A != 0)`` (reference sec. 3.1).

  With ``drop_zero_advantage=False`` it is just ``mask`` (zero-advantage samples
  then only dilute the seq-mean, as in the coding setting). Shapes [..., N, K].
  """
  a = np.asarray(advantages)
  m = _bool_mask(mask, a.shape, "policy_sample_keep_mask")
  return m & (a != 0) if drop_zero_advantage else m.copy()


def consistency_feedback_rewards(step_rewards, step_scores, mask) -> np.ndarray:
  """Raw reward of each judge sample (consistency feedback, reference sec. 4).

  raw[i, k, j] = R[i, k] * S[i, k, j] if S[i, k, j] in {+1, -1}
  raw[i, k, j] = -2                   if S[i, k, j] == 0 (unparseable judgement)
  raw[i, k, :] = 0                    where mask[i, k] is False.

  R must be the *un-normalised* integrated reward O + mean_j S (not the
  advantage).

  Args:
    step_rewards: [..., N, K] R.
    step_scores: [..., N, K, M] S in {+1, -1, 0}.
    mask: [..., N, K] bool.
  Returns:
    raw: [..., N, K, M] float64.
  """
  r = np.asarray(step_rewards, dtype=np.float64)
  s = np.asarray(step_scores)
  if s.ndim != r.ndim + 1 or s.shape[:-1] != r.shape:
    raise ValueError(
      f"consistency_feedback_rewards: step_scores shape {s.shape} must be "
      f"step_rewards shape {r.shape} + [M]"
    )
  if not np.all(np.isin(s, VALID_SCORES)):
    raise ValueError(
      f"consistency_feedback_rewards: scores must be in {{-1,0,1}}, got "
      f"{np.unique(s).tolist()}"
    )
  m = _bool_mask(mask, r.shape, "consistency_feedback_rewards")
  raw = np.where(s == 0, UNPARSEABLE_JUDGEMENT_REWARD, r[..., None] * s)
  return np.where(m[..., None], raw, 0.0)


def standardize_over_judgements(
  raw, mask, eps: float = 1e-8
) -> tuple[np.ndarray, np.ndarray]:
  """Z-score the M judge-sample rewards of the same step (reference sec. 4).

  For each step (i, k) with mask[i, k]:
    A[i, k, j] = (raw[i, k, j] - mean_j raw[i, k, :]) / std_j raw[i, k, :]
                 (population)
  Steps whose M rewards have std <= eps (including M = 1) are skipped:
  A = 0 there.
  keep[i, k, j] = mask[i, k] and A[i, k, j] != 0  (entries to train the RM on).

  Args:
    raw: [..., N, K, M] from ``consistency_feedback_rewards``.
    mask: [..., N, K] bool.
  Returns:
    (A [..., N, K, M] float64, keep [..., N, K, M] bool).
  """
  x = np.asarray(raw, dtype=np.float64)
  if x.ndim < 1:
    raise ValueError(
      "standardize_over_judgements: raw must have shape [..., M], got "
      f"{x.shape}"
    )
  m = _bool_mask(mask, x.shape[:-1], "standardize_over_judgements")
  full_mask = np.broadcast_to(m[..., None], x.shape)
  z, _, _ = _masked_zscore(x, full_mask, axis=-1, eps=eps)
  keep = full_mask & (z != 0)
  return z, keep


def discounted_outcome_returns(outcome, mask, gamma: float) -> np.ndarray:
  """Discounted return of every step when the only reward is the episode's
  outcome, paid at its last step (GiGPO's step returns on ALFWorld):

      G[i, k] = gamma ** (L_i - 1 - k) * O[i]   for k < L_i,  0 elsewhere,

  L_i = the number of steps of trajectory i (mask[i] must be a prefix).

  Args:
    outcome: [N] O (e.g. +1 / -1).
    mask: [N, K] bool step mask.
  Returns:
    G: [N, K] float64.
  """
  if not 0.0 < gamma <= 1.0:
    raise ValueError(f"discounted_outcome_returns: gamma={gamma} not in (0, 1]")
  o = np.asarray(outcome, dtype=np.float64)
  m = np.asarray(mask, dtype=bool)
  if m.ndim != 2 or o.shape != m.shape[:1]:
    raise ValueError(
      "discounted_outcome_returns: outcome [N] and mask [N, K] expected, "
      f"got {o.shape} and {m.shape}"
    )
  lengths = m.sum(axis=1)
  if not (m == step_mask_from_lengths(lengths, m.shape[1])).all():
    raise ValueError("discounted_outcome_returns: mask rows must be prefixes")
  to_go = np.maximum(lengths[:, None] - 1 - np.arange(m.shape[1])[None], 0)
  return np.where(m, gamma**to_go * o[:, None], 0.0)


def anchor_state_advantages(returns, state_ids, mask, eps: float = 1e-8):
  """GiGPO's step-level advantage (Feng et al. 2025, as verl-agent runs it
  on ALFWorld): the steps of one task group that start from the same state
  (identical observation and history: equal `state_ids`) form an anchor
  group, and each step's return is z-scored within its anchor group:

      A_S[i, k] = (G[i, k] - mean_a G) / std_a G,
      a = {(j, l) : mask[j, l], state_ids[j, l] == state_ids[i, k]},

  population std; 0 where |a| == 1, std_a <= eps or mask is False.

  Args:
    returns: [N, K] G (`discounted_outcome_returns`).
    state_ids: [N, K] int: equal ids = the same state.
    mask: [N, K] bool.
  Returns:
    A_S: [N, K] float64.
  """
  g = np.asarray(returns, dtype=np.float64)
  ids = np.asarray(state_ids)
  m = _bool_mask(mask, g.shape, "anchor_state_advantages")
  if ids.shape != g.shape:
    raise ValueError(
      f"anchor_state_advantages: state_ids {ids.shape} != returns {g.shape}"
    )
  out = np.zeros_like(g)
  for sid in np.unique(ids[m]):
    members = m & (ids == sid)
    out[members] = group_zscore(g[members], eps)
  return out


def gigpo_advantages(
  outcome, state_ids, mask, *, gamma: float, omega: float, eps: float = 1e-8
) -> np.ndarray:
  """GiGPO advantage of every step of one task group: the episode-level
  GRPO z-score of the outcomes plus omega times the anchor-state step
  advantage (`anchor_state_advantages` of `discounted_outcome_returns`):

      A[i, k] = (O[i] - mean O) / std O + omega * A_S[i, k]   (mask[i, k]),

  0 where mask is False. Step-level credit without a judge: steps that led
  to a win from a state other rollouts also reached score above those that
  did not.

  Args:
    outcome: [N] O; state_ids: [N, K] int; mask: [N, K] bool.
  Returns:
    A: [N, K] float64.
  """
  m = np.asarray(mask, dtype=bool)
  episode = group_zscore(outcome, eps)[:, None]
  step = anchor_state_advantages(
    discounted_outcome_returns(outcome, m, gamma), state_ids, m, eps
  )
  return np.where(m, episode + omega * step, 0.0)


def outcome_balance_weights(won, keep) -> np.ndarray:
  """Per-episode weights that give won and lost episodes equal shares of a
  task's reward-model samples (a deliberate deviation from the reference).

  Failed episodes run to the step cap while successes end early, so most
  consistency-feedback samples (`standardize_over_judgements`) come from
  failures, where every mixed vote is pushed to -1: the judge drifts to a
  constant -1. With n_c kept samples from episodes of outcome class c
  (won or lost) and n = n_won + n_lost:
    w[i] = n / (2 * n_{class(i)})   when both classes have samples,
    w[i] = 1                        otherwise.
  So sum over kept samples of w is n, split evenly between the classes.

  Args:
    won: [N] bool, the episodes' outcomes.
    keep: [N, K, M] bool, the kept samples.
  Returns:
    [N] float64 weights.
  """
  won = np.asarray(won, bool)
  per_episode = np.asarray(keep, bool).reshape(len(won), -1).sum(1)
  n_won, n_lost = int(per_episode[won].sum()), int(per_episode[~won].sum())
  if n_won == 0 or n_lost == 0:
    return np.ones(len(won))
  total = n_won + n_lost
  return np.where(won, total / (2 * n_won), total / (2 * n_lost))
