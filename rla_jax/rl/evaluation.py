"""Evaluation: policy success and reward-model accuracy (paper Table 1).

* Policy success: mean `won` over the in-distribution (valid_seen) and
  out-of-distribution (valid_unseen) games, one rollout each.
* RM process accuracy: on a fixed set of reference trajectories (the paper
  judges the base policy's OOD trajectories; the loop keeps the first
  evaluation's, so every evaluation scores the same steps), the majority vote of
  the m judgements of each step (ties and unparseable votes count as -1)
  against the expert's progress label of that step (`label_progress`:
  +1 iff the action is the first step of a shortest plan from that state).
* RM outcome accuracy: per trajectory, the judge predicts success iff the
  mean step score is > 0; accuracy against the true outcome.
"""

from __future__ import annotations

import numpy as np

from rla_jax.envs.alfworld import label_progress
from rla_jax.metrics import keys


def majority_vote(scores: np.ndarray) -> np.ndarray:
  """[..., m] scores in {+1, -1, 0} -> [...] +1 iff strictly more +1 votes
  than the other votes, else -1."""
  pos = (scores > 0).sum(-1)
  return np.where(pos * 2 > scores.shape[-1], 1, -1)


def process_labels(episodes) -> list[list[int]]:
  """Expert progress label (+1/-1) of every step of every episode."""
  return [
    [
      1 if label_progress(ep.game, ep.actions[:k], ep.actions[k]) else -1
      for k in range(ep.num_steps)
    ]
    for ep in episodes
  ]


def _votes_and_labels(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> tuple[np.ndarray, np.ndarray]:
  """([S] majority votes, [S] expert labels) of the S real steps."""
  votes = majority_vote(scores)
  pairs = [
    (votes[n, k], lab)
    for n, row in enumerate(labels)
    for k, lab in enumerate(row)
    if mask[n, k]
  ]
  return tuple(np.array(pairs, np.int64).reshape(-1, 2).T)


def rm_process_accuracy(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> float:
  """Fraction of real steps whose majority vote equals the expert label."""
  v, y = _votes_and_labels(scores, mask, labels)
  return float((v == y).mean()) if y.size else float("nan")


def rm_process_breakdown(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> dict:
  """Majority-vote +1 rate and balanced accuracy (mean of the +1 and -1
  recalls) over the real steps; a class with no step counts as nan."""
  v, y = _votes_and_labels(scores, mask, labels)
  if not y.size:
    return {"positive_rate": float("nan"), "balanced_accuracy": float("nan")}
  recalls = [
    float((v[y == c] == c).mean()) if (y == c).any() else float("nan")
    for c in (1, -1)
  ]
  return {
    "positive_rate": float((v > 0).mean()),
    "balanced_accuracy": float(np.mean(recalls)),
  }


def rm_outcome_accuracy(
  scores: np.ndarray, mask: np.ndarray, won: np.ndarray
) -> float:
  """Fraction of trajectories where (mean step score > 0) == won."""
  hits = total = 0
  for n in range(len(won)):
    steps = scores[n][mask[n]]
    if steps.size == 0:
      continue
    hits += int((steps.mean() > 0) == bool(won[n]))
    total += 1
  return hits / total if total else float("nan")


def judge_metrics(
  scores: np.ndarray,
  mask: np.ndarray,
  labels: list[list[int]],
  won: np.ndarray,
) -> dict[str, float]:
  """The judge's evaluation metrics on N reference trajectories.

  scores: [N, K, m] votes in {+1, -1, 0}; mask: [N, K] real steps; labels:
  the expert's +1/-1 progress label of every real step (`process_labels`);
  won: [N] outcomes. Returns process accuracy, outcome accuracy, the +1
  vote rate and the balanced process accuracy, under their eval/ keys.
  """
  breakdown = rm_process_breakdown(scores, mask, labels)
  return {
    "eval/rm_process_accuracy": rm_process_accuracy(scores, mask, labels),
    "eval/rm_outcome_accuracy": rm_outcome_accuracy(scores, mask, won),
    keys.EVAL_RM_POSITIVE_RATE: breakdown["positive_rate"],
    keys.EVAL_RM_PROCESS_BALANCED_ACCURACY: breakdown["balanced_accuracy"],
  }
