"""Ablation report in the layout of the paper's
Table 1 (its learning curves are `rla_jax.metrics.ablation_curves`).

Stages are e.g. "Before", "Policy", "+Reward", "+Env" (rows, in the given
order); each has one final-metrics dict per seed (see ``summary.last_values``).
Columns are ``keys.TABLE1_COLUMNS``: policy in-distribution / OOD success, RM
process / outcome accuracy, all fractions in [0, 1] shown in percent.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

from rla_jax.metrics import keys as K

# The paper's Table-1 stages in order, each adding one component.
TABLE1_STAGES = ("Policy", "+Judge", "+Reward", "+Env")


def mean_and_sample_std(values: Sequence[float]) -> tuple[float, float | None]:
  """Mean and sample standard deviation over seeds.

  For S seeds x_1..x_S: mean = sum_s x_s / S;
  std = sqrt(sum_s (x_s - mean)^2 / (S - 1))  (Bessel-corrected, ddof=1);
  None if S = 1.
  """
  if not values:
    raise ValueError("mean_and_sample_std: no values")
  n = len(values)
  mean = math.fsum(values) / n
  if n == 1:
    return mean, None
  return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))


def rl_step_seconds(history: Sequence[Mapping]) -> list[float]:
  """Each RL step's wall seconds in a run's metrics history: time/step less
  the evaluation it ran after the step (time/eval), for rows 1.. (row 0 is
  the evaluation before any update)."""
  return [
    float(row["time/step"]) - float(row.get("time/eval", 0.0))
    for row in history[1:]
    if "time/step" in row
  ]


def _seed_values(
  stage: str, seeds: Sequence[Mapping], key: str
) -> list[float] | None:
  """The key's value in every seed dict; None
  if no seed has it; error if only some."""
  have = [i for i, d in enumerate(seeds) if key in d]
  if not have:
    return None
  if len(have) != len(seeds):
    missing = sorted(set(range(len(seeds))) - set(have))
    raise ValueError(
      f"ablation stage {stage!r}: {key!r} is missing from seed(s) "
      f"{missing} but present in others"
    )
  values = []
  for i, d in enumerate(seeds):
    v = d[key]
    if (
      isinstance(v, bool)
      or not isinstance(v, numbers.Real)
      or not math.isfinite(v)
      or not 0.0 <= v <= 1.0
    ):
      raise ValueError(
        f"ablation stage {stage!r}, seed {i}: {key!r} = {v!r}; expected "
        "a fraction in [0, 1]"
      )
    values.append(float(v))
  return values


CHANGE_SPLITS = (
  ("Policy in-distribution", "in_distribution"),
  ("Policy OOD", "out_of_distribution"),
)


def mean_change(
  seeds: Sequence[Mapping], split: str
) -> tuple[float, float, float | None] | None:
  """A stage's success change from the start on `split`, over S seeds that
  each logged their paired change d_s and its paired s.e. e_s:
  (mean_s d_s, sqrt(sum_s e_s^2) / S, sample std of d_s) - the s.e. of a
  mean of S independent changes; None when no seed logged it."""
  k = K.split_keys(split)
  have = [d for d in seeds if k.change in d and k.change_stderr in d]
  if not have:
    return None
  if len(have) != len(seeds):
    raise ValueError(f"{k.change!r} is missing from some seeds")
  changes = [float(d[k.change]) for d in have]
  mean, std = mean_and_sample_std(changes)
  se = math.sqrt(math.fsum(float(d[k.change_stderr]) ** 2 for d in have))
  return mean, se / len(have), std


def change_markdown(results: Mapping[str, Sequence[Mapping]]) -> str:
  """Each stage's success change from its own start evaluation, in points:
  "mean (s.e.; seeds' std)" (`mean_change`); "" when no stage has one."""
  lines = []
  for stage, seeds in results.items():
    cells = []
    for _, split in CHANGE_SPLITS:
      c = mean_change(seeds, split)
      if c is None:
        cells.append("—")
        continue
      mean, se, std = c
      spread = "" if std is None else f"; {100 * std:.1f}"
      cells.append(f"{100 * mean:+.1f} ({100 * se:.1f}{spread})")
    if any(cell != "—" for cell in cells):
      lines.append(f"| {stage} | {len(seeds)} | " + " | ".join(cells) + " |")
  if not lines:
    return ""
  head = "| Stage | seeds | " + " | ".join(t for t, _ in CHANGE_SPLITS) + " |"
  return (
    "\n".join(
      [
        "Success change from the start, in points: mean over seeds (paired "
        "s.e. of that mean; seeds' sample std).",
        "",
        head,
        "|" + "---|" * (2 + len(CHANGE_SPLITS)),
        *lines,
      ]
    )
    + "\n"
  )


def _paired_difference_cells(ref: Mapping, seeds: Mapping) -> tuple[int, list]:
  """(S, cells): over the S seeds both stages ran, per split, the mean of
  `paired_difference(ref, stage)` and sqrt(sum_s e_s^2) / S, as "mean
  (s.e.; seeds' std)" in points; S = 0 when none is common."""
  from rla_jax.rl.evaluation import paired_difference  # (no import cycle)

  common = [s for s in seeds if s in ref]
  cells = []
  for _, split in CHANGE_SPLITS if common else ():
    diffs = [paired_difference(ref[s][split], seeds[s][split]) for s in common]
    mean, std = mean_and_sample_std([d.change for d in diffs])
    se = math.sqrt(math.fsum(d.stderr**2 for d in diffs)) / len(diffs)
    spread = "" if std is None else f"; {100 * std:.1f}"
    cells.append(f"{100 * mean:+.1f} ({100 * se:.1f}{spread})")
  return len(common), cells


def _difference_table(title: str, rows: list[str]) -> str:
  """A titled markdown table of (Stage, seeds, one column per split)."""
  if not rows:
    return ""
  head = "| Stage | seeds | " + " | ".join(t for t, _ in CHANGE_SPLITS) + " |"
  sep = "|" + "---|" * (2 + len(CHANGE_SPLITS))
  return "\n".join([title, "", head, sep, *rows]) + "\n"


def stage_difference_markdown(
  end_outcomes: Mapping[str, Mapping[str, Mapping[str, Sequence[int]]]],
  reference: str = "Policy",
) -> str:
  """Each stage's end success minus the reference stage's, paired run by
  run, in points: "mean (s.e.; seeds' std)"; "" without the reference.

  end_outcomes[stage][seed][split]: the [N] 0/1 outcomes of the final
  evaluation of that stage's run of that seed. Runs of one seed play the
  same N evaluation runs (same games and sampling seeds) in every stage,
  so per seed the difference is `paired_difference(reference, stage)`;
  over the S seeds both stages ran: mean_s d_s, s.e. sqrt(sum_s e_s^2)/S.
  """
  ref = end_outcomes.get(reference)
  rows = []
  for stage, seeds in end_outcomes.items():
    n, cells = _paired_difference_cells(ref or {}, seeds)
    if n and stage != reference:
      rows.append(f"| {stage} | {n} | " + " | ".join(cells) + " |")
  return _difference_table(
    f"End success minus {reference}'s, paired run by run, in points: "
    "mean over seeds (paired s.e. of that mean; seeds' sample std).",
    rows,
  )


def _pair_rows(end_outcomes, pairs) -> list[str]:
  """'| b - a | S | cells |' for each pair (a, b) that both ran (a paired
  run by run against b, `_paired_difference_cells`)."""
  rows = []
  for a, b in pairs:
    if end_outcomes.get(a) and end_outcomes.get(b):
      n, cells = _paired_difference_cells(end_outcomes[a], end_outcomes[b])
      if n:
        rows.append(f"| {b} - {a} | {n} | " + " | ".join(cells) + " |")
  return rows


def successive_difference_markdown(
  end_outcomes: Mapping[str, Mapping[str, Mapping[str, Sequence[int]]]],
  order: Sequence[str],
) -> str:
  """What each component adds: for consecutive stages a, b of `order`
  that both ran (e.g. Policy, +Judge, +Reward, +Env), b's end success
  minus a's, paired run by run as in `stage_difference_markdown`; ""
  with fewer than two such stages."""
  ran = [s for s in order if end_outcomes.get(s)]
  return _difference_table(
    "What each component adds: end success minus the previous stage's, "
    "paired run by run, in points (paired s.e.; seeds' sample std).",
    _pair_rows(end_outcomes, zip(ran, ran[1:], strict=False)),
  )


# The extra rows against the stage each replaces a part of: the expert's
# labels against the judge's votes they stand for (on every step, and on
# the judge's own step columns); continued SFT against full RLAnything for
# the same wall time (against Policy: the table above).
COUNTERPARTS = (
  ("+Judge", "ExpertS"),
  ("+Judge", "ExpertC"),
  ("ExpertS", "ExpertC"),
  ("+Env", "SFT"),
)


def counterpart_difference_markdown(
  end_outcomes: Mapping[str, Mapping[str, Mapping[str, Sequence[int]]]],
  pairs: Sequence[tuple[str, str]] = COUNTERPARTS,
) -> str:
  """Each extra row b against its counterpart a (pairs of (a, b) that
  both ran): b's end success minus a's, paired run by run as in
  `stage_difference_markdown`; "" when no pair ran."""
  return _difference_table(
    "Extra rows against their counterparts: end success difference, "
    "paired run by run, in points (paired s.e.; seeds' sample std).",
    _pair_rows(end_outcomes, pairs),
  )


def ablation_markdown(results: Mapping[str, Sequence[Mapping]]) -> str:
  """Table-1 markdown: one row per stage, cells
  "mean ± std" in percent (1 decimal)."""
  if not results:
    raise ValueError("ablation table: results is empty")
  header = (
    "| Stage | seeds | " + " | ".join(t for t, _ in K.TABLE1_COLUMNS) + " |"
  )
  lines = [header, "|" + "---|" * (2 + len(K.TABLE1_COLUMNS))]
  for stage, seeds in results.items():
    if not seeds:
      raise ValueError(f"ablation stage {stage!r}: no seed results")
    cells = []
    for _, key in K.TABLE1_COLUMNS:
      values = _seed_values(stage, seeds, key)
      if values is None:
        cells.append("—")
        continue
      mean, std = mean_and_sample_std(values)
      cells.append(
        f"{100 * mean:.1f}" + ("" if std is None else f" ± {100 * std:.1f}")
      )
    lines.append(f"| {stage} | {len(seeds)} | " + " | ".join(cells) + " |")
  lines += [
    "",
    "Values in percent: mean ± sample std (ddof=1) over seeds; no ± with one "
    "seed; — = not measured.",
  ]
  changes = change_markdown(results)
  return "\n".join(lines) + "\n" + (f"\n{changes}" if changes else "")


def judge_change_markdown(
  judge_evals: Mapping[str, Mapping[str, Mapping]],
) -> str:
  """Each stage's judge change measured by launch/judge_eval.py, in
  percent: start, end, change "mean (s.e.; seeds' std)" and the end +1
  vote rate; "" when no run has one.

  judge_evals[stage][seed]: the "all" table of that run's judge_eval.json
  (balanced_start/_end, change, stderr, positive_rate_end,
  label_positive_rate, num_steps, num_episodes). Over S seeds: the mean
  change and sqrt(sum_s e_s^2) / S, the s.e. of a mean of S independent
  changes. Every run must have judged the same steps (ValueError).
  """
  runs = [t for seeds in judge_evals.values() for t in seeds.values()]
  if not runs:
    return ""
  size = {(t["num_steps"], t["num_episodes"]) for t in runs}
  if len(size) != 1:
    raise ValueError(f"judge_eval runs judged different steps: {size}")
  ((steps, episodes),) = size
  lines = []
  for stage, seeds in judge_evals.items():
    if not seeds:
      continue
    t = list(seeds.values())
    start = mean_and_sample_std([x["balanced_start"] for x in t])[0]
    end = mean_and_sample_std([x["balanced_end"] for x in t])[0]
    change, std = mean_and_sample_std([x["change"] for x in t])
    se = math.sqrt(math.fsum(x["stderr"] ** 2 for x in t)) / len(t)
    rate = mean_and_sample_std([x["positive_rate_end"] for x in t])[0]
    spread = "" if std is None else f"; {100 * std:.1f}"
    lines.append(
      f"| {stage} | {len(t)} | {100 * start:.1f} | {100 * end:.1f} | "
      f"{100 * change:+.1f} ({100 * se:.1f}{spread}) | {100 * rate:.1f} |"
    )
  share = 100 * runs[0]["label_positive_rate"]
  return (
    "\n".join(
      [
        f"Judge balanced process accuracy on {steps} steps of {episodes} "
        "reference episodes (launch/judge_eval.py: the start and the final "
        "judge, the same steps and vote seeds), in percent: mean over seeds; "
        "change (paired cluster-bootstrap s.e. of that mean; seeds' sample "
        f"std); labels' +1 share {share:.1f}.",
        "",
        "| Stage | seeds | start | end | change | end +1 rate |",
        "|---|---|---|---|---|---|",
        *lines,
      ]
    )
    + "\n"
  )


def write_ablation_table(
  results: Mapping[str, Sequence[Mapping]],
  out_path: str,
  end_outcomes: Mapping | None = None,
  judge_evals: Mapping | None = None,
) -> str:
  """Writes ``ablation_markdown(results)`` and, with the stages' end
  outcomes, ``stage_difference_markdown`` and
  ``successive_difference_markdown``, ``counterpart_difference_markdown``
  and, with their judge_eval
  tables, ``judge_change_markdown`` to out_path; returns the text."""
  text = ablation_markdown(results)
  for extra in (
    stage_difference_markdown(end_outcomes or {}),
    successive_difference_markdown(end_outcomes or {}, TABLE1_STAGES),
    counterpart_difference_markdown(end_outcomes or {}),
    judge_change_markdown(judge_evals or {}),
  ):
    text += f"\n{extra}" if extra else ""
  with open(out_path, "w", encoding="utf-8") as f:
    f.write(text)
  return text
