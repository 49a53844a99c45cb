"""A judge's majority votes against the expert's step labels: the one place
where process accuracy, balanced accuracy and the +1 rates are counted
(the loop's evaluation, its on-policy diagnostic and launch/judge_eval.py
all read them from here)."""

from __future__ import annotations

import dataclasses

import numpy as np


def majority_vote(scores: np.ndarray) -> np.ndarray:
  """[..., m] scores in {+1, -1, 0} -> [...] +1 iff strictly more +1 votes
  than the other votes, else -1."""
  pos = (scores > 0).sum(-1)
  return np.where(pos * 2 > scores.shape[-1], 1, -1)


@dataclasses.dataclass(frozen=True)
class StepVotes:
  """The judge's majority vote, the expert's label and the episode of each
  of S judged steps: votes, labels in {+1, -1}, episode in [0, E); [S]."""

  votes: np.ndarray
  labels: np.ndarray
  episode: np.ndarray

  FIELDS = ("votes", "labels", "episode")


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
