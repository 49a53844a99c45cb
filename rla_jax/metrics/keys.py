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
# The share of the reference steps the expert labels +1 (progress).
EVAL_RM_LABEL_POSITIVE_RATE = "eval/rm_label_positive_rate"
EVAL_RM_PROCESS_BALANCED_ACCURACY = "eval/rm_process_balanced_accuracy"
ENV_ACCEPTED_TOTAL = "env/accepted_total"
TRAIN_ROLLOUT_ACCURACY = "train/rollout_accuracy"
# Wall time (seconds) of one evaluation, all splits and the judge's part.
EVAL_SECONDS = "eval/seconds"
# 1 when the start evaluation's row is the recorded one
# (rla_jax/rl/start_evaluation.py), checked by replaying this many runs of
# each split.
EVAL_START_RECORDED = "eval/start_recorded"
EVAL_START_CHECK_RUNS = "eval/start_check_runs"
# A recorded start's estimate of a full evaluation's seconds: the recorded
# evaluation's own wall time (on the machine that made it).
EVAL_FULL_SECONDS_ESTIMATE = "eval/full_seconds_estimate"
SUCCESS_SUFFIX = "_success"
CHANGE_SUFFIX = "_change"

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

# The coding evaluation's (rla_jax.rl.coding_loop): Code, UT, Detect, and
# the pass-all accuracy of the program the generated tests select, its
# uniform-pick baseline and their difference.
EVAL_CODE = "eval/code"
EVAL_UT = "eval/ut"
EVAL_DETECT = "eval/detect"
EVAL_SELECTED_CODE = "eval/selected_code"
EVAL_RANDOM_CODE = "eval/random_code"
EVAL_SELECTION_GAIN = "eval/selection_gain"
# Its standard error over the eval tasks (the per-task gains' spread).
EVAL_SELECTION_GAIN_STDERR = "eval/selection_gain_stderr"

# The coding loop's summary keys (its setting logs no success or judge
# accuracy).
CODING_SUMMARY_KEYS = (
  EVAL_CODE,
  EVAL_UT,
  EVAL_DETECT,
  EVAL_SELECTED_CODE,
  EVAL_RANDOM_CODE,
  ENV_ACCEPTED_TOTAL,
)

# Summarised after SUMMARY_KEYS when logged (not reported when absent).
OPTIONAL_SUMMARY_KEYS = (
  EVAL_RM_POSITIVE_RATE,
  EVAL_RM_LABEL_POSITIVE_RATE,
  EVAL_RM_PROCESS_BALANCED_ACCURACY,
  EVAL_CODE,
  EVAL_UT,
  EVAL_DETECT,
  EVAL_SELECTED_CODE,
  EVAL_RANDOM_CODE,
  EVAL_SELECTION_GAIN,
  EVAL_SELECTION_GAIN_STDERR,
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
  """The keys of one metric paired against the start evaluation: success
  (its value; for ALFWorld a split's success, the mean over its runs),
  change and change_stderr (paired against the start evaluation), runs
  (N, the paired runs) and change_start (the start evaluation's mean over
  the paired runs, logged only where it is not success - change, e.g.
  coding's UT without references)."""

  success: str
  change: str
  change_stderr: str
  runs: str
  change_start: str


def paired_keys(metric: str, runs: str | None = None) -> SplitKeys:
  """SplitKeys of eval metric `metric` (eval/{metric}, e.g. "code"):
  eval/{metric}_change, ..._change_stderr, ..._change_start and runs
  (default eval/{metric}_runs)."""
  p = f"eval/{metric}"
  return SplitKeys(
    success=p,
    change=f"{p}{CHANGE_SUFFIX}",
    change_stderr=f"{p}{CHANGE_SUFFIX}_stderr",
    runs=runs or f"{p}_runs",
    change_start=f"{p}{CHANGE_SUFFIX}_start",
  )


def split_keys(split: str) -> SplitKeys:
  """SplitKeys of eval split `split`, e.g. "in_distribution": the paired
  keys of eval/{split}_success, with runs eval/{split}_runs."""
  return paired_keys(f"{split}_success", runs=f"eval/{split}_runs")


def change_metrics(present) -> list[str]:
  """The eval metrics (sorted) whose paired change is among the keys
  `present`: m with eval/{m} and eval/{m}_change both present."""
  return sorted(
    k[len("eval/") : -len(CHANGE_SUFFIX)]
    for k in present
    if k.startswith("eval/")
    and k.endswith(CHANGE_SUFFIX)
    and k[: -len(CHANGE_SUFFIX)] in present
  )


def keys_of_change(metric: str) -> SplitKeys:
  """The SplitKeys `change_metrics`' metric was logged under: an ALFWorld
  split's (`split_keys`) for {split}_success, else `paired_keys`."""
  if metric.endswith(SUCCESS_SUFFIX):
    return split_keys(metric[: -len(SUCCESS_SUFFIX)])
  return paired_keys(metric)
