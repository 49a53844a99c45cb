"""Metric key names shared by the training loop and the reports.

The loop logs scalars under these names; the summary, the learning-curve figure
and the Table-1 ablation look them up here. Accuracy/success metrics are
fractions in [0, 1].
"""

from __future__ import annotations

import dataclasses

EVAL_ID_SUCCESS = "eval/in_distribution_success"
EVAL_OOD_SUCCESS = "eval/out_of_distribution_success"
EVAL_RM_PROCESS_ACCURACY = "eval/rm_process_accuracy"
EVAL_RM_OUTCOME_ACCURACY = "eval/rm_outcome_accuracy"
EVAL_RM_POSITIVE_RATE = "eval/rm_positive_rate"
EVAL_RM_PROCESS_BALANCED_ACCURACY = "eval/rm_process_balanced_accuracy"
ENV_ACCEPTED_TOTAL = "env/accepted_total"
TRAIN_ROLLOUT_ACCURACY = "train/rollout_accuracy"
# Wall time (seconds) of one evaluation, all splits and the judge's part.
EVAL_SECONDS = "eval/seconds"
SUCCESS_CHANGE_SUFFIX = "_success_change"

TRAIN_PREFIX = "train/"

# Keys summarised first (in this order) by
# `write_summary`; train/* keys follow, sorted.
SUMMARY_KEYS = (
  EVAL_ID_SUCCESS,
  EVAL_OOD_SUCCESS,
  EVAL_RM_PROCESS_ACCURACY,
  EVAL_RM_OUTCOME_ACCURACY,
  ENV_ACCEPTED_TOTAL,
)

# Summarised after SUMMARY_KEYS when logged (not reported when absent).
OPTIONAL_SUMMARY_KEYS = (
  EVAL_RM_POSITIVE_RATE,
  EVAL_RM_PROCESS_BALANCED_ACCURACY,
)

# (column title, key) of the paper's Table 1.
TABLE1_COLUMNS = (
  ("Policy in-distribution", EVAL_ID_SUCCESS),
  ("Policy OOD", EVAL_OOD_SUCCESS),
  ("RM process", EVAL_RM_PROCESS_ACCURACY),
  ("RM outcome", EVAL_RM_OUTCOME_ACCURACY),
)

# Keys shown on the one-line terminal progress display by default.
DEFAULT_DISPLAY_KEYS = (
  TRAIN_ROLLOUT_ACCURACY,
  "train/policy_loss",
  "train/rm_loss",
  EVAL_ID_SUCCESS,
  EVAL_OOD_SUCCESS,
  ENV_ACCEPTED_TOTAL,
)


def is_loss_key(key: str) -> bool:
  """True for keys where smaller is better (their name contains "loss")."""
  return "loss" in key.rsplit("/", 1)[-1]


def is_wall_clock_key(key: str) -> bool:
  """True for keys holding wall-clock times ("time", "time/*",
  eval/seconds): the only values two otherwise identical runs differ in."""
  return key in ("time", EVAL_SECONDS) or key.startswith("time/")


@dataclasses.dataclass(frozen=True)
class SplitKeys:
  """The success keys of one evaluation split: success (mean over its
  runs), change and change_stderr (paired against the start evaluation)
  and runs (N, the (game, rollout) runs)."""

  success: str
  change: str
  change_stderr: str
  runs: str


def split_keys(split: str) -> SplitKeys:
  """SplitKeys of eval split `split`, e.g. "in_distribution"."""
  p = f"eval/{split}"
  return SplitKeys(
    success=f"{p}_success",
    change=f"{p}{SUCCESS_CHANGE_SUFFIX}",
    change_stderr=f"{p}{SUCCESS_CHANGE_SUFFIX}_stderr",
    runs=f"{p}_runs",
  )


def change_splits(present) -> list[str]:
  """The eval splits (sorted) whose paired success change is among the
  keys `present`."""
  return sorted(
    k[len("eval/") : -len(SUCCESS_CHANGE_SUFFIX)]
    for k in present
    if k.startswith("eval/") and k.endswith(SUCCESS_CHANGE_SUFFIX)
  )
