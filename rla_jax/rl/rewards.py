"""Integrated step-wise policy reward R = O + lam * mean_j S (reference sec. 2).

Dimension letters used in docstrings:
  N: trajectories (rollouts) of one task group,
  K: step index within a trajectory (padded to the longest trajectory),
  M: judge samples (generative reward-model votes) per step.

A step k of trajectory i exists iff ``step_mask[i, k]``; padded entries of every
output are exactly 0. Scores S are the parsed judge outputs in {+1, -1, 0}, 0
meaning "unparseable" (see ``parsing.parse_boxed_score``).

Deliberate deviation: lam is a parameter (the reference hard-codes lam = 1; the
default here is 1.0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VALID_SCORES = (-1, 0, 1)


def _as_bool_mask(step_mask, shape, name: str) -> np.ndarray:
  mask = np.asarray(step_mask)
  if mask.shape != shape:
    raise ValueError(
      f"{name}: step_mask has shape {mask.shape}, expected {shape}"
    )
  if mask.dtype != bool:
    if not np.all((mask == 0) | (mask == 1)):
      raise ValueError(
        f"{name}: step_mask must be boolean or 0/1, got values "
        f"{np.unique(mask)}"
      )
    mask = mask.astype(bool)
  return mask


def outcome_from_success(won) -> np.ndarray | int:
  """Outcome reward O in {+1, -1}: +1 if the episode was won, else -1.

  ``won``: a bool or a bool array [N] -> int or int array [N]. (An empty
  trajectory counts as not won, reference sec. 2.)
  """
  if isinstance(won, (bool, np.bool_)):
    return 1 if won else -1
  arr = np.asarray(won)
  if arr.dtype != bool:
    raise ValueError(
      f"outcome_from_success: expected bool values, got dtype {arr.dtype}"
    )
  return np.where(arr, 1, -1).astype(np.int64)


def step_mask_from_lengths(
  lengths: Sequence[int], max_steps: int | None = None
) -> np.ndarray:
  """Prefix mask [N, K]: ``mask[i, k] = k < lengths[i]``;
  K = max_steps or max(lengths)."""
  lens = np.asarray(lengths, dtype=np.int64)
  if lens.ndim != 1 or np.any(lens < 0):
    raise ValueError(
      "step_mask_from_lengths: lengths must be a 1-D array of ints >= 0, got "
      f"{lengths!r}"
    )
  k = int(lens.max(initial=0)) if max_steps is None else int(max_steps)
  if np.any(lens > k):
    raise ValueError(
      f"step_mask_from_lengths: a length exceeds max_steps={k}: {lens.tolist()}"
    )
  return np.arange(k)[None, :] < lens[:, None]


def integrated_step_rewards(
  outcome, step_scores, step_mask, lam: float = 1.0
) -> np.ndarray:
  """Integrated step reward (reference sec. 2, blog eq.).

  R[i, k] = O[i] + lam * (1/M) * sum_j S[i, k, j]   where step_mask[i, k],
  R[i, k] = 0                                         elsewhere.

  Args:
    outcome: [N] in {+1, -1}.
    step_scores: [N, K, M] in {+1, -1, 0}; 0 = unparseable, it counts in the
      mean as 0 (e.g. scores [1, 1, 0] give mean 2/3).
    step_mask: [N, K] bool.
    lam: weight of the step-wise judge term (reference: 1).
  Returns:
    R: [N, K] float64.
  """
  o = np.asarray(outcome)
  s = np.asarray(step_scores)
  if o.ndim != 1:
    raise ValueError(
      f"integrated_step_rewards: outcome must have shape [N], got {o.shape}"
    )
  if s.ndim != 3 or s.shape[0] != o.shape[0]:
    raise ValueError(
      f"integrated_step_rewards: step_scores must have shape [N={o.shape[0]}, "
      f"K, M], got {s.shape}"
    )
  if s.shape[2] < 1:
    raise ValueError(
      "integrated_step_rewards: M (judge samples per step) must be >= 1"
    )
  if not np.all(np.isin(o, (-1, 1))):
    raise ValueError(
      "integrated_step_rewards: outcome values must be +-1, got "
      f"{np.unique(o).tolist()}"
    )
  if not np.all(np.isin(s, VALID_SCORES)):
    raise ValueError(
      f"integrated_step_rewards: step_scores must be in {{-1,0,1}}, got "
      f"{np.unique(s).tolist()}"
    )
  mask = _as_bool_mask(step_mask, s.shape[:2], "integrated_step_rewards")
  reward = o.astype(np.float64)[:, None] + float(lam) * s.astype(
    np.float64
  ).mean(axis=-1)
  return np.where(mask, reward, 0.0)


def high_risk_steps(step_scores, num_steps: int) -> list[int]:
  """Indices k < num_steps where all M judge votes are -1 (reference sec. 6.2).

  ``step_scores``: [K, M] scores of one trajectory. These steps are hinted to
  the critic in the failure-summary prompt.
  """
  s = np.asarray(step_scores)
  if s.ndim != 2 or s.shape[1] < 1:
    raise ValueError(
      f"high_risk_steps: step_scores must have shape [K, M>=1], got {s.shape}"
    )
  if not 0 <= num_steps <= s.shape[0]:
    raise ValueError(
      f"high_risk_steps: num_steps={num_steps} outside [0, K={s.shape[0]}]"
    )
  return [k for k in range(num_steps) if bool(np.all(s[k] == -1))]


def task_accuracy(won) -> float:
  """Group accuracy acc(q) = (#won rollouts) / N for ``won`` [N] bool;
  0.0 if N = 0."""
  arr = np.asarray(won)
  if arr.ndim != 1 or (arr.size and arr.dtype != bool):
    raise ValueError(
      f"task_accuracy: expected a 1-D bool array [N], got dtype {arr.dtype} "
      f"shape {arr.shape}"
    )
  return float(arr.mean()) if arr.size else 0.0
