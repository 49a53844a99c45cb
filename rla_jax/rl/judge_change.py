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

from rla_jax.rl.advantages import (
  consistency_feedback_rewards,
  outcome_balance_weights,
  standardize_over_judgements,
)
from rla_jax.rl.judge_accuracy import (
  JudgeBreakdown,
  StepVotes,
  judge_breakdown,
  majority_vote,
)
from rla_jax.rl.rewards import integrated_step_rewards, outcome_from_success


def _weighted_recalls(votes, labels, weights) -> dict[int, np.ndarray]:
  """{c: sum w [label = c, vote = c] / sum w [label = c]} for c = +1, -1,
  summed over the last axis (votes, labels [S] or [..., S]; weights
  broadcast to [..., S]); nan where a class has zero weight."""
  out = {}
  for c in (1, -1):
    of_class = weights * (labels == c)
    with np.errstate(invalid="ignore", divide="ignore"):
      out[c] = (of_class * (votes == c)).sum(-1) / of_class.sum(-1)
  return out


def _bootstrap_balanced(
  votes: np.ndarray, labels: np.ndarray, weights: np.ndarray
) -> np.ndarray:
  """Balanced accuracy of [S] votes and labels under D step weightings
  ([D, S]): per draw, each recall is a weighted mean. [D]."""
  recalls = _weighted_recalls(votes, labels, weights)
  return (recalls[1] + recalls[-1]) / 2


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


@dataclasses.dataclass(frozen=True)
class ConsistencyTarget:
  """Where consistency feedback pushes a judge, against the expert's labels.

  On the P steps whose m votes disagree (the only ones it trains on):
  toward_plus / toward_minus are the (outcome-balanced) shares of the +1 /
  -1 labelled steps pushed toward their label; balanced is their mean, the
  balanced accuracy of the push read as a vote; judge_balanced is the
  judge's own majority-vote balanced accuracy on the same P steps."""

  balanced: float
  toward_plus: float
  toward_minus: float
  judge_balanced: float
  pushed_steps: int
  num_steps: int

  def record(self) -> dict:
    return dataclasses.asdict(self)


def consistency_target(
  scores: np.ndarray,
  mask: np.ndarray,
  won: np.ndarray,
  labels: list[list[int]],
  lam: float = 1.0,
) -> ConsistencyTarget:
  """The direction consistency feedback trains each judged step toward, as
  the loop computes it (`training_data.task_samples`), scored against the
  expert's labels y.

    R[n, k]    = O[n] + lam * mean_j S[n, k, j]       (integrated_step_rewards)
    A[n, k, j] = zscore_j(R[n, k] * S[n, k, j])       (consistency feedback,
                                                       standardize_over_judgements)
    push[n, k] = sum_j A[n, k, j] * S[n, k, j]        (> 0: toward +1)
    w[n]       = outcome_balance_weights(won, A != 0) (won and lost equal)
    toward_c   = sum_w [y = c, sign(push) = c] / sum_w [y = c, push != 0]

  Args:
    scores: [N, K, M] votes in {+1, -1, 0}; mask: [N, K] real steps;
    won: [N] bool; labels: per episode, the expert's +1/-1 label of each
    step (`evaluation.process_labels`).
  Over the whole set (one group), where the loop balances each task group.
  """
  s = np.asarray(scores)
  won = np.asarray(won, bool)
  y = np.zeros(s.shape[:2], np.int64)
  for n, row in enumerate(labels):
    y[n, : len(row)] = row
  reward = integrated_step_rewards(outcome_from_success(won), s, mask, lam)
  adv, keep = standardize_over_judgements(
    consistency_feedback_rewards(reward, s, mask), mask
  )
  push = np.sign((adv * s).sum(-1)).astype(np.int64)
  w = np.broadcast_to(outcome_balance_weights(won, keep)[:, None], y.shape)
  pushed = np.asarray(mask, bool) & (push != 0)
  toward = _weighted_recalls(push.ravel(), y.ravel(), (w * pushed).ravel())
  judge = _weighted_recalls(
    majority_vote(s).ravel(), y.ravel(), (w * pushed).ravel()
  )
  return ConsistencyTarget(
    balanced=float(toward[1] + toward[-1]) / 2,
    toward_plus=float(toward[1]),
    toward_minus=float(toward[-1]),
    judge_balanced=float(judge[1] + judge[-1]) / 2,
    pushed_steps=int(pushed.sum()),
    num_steps=int(np.asarray(mask, bool).sum()),
  )


def votes_by_verb(actions, won, scores, mask, labels) -> dict:
  """The judge's majority vote beside the expert's label, by the verb of
  each step's action and the episode's outcome: where the judge's step
  signal and the labels (ExpertS, ExpertC) differ.

    verb[n, k] = first word of actions[n][k]  ("go", "open", "take", ...)
    out[verb]["won" | "lost"] = {
      "steps":       #{(n, k) : mask, verb, outcome},
      "label_plus":  share of them with y[n, k] = +1,
      "judge_plus":  share with majority_j S[n, k, j] = +1,
    }

  Args:
    actions: per episode, its N_n action strings; won: [N] bool;
    scores: [N, K, M] votes in {+1, -1, 0}; mask: [N, K] real steps;
    labels: per episode, the expert's +1/-1 label of each step.
  """
  majority = majority_vote(np.asarray(scores))
  mask = np.asarray(mask, bool)
  cells: dict = {}
  for n, (acts, w, row) in enumerate(zip(actions, won, labels, strict=True)):
    for k, (action, y) in enumerate(zip(acts, row, strict=True)):
      if not mask[n, k]:
        continue
      verb = (action.split() or ["(empty)"])[0]
      cell = cells.setdefault(verb, {}).setdefault(
        "won" if w else "lost", [0, 0, 0]
      )
      cell[0] += 1
      cell[1] += int(y > 0)
      cell[2] += int(majority[n, k] > 0)
  return {
    verb: {
      outcome: {
        "steps": c[0],
        "label_plus": c[1] / c[0],
        "judge_plus": c[2] / c[0],
      }
      for outcome, c in sorted(by_outcome.items())
    }
    for verb, by_outcome in sorted(cells.items())
  }
