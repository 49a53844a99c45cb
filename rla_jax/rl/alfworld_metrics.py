"""Phase 8 of an ALFWorld RL step (`rla_jax.rl.alfworld_loop`): the step's
metrics, read from the records the earlier phases pass on."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rla_jax.rl import evaluation
from rla_jax.rl.phases import adaptation_metrics

if TYPE_CHECKING:
  from rla_jax.rl.adaptation import TaskPool
  from rla_jax.rl.phases import (
    Resolution,
    StepJudgements,
    StepRollouts,
    StepSamples,
  )


def step_metrics(
  episodes,
  judged: StepJudgements,
  rolled: StepRollouts,
  resolution: Resolution,
  samples: StepSamples,
  proposed: int,
  pool: TaskPool,
  step_signal: str,
) -> dict:
  """Phase 8: rollout, sample, judge and task-pool metrics of the step,
  from the records of phases 2-7 (`step_signal`: config
  reward.step_signal)."""
  active_rows = [r for i in rolled.active_indices() for r in rolled.rows[i]]
  scores, mask = judged.scores, judged.mask
  is_judged = judged.judgements is not None
  metrics = {
    "train/rollout_accuracy": float(
      np.mean([episodes[r].won for r in active_rows])
    ),
    "train/mean_episode_steps": float(
      np.mean([episodes[r].num_steps for r in active_rows])
    ),
    "train/policy_parsed_rate": evaluation.policy_parsed_rate(episodes),
    **samples.metrics(),
    "env/candidates_evaluated": len(resolution.evaluated),
    "env/accepted_this_step": resolution.num_accepted,
    **adaptation_metrics(pool, proposed),
  }
  if is_judged and mask.any():
    metrics["train/judge_positive_rate"] = float((scores[mask] > 0).mean())
    metrics["train/judge_unparseable_rate"] = float((scores[mask] == 0).mean())
    # a diagnostic against the expert's labels (not trained on)
    metrics.update(judge_accuracy_on_own_steps(episodes, scores, mask))
  elif step_signal != "judge" and mask.any():
    # the expert's labels stand for the votes: their +1 share
    metrics["train/expert_label_positive_rate"] = float(
      (scores[mask] > 0).mean()
    )
    metrics["train/expert_labelled_steps"] = int(mask.sum())
  if pool.accepted_accuracies:
    metrics["env/accepted_task_accuracy"] = float(
      np.mean(pool.accepted_accuracies)
    )
  return metrics


def judge_accuracy_on_own_steps(episodes, scores, mask) -> dict[str, float]:
  """The judge's balanced accuracy (majority of its m votes against the
  expert's progress labels) on the steps an RL step judged: the policy's
  own, current steps, not the fixed reference episodes of the evaluation.
  scores [N, K, m], mask [N, K]. A diagnostic only: nothing trains on the
  labels. Keys train/judge_balanced_accuracy and train/judge_label_positive
  _rate (the true progress share of those steps); none without both
  classes."""
  b = evaluation.rm_process_breakdown(
    scores, mask, evaluation.judged_step_labels(episodes, mask)
  )
  if not np.isfinite(b["balanced_accuracy"]):
    return {}
  return {
    "train/judge_balanced_accuracy": b["balanced_accuracy"],
    "train/judge_label_positive_rate": b["label_positive_rate"],
  }
