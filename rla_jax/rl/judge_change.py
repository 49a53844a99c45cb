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

from rla_jax.rl.judge_accuracy import JudgeBreakdown, StepVotes, judge_breakdown


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


def outcome_shares(episodes, labels) -> dict:
  """How the reference episodes' outcomes meet the expert's labels: the
  share of episodes won; the share of the +1 (progress) steps that lie in
  lost episodes (where consistency feedback, R = O + mean S with O < 0,
  rewards a -1 vote); and the share of won episodes' steps labelled -1
  (the labels' shortest-plan distance knows where every object is, so a
  search step of a game later won is -1: what ExpertS trains on)."""
  won = [bool(e.won) for e in episodes]
  steps = [(w, y) for w, row in zip(won, labels, strict=True) for y in row]
  plus = [w for w, y in steps if y > 0]
  in_won = [y for w, y in steps if w]
  return {
    "won_share": sum(won) / len(won),
    "plus_steps": len(plus),
    "plus_steps_in_lost_share": plus.count(False) / max(len(plus), 1),
    "won_steps": len(in_won),
    "minus_steps_in_won_share": sum(y < 0 for y in in_won)
    / max(len(in_won), 1),
  }
