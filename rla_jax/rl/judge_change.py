"""How much a run changed its judge: process accuracy at the start and at
the end, on the same reference steps, with a paired standard error.

The loop's own judge evaluation (`evaluation.judge_metrics`) scores the
judge on eval.num_rm_episodes reference episodes (16 in the ALFWorld
default, about 540 steps), too few to tell a change of a few points from
noise. `launch/judge_eval.py` judges more reference episodes with the start
and the final judge (the same steps, the same vote seeds) and reports the
change of balanced process accuracy here, with its standard error from a
cluster bootstrap over episodes: the steps of one episode are correlated
(one game, one history), so episodes, not steps, are the resampled units.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rla_jax.rl.evaluation import majority_vote


@dataclasses.dataclass(frozen=True)
class StepVotes:
  """The judge's majority vote, the expert's label and the episode of each
  of S judged steps: votes, labels in {+1, -1}, episode in [0, E); [S]."""

  votes: np.ndarray
  labels: np.ndarray
  episode: np.ndarray


def step_votes(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> StepVotes:
  """The S real steps of N episodes as `StepVotes`.

  scores: [N, K, m] votes in {+1, -1, 0}; mask: [N, K] real steps;
  labels: per episode, the expert's +1/-1 label of each of its steps
  (`evaluation.process_labels`). A step's vote is the majority of its m
  votes (`majority_vote`: ties and unparseable votes count as -1).
  """
  majority = majority_vote(scores)
  n, k = np.nonzero(mask)
  return StepVotes(
    votes=majority[n, k].astype(np.int64),
    labels=np.array(
      [labels[i][j] for i, j in zip(n, k, strict=True)], np.int64
    ),
    episode=n.astype(np.int64),
  )


@dataclasses.dataclass(frozen=True)
class JudgeBreakdown:
  """One judge's accuracy on S steps: +1 and -1 recalls, balanced accuracy
  (their mean), its +1 vote rate and the labels' +1 share."""

  balanced: float
  plus_recall: float
  minus_recall: float
  positive_rate: float
  label_positive_rate: float


def judge_breakdown(votes: np.ndarray, labels: np.ndarray) -> JudgeBreakdown:
  """votes, labels: [S] in {+1, -1}.

    plus_recall  = #(vote = +1 and label = +1) / #(label = +1)
    minus_recall = #(vote = -1 and label = -1) / #(label = -1)
    balanced     = (plus_recall + minus_recall) / 2
  A recall with no step of its class is nan (and so is balanced).
  """
  v, y = np.asarray(votes), np.asarray(labels)
  recall = {
    c: float((v[y == c] == c).mean()) if (y == c).any() else float("nan")
    for c in (1, -1)
  }
  return JudgeBreakdown(
    balanced=(recall[1] + recall[-1]) / 2,
    plus_recall=recall[1],
    minus_recall=recall[-1],
    positive_rate=float((v > 0).mean()) if v.size else float("nan"),
    label_positive_rate=float((y > 0).mean()) if y.size else float("nan"),
  )


def _bootstrap_balanced(
  votes: np.ndarray, labels: np.ndarray, weights: np.ndarray
) -> np.ndarray:
  """Balanced accuracy of [S] votes and labels under D step weightings
  ([D, S]): per draw, each recall is a weighted mean. [D]."""
  recalls = []
  for c in (1, -1):
    of_class = weights * (labels == c)
    hits = (of_class * (votes == c)).sum(-1)
    total = of_class.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
      recalls.append(hits / total)
  return (recalls[0] + recalls[1]) / 2


@dataclasses.dataclass(frozen=True)
class JudgeChange:
  """The start and end judges on the same steps and their balanced
  accuracy change end - start with its cluster-bootstrap standard error."""

  start: JudgeBreakdown
  end: JudgeBreakdown
  change: float
  stderr: float
  num_steps: int
  num_episodes: int

  def record(self) -> dict:
    """Flat JSON-able record (the keys of launch/judge_eval.py's file)."""
    out = {"balanced_start": self.start.balanced}
    out["balanced_end"] = self.end.balanced
    out["change"], out["stderr"] = self.change, self.stderr
    for name in ("positive_rate", "plus_recall", "minus_recall"):
      out[f"{name}_start"] = getattr(self.start, name)
      out[f"{name}_end"] = getattr(self.end, name)
    out["label_positive_rate"] = self.start.label_positive_rate
    out["num_steps"], out["num_episodes"] = self.num_steps, self.num_episodes
    return out


def judge_change(
  start: StepVotes, end: StepVotes, *, draws: int = 2000, seed: int = 0
) -> JudgeChange:
  """The balanced accuracy change of a judge on the same S steps of E
  episodes, and its paired standard error.

    change = balanced(end.votes) - balanced(start.votes)
    stderr = std (ddof=1) over `draws` cluster-bootstrap resamples of the
             same difference: each resample draws E episodes with
             replacement (numpy Generator(seed)) and keeps all their steps
             at both ends, so the pairing and the within-episode
             correlation are kept. Resamples missing a label class (no
             balanced accuracy) are left out.
  start and end must hold the same steps (labels and episodes equal);
  ValueError otherwise.
  """
  if not (
    np.array_equal(start.labels, end.labels)
    and np.array_equal(start.episode, end.episode)
  ):
    raise ValueError("judge_change: start and end judged different steps")
  episodes, cluster = np.unique(start.episode, return_inverse=True)
  e = len(episodes)
  counts = np.random.Generator(np.random.PCG64(seed)).multinomial(
    e, np.full(e, 1.0 / e), size=draws
  )  # [D, E]: how often each episode is drawn
  weights = counts[:, cluster].astype(np.float64)  # [D, S]
  diff = _bootstrap_balanced(
    end.votes, end.labels, weights
  ) - _bootstrap_balanced(start.votes, start.labels, weights)
  diff = diff[np.isfinite(diff)]
  a = judge_breakdown(start.votes, start.labels)
  b = judge_breakdown(end.votes, end.labels)
  return JudgeChange(
    start=a,
    end=b,
    change=b.balanced - a.balanced,
    stderr=float(diff.std(ddof=1)) if diff.size > 1 else float("nan"),
    num_steps=int(start.labels.size),
    num_episodes=e,
  )
