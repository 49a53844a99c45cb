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
* Paired success change: every evaluation plays the same N (game, rollout)
  runs, each drawing its sampling noise from its own stream (the sampler's
  row seeds: common random numbers per run, whichever other runs have
  ended), so a later
  evaluation's change against the start one is the mean of the per-run
  differences, with the paired standard error (`paired_difference`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence

import numpy as np

from rla_jax.envs.alfworld import label_progress
from rla_jax.metrics import keys
from rla_jax.rl.judge_accuracy import judge_breakdown, step_votes
from rla_jax.rl.rewards import step_mask_from_lengths


def process_labels(episodes) -> list[list[int]]:
  """Expert progress label (+1/-1) of every step of every episode."""
  return [
    [
      1 if label_progress(ep.game, ep.actions[:k], ep.actions[k]) else -1
      for k in range(ep.num_steps)
    ]
    for ep in episodes
  ]


def judged_step_labels(episodes, mask: np.ndarray) -> list[list[int]]:
  """The expert's progress label (+1/-1) of each step with mask[n, k]
  ([N, K], e.g. the steps an RL step judged), 0 at the others (which
  `rm_process_breakdown` never reads): `process_labels` for a subset, as
  labelling replays the episode up to the step."""
  return [
    [
      (1 if label_progress(ep.game, ep.actions[:k], ep.actions[k]) else -1)
      if mask[n, k]
      else 0
      for k in range(ep.num_steps)
    ]
    for n, ep in enumerate(episodes)
  ]


def expert_step_scores(episodes) -> tuple[np.ndarray, np.ndarray]:
  """The expert's progress labels as one vote per step: (S [N, K, 1] in
  {+1, -1}, 0 past an episode's end; mask [N, K]), K the longest episode
  (at least 1)."""
  labels = process_labels(episodes)
  K = max([len(row) for row in labels] + [1])
  mask = step_mask_from_lengths([len(row) for row in labels], K)
  scores = np.zeros((len(episodes), K, 1))
  scores[mask, 0] = [label for row in labels for label in row]
  return scores, mask


def policy_parsed_rate(episodes) -> float:
  """Share of all the episodes' policy replies whose \\boxed{} index names an
  admissible action (the rest fell back to candidate 0); 0 if no steps."""
  flags = [p for ep in episodes for p in ep.answer_parsed]
  return float(np.mean(flags)) if flags else 0.0


def rm_process_accuracy(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> float:
  """Fraction of real steps whose majority vote equals the expert label."""
  v = step_votes(scores, mask, labels)
  return float((v.votes == v.labels).mean()) if v.labels.size else math.nan


def rm_process_breakdown(
  scores: np.ndarray, mask: np.ndarray, labels: list[list[int]]
) -> dict:
  """Majority-vote +1 rate, the expert's +1 label share (what a calibrated
  judge's +1 rate is near) and balanced accuracy (mean of the +1 and -1
  recalls) over the real steps (`judge_accuracy.judge_breakdown`); a class
  with no step counts as nan."""
  v = step_votes(scores, mask, labels)
  b = judge_breakdown(v.votes, v.labels)
  return {
    "positive_rate": b.positive_rate,
    "label_positive_rate": b.label_positive_rate,
    "balanced_accuracy": b.balanced,
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
  vote rate, the +1 label share and the balanced process accuracy, under
  their eval/ keys.
  """
  breakdown = rm_process_breakdown(scores, mask, labels)
  return {
    "eval/rm_process_accuracy": rm_process_accuracy(scores, mask, labels),
    "eval/rm_outcome_accuracy": rm_outcome_accuracy(scores, mask, won),
    keys.EVAL_RM_POSITIVE_RATE: breakdown["positive_rate"],
    keys.EVAL_RM_LABEL_POSITIVE_RATE: breakdown["label_positive_rate"],
    keys.EVAL_RM_PROCESS_BALANCED_ACCURACY: breakdown["balanced_accuracy"],
  }


@dataclasses.dataclass(frozen=True)
class PairedChange:
  """Means of N paired runs at the start and the end, the change
  end - start and its paired standard error (nan when n = 1)."""

  mean_start: float
  mean_end: float
  change: float
  stderr: float
  n: int


def paired_difference(start, end) -> PairedChange:
  """The change of N paired per-run outcomes and its paired standard error.

  start, end: [N] outcomes (0/1 success) of the same N runs (run i: the same
  game and sampling seed at both ends). With d = end - start per run:
    change = mean(d) = mean(end) - mean(start)
    stderr = sqrt(var(d, ddof=1) / N)
  Pairing removes the between-run variance that two independent means
  would carry. stderr is 0 when every run changed by the same amount (all
  d equal, e.g. no run changed) and nan when N = 1 (a sample variance
  needs two runs). ValueError unless start and end are [N], N >= 1.
  """
  s = np.asarray(start, np.float64)
  e = np.asarray(end, np.float64)
  if s.ndim != 1 or s.shape != e.shape or s.size == 0:
    raise ValueError(
      f"paired_difference needs start and end of one shape [N], N >= 1; "
      f"got {s.shape} and {e.shape}"
    )
  d = e - s
  n = int(d.size)
  stderr = math.sqrt(d.var(ddof=1) / n) if n > 1 else float("nan")
  return PairedChange(
    mean_start=float(s.mean()),
    mean_end=float(e.mean()),
    change=float(d.mean()),
    stderr=stderr,
    n=n,
  )


def paired_metrics(
  k: keys.SplitKeys,
  outcomes: Sequence[int],
  start: Sequence[int] | None,
  with_change_start: bool = False,
) -> dict[str, float]:
  """N (k.runs) of one metric's [N] per-run 0/1 outcomes and, with the
  start evaluation's [N] outcomes of the same runs, the change paired
  against them and its paired standard error (`paired_difference`) under
  k.change / k.change_stderr, and (with_change_start) the start
  outcomes' mean under k.change_start (for a metric whose value is not
  the mean of its per-run outcomes)."""
  out = {k.runs: len(outcomes)}
  if start is not None:
    paired = paired_difference(start, outcomes)
    out[k.change] = paired.change
    out[k.change_stderr] = paired.stderr
    if with_change_start:
      out[k.change_start] = paired.mean_start
  return out


def success_metrics(
  won: Mapping[str, Sequence[int]],
  start: Mapping[str, Sequence[int]] | None,
) -> dict[str, float]:
  """Per eval split: success (the mean over its [N] (game, rollout) runs'
  0/1 outcomes) and N; with the start evaluation's outcomes, also the
  success change paired against them and its paired standard error
  (`paired_metrics`), under the keys of `keys.split_keys`."""
  out = {}
  for split, outcomes in won.items():
    k = keys.split_keys(split)
    out[k.success] = float(np.mean(outcomes))
    out.update(
      paired_metrics(k, outcomes, None if start is None else start[split])
    )
  return out


# The eval settings that define its runs (with env.*, which the checkpoint
# fingerprint already fixes): a later evaluation is paired with the start
# one only if these are unchanged.
PAIRING_FIELDS = (
  "num_games",
  "rollouts_per_game",
  "max_steps",
  "seed",
  "temperature",
  "top_p",
  "greedy",
)


@dataclasses.dataclass(frozen=True)
class StartOutcomes:
  """The start evaluation's per-run 0/1 outcomes and the settings that
  define the runs; JSON-able record for the checkpoint.

  won[name]: [N_name] outcomes of one paired metric (ALFWorld: a split's
  (game, rollout) runs, 1 = won, settings = `pairing_settings` of
  config.eval; coding: "code" per (task, program) and "ut" per (task,
  generated test), 1 = passed all tests / correct test).
  """

  won: dict[str, list[int]]
  settings: dict

  @classmethod
  def of(cls, won: Mapping[str, Sequence[int]], settings) -> StartOutcomes:
    """The outcomes `won` played under `settings` (a dict, JSON-able)."""
    return cls(
      won={k: [int(w) for w in v] for k, v in won.items()},
      settings=dict(settings),
    )

  def record(self) -> dict:
    return {"won": self.won, "settings": self.settings}

  @classmethod
  def restore(cls, d: dict | None, settings, log) -> StartOutcomes | None:
    """The outcomes `record` saved (None if none were), or None, with a
    log line, if the settings that define the runs changed since (the
    current ones: `settings`): the runs would no longer be the same, so
    no change is paired against them."""
    if d is None:
      return None
    now = dict(settings)
    if d["settings"] != now:
      log(
        f"eval settings {now} differ from the start evaluation's "
        f"{d['settings']}: changes are not paired (not logged)"
      )
      return None
    return cls(won=dict(d["won"]), settings=dict(d["settings"]))


def pairing_settings(eval_cfg) -> dict:
  """The PAIRING_FIELDS of config.eval (ALFWorld's pairing settings)."""
  return {k: eval_cfg[k] for k in PAIRING_FIELDS}


OUTCOMES_NAME = "eval_outcomes.json"


def write_run_outcomes(
  workdir: str, row: int, won: Mapping[str, Sequence[int]]
) -> None:
  """Keeps evaluation `row`'s per-run 0/1 outcomes (metrics row: 0 = the
  start, s = after RL step s) in workdir/eval_outcomes.json, as {row:
  {split: [N]}}, dropping later rows (a resumed run rewrites them). Two
  runs of one config with other training (the ablation's stages) play
  the same runs, so their outcomes pair run by run."""
  path = os.path.join(workdir, OUTCOMES_NAME)
  rows = read_run_outcomes(workdir)
  rows = {r: v for r, v in rows.items() if r < row}
  rows[row] = {k: [int(w) for w in v] for k, v in won.items()}
  tmp = f"{path}.tmp"
  with open(tmp, "w") as f:
    json.dump({str(r): v for r, v in sorted(rows.items())}, f)
  os.replace(tmp, path)


def read_run_outcomes(workdir: str) -> dict[int, dict[str, list[int]]]:
  """workdir/eval_outcomes.json as {row: {split: [N] outcomes}} ({} if
  there is none)."""
  path = os.path.join(workdir, OUTCOMES_NAME)
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return {int(r): v for r, v in json.load(f).items()}
