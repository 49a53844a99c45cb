"""End-of-run report: start/end/best table (markdown) and learning curves (PNG).

A history is the list of per-step dicts of ``MetricsWriter.read_history``: each
has an int "step"; a metric may be absent from a step (eval keys appear only on
eval steps); None/NaN/inf values count as "not evaluated" at that step.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence

from rla_jax.metrics import keys as K

SUMMARY_MD = "summary.md"
LEARNING_CURVES_PNG = "learning_curves.png"

# (panel title, keys); the "losses" panel takes every key whose name
# contains "loss". A setting draws the keys it logs: ALFWorld's success and
# judge accuracies, the coding setting's code accuracy (with the program
# selected by the generated tests and a random pick) and UT / detect
# accuracy.
CURVE_PANELS = (
  (
    "Policy success / code accuracy",
    (
      K.TRAIN_ROLLOUT_ACCURACY,
      K.EVAL_ID_SUCCESS,
      K.EVAL_OOD_SUCCESS,
      K.EVAL_CODE,
      K.EVAL_SELECTED_CODE,
    ),
  ),
  (
    "Reward-model / unit-test accuracy",
    (
      K.EVAL_RM_PROCESS_ACCURACY,
      K.EVAL_RM_OUTCOME_ACCURACY,
      K.EVAL_UT,
      K.EVAL_DETECT,
    ),
  ),
  ("Accepted tasks (cumulative)", (K.ENV_ACCEPTED_TOTAL,)),
  ("Losses", None),
)


def check_history(history: Sequence[dict], where: str) -> None:
  """Raises ValueError unless history is a
  list of dicts with increasing int 'step'."""
  last = None
  for i, entry in enumerate(history):
    step = entry.get("step") if isinstance(entry, dict) else None
    if not isinstance(step, int) or isinstance(step, bool):
      raise ValueError(
        f"{where}: history[{i}] must be a dict with an int 'step', "
        f"got {entry!r:.200}"
      )
    if last is not None and step <= last:
      raise ValueError(
        f"{where}: history[{i}] step {step} does not increase (previous {last})"
      )
    last = step


def metric_series(
  history: Sequence[dict], key: str
) -> tuple[list[int], list[float]]:
  """(steps, values) of ``key`` at the steps where it has a finite value."""
  steps, values = [], []
  for entry in history:
    v = entry.get(key)
    if v is not None and not isinstance(v, numbers.Real):
      raise ValueError(
        f"metric {key!r} at step {entry['step']} is {v!r}; "
        "expected a real number or None"
      )
    if v is not None and math.isfinite(v):
      steps.append(entry["step"])
      values.append(v)
  return steps, values


def last_values(history: Sequence[dict]) -> dict[str, float]:
  """Each metric's last finite value (the
  per-seed "final metrics" of an ablation)."""
  check_history(history, "last_values")
  metric_keys = sorted(
    {k for entry in history for k in entry} - {"step", "time"}
  )
  out = {}
  for key in metric_keys:
    values = metric_series(history, key)[1]
    if values:
      out[key] = values[-1]
  return out


def logged_keys(history: Sequence[dict]) -> set[str]:
  """Every key any entry of the history logged."""
  return {k for entry in history for k in entry}


def summary_keys(
  history: Sequence[dict], expected: Sequence[str] = K.SUMMARY_KEYS
) -> list[str]:
  """The expected keys present in the history, then the other
  OPTIONAL_SUMMARY_KEYS present, then every train/* key, sorted."""
  present = logged_keys(history)
  train = sorted(k for k in present if k.startswith(K.TRAIN_PREFIX))
  first = list(expected) + [
    k for k in K.OPTIONAL_SUMMARY_KEYS if k not in expected
  ]
  return [k for k in first if k in present] + train


def _fmt(v: float) -> str:
  return str(v) if isinstance(v, int) else f"{v:.4g}"


def summary_markdown(
  history: Sequence[dict],
  *,
  title: str,
  expected: Sequence[str] = K.SUMMARY_KEYS,
) -> str:
  """Markdown table: per key, first / last
  / best evaluated value with their steps.

  best = min for loss keys (``keys.is_loss_key``), max otherwise;
  change = last - first. `expected` keys (the setting's: ALFWorld's
  SUMMARY_KEYS by default, keys.CODING_SUMMARY_KEYS) come first; those
  never logged are listed under the table.
  """
  check_history(history, "summary_markdown")
  lines = [f"# {title}", ""]
  if history:
    lines.append(
      f"Steps {history[0]['step']}..{history[-1]['step']} "
      f"({len(history)} logged)."
    )
  else:
    lines.append("Empty history: nothing was logged.")
  lines += [
    "",
    "| metric | start (step) | end (step) | best (step) | change | evals |",
    "|---|---|---|---|---|---|",
  ]
  for key in summary_keys(history, expected):
    steps, values = metric_series(history, key)
    if not values:
      lines.append(f"| {key} | n/a | n/a | n/a | n/a | 0 |")
      continue
    pick = min if K.is_loss_key(key) else max
    best = pick(range(len(values)), key=lambda i: values[i])
    lines.append(
      f"| {key} | {_fmt(values[0])} ({steps[0]}) | {_fmt(values[-1])} "
      f"({steps[-1]}) "
      f"| {_fmt(values[best])} ({steps[best]}, {pick.__name__}) "
      f"| {_fmt(values[-1] - values[0])} | {len(values)} |"
    )
  changes = paired_change_lines(history)
  if changes:
    lines += [
      "",
      "Changes paired against the start evaluation (run i plays the same "
      "game, or samples for the same prompt, with the same sampling seed "
      "at both ends):",
      "",
      *[f"- {line}" for line in changes],
    ]
  present = logged_keys(history)
  missing = [k for k in expected if k not in present]
  if missing:
    lines += ["", "Not logged: " + ", ".join(missing) + "."]
  return "\n".join(lines) + "\n"


def paired_change_lines(history: Sequence[dict]) -> list[str]:
  """One line per eval metric with a logged paired change (an ALFWorld
  split's success, coding's code and ut), from the last step logging it,
  e.g.
    "in_distribution_success 0.312 -> 0.375 (+0.062 +- 0.021 paired s.e.,
    256 runs)"
  start = the logged change_start where there is one (the start
  evaluation's mean over the paired runs, where that is not the metric's
  value, e.g. coding's UT without references), else end - change (the
  start evaluation's mean over the same runs); end = start + change; the
  s.e. is "n/a" where it was not finite (a single run).
  """
  check_history(history, "paired_change_lines")
  lines = []
  for metric in K.change_metrics(logged_keys(history)):
    k = K.keys_of_change(metric)
    steps, _ = metric_series(history, k.change)
    if not steps:
      continue
    row = next(e for e in reversed(history) if e["step"] == steps[-1])
    change = row[k.change]
    start = row.get(k.change_start)
    start = row[k.success] - change if start is None else start
    se = row.get(k.change_stderr)
    se = f"{se:.3f}" if se is not None and math.isfinite(se) else "n/a"
    lines.append(
      f"{metric} {start:.3f} -> {start + change:.3f} "
      f"({change:+.3f} +- {se} paired s.e., {row[k.runs]} runs)"
    )
  return lines


def _loss_keys(history: Sequence[dict]) -> list[str]:
  return sorted({k for entry in history for k in entry if K.is_loss_key(k)})


def plot_learning_curves(
  history: Sequence[dict], png_path: str, *, title: str
) -> str:
  """2x2 PNG: policy success (or code accuracy), reward-model (or
  unit-test) accuracies, accepted tasks, losses. Returns png_path.

  Each key is drawn at the steps where it has a finite value (markers for sparse
  eval keys); a panel without data says so.
  """
  # Figure + Agg canvas directly: no pyplot global state, no display needed.
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  check_history(history, "plot_learning_curves")
  fig = Figure(figsize=(12, 8))
  FigureCanvasAgg(fig)
  axes = fig.subplots(2, 2).ravel()
  for ax, (panel, panel_keys) in zip(axes, CURVE_PANELS, strict=True):
    panel_keys = _loss_keys(history) if panel_keys is None else panel_keys
    drawn = 0
    for key in panel_keys:
      steps, values = metric_series(history, key)
      if values:
        sparse = len(steps) < len(history)
        ax.plot(
          steps, values, marker="o" if sparse else None, markersize=3, label=key
        )
        drawn += 1
    finish_panel(ax, panel, drawn)
  return save_figure(fig, title, png_path)


def finish_panel(ax, title: str, drawn: int) -> None:
  """Title, step axis, grid, and a legend (or "no data") for one panel."""
  ax.set_title(title)
  ax.set_xlabel("step")
  ax.grid(alpha=0.3)
  if drawn:
    ax.legend(fontsize=8)
  else:
    ax.text(
      0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes
    )


def save_figure(fig, title: str, png_path: str) -> str:
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(png_path, dpi=100)
  return png_path


def write_summary(
  history: Sequence[dict],
  out_dir: str,
  *,
  title: str,
  expected: Sequence[str] = K.SUMMARY_KEYS,
) -> tuple[str, str]:
  """Writes out_dir/summary.md and
  out_dir/learning_curves.png; returns their paths.

  The markdown text (for the terminal) is ``summary_markdown(history,
  title=title)`` and equals the file's content.
  """
  os.makedirs(out_dir, exist_ok=True)
  md_path = os.path.join(out_dir, SUMMARY_MD)
  with open(md_path, "w", encoding="utf-8") as f:
    f.write(summary_markdown(history, title=title, expected=expected))
  png_path = plot_learning_curves(
    history, os.path.join(out_dir, LEARNING_CURVES_PNG), title=title
  )
  return md_path, png_path
