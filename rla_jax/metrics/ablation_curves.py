"""Per-stage learning curves of an ablation: for every metric, each stage's
mean over its seeds with a min-max band, in one PNG (`plot_ablation_curves`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rla_jax.metrics import keys as K
from rla_jax.metrics.summary import (
  check_history,
  finish_panel,
  metric_series,
  save_figure,
)

ABLATION_CURVE_KEYS = (K.TRAIN_ROLLOUT_ACCURACY,) + tuple(
  k for _, k in K.TABLE1_COLUMNS
)


def common_curve(stage: str, key: str, runs: Sequence[Sequence[dict]]):
  """(steps, mean, min, max) over seeds at the steps
  every seed evaluated; None if no seed has the key."""
  series = [metric_series(run, key) for run in runs]
  if not any(values for _, values in series):
    return None
  common = sorted(set.intersection(*(set(steps) for steps, _ in series)))
  if not common:
    raise ValueError(
      f"ablation curves, stage {stage!r}: seeds share no step with a "
      f"value for {key!r}"
    )
  by_step = [dict(zip(steps, values, strict=True)) for steps, values in series]
  per_step = [[d[s] for d in by_step] for s in common]
  return (
    common,
    [math.fsum(v) / len(v) for v in per_step],
    [min(v) for v in per_step],
    [max(v) for v in per_step],
  )


def plot_ablation_curves(
  histories: Mapping[str, Sequence[Sequence[dict]]],
  png_path: str,
  *,
  keys: Sequence[str] = ABLATION_CURVE_KEYS,
) -> str:
  """PNG with one panel per key: per stage,
  the mean over seeds and a min-max band.

  histories maps stage -> one history (list of per-step dicts) per seed; curves
  use the steps at which every seed of the stage has a finite value. Returns
  png_path.
  """
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  if not histories:
    raise ValueError("plot_ablation_curves: histories is empty")
  for stage, runs in histories.items():
    if not runs:
      raise ValueError(
        f"plot_ablation_curves: stage {stage!r} has no seed histories"
      )
    for i, run in enumerate(runs):
      check_history(run, f"plot_ablation_curves stage {stage!r} seed {i}")
  ncols = min(3, len(keys))
  nrows = -(-len(keys) // ncols)
  fig = Figure(figsize=(5 * ncols, 4 * nrows))
  FigureCanvasAgg(fig)
  axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
  # The grid may have more panels than keys; the spare ones are hidden below.
  for ax, key in zip(axes, keys, strict=False):
    drawn = 0
    for color, (stage, runs) in enumerate(histories.items()):
      curve = common_curve(stage, key, runs)
      if curve is None:
        continue
      steps, mean, lo, hi = curve
      (line,) = ax.plot(
        steps, mean, color=f"C{color}", label=f"{stage} (n={len(runs)})"
      )
      ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.2)
      drawn += 1
    finish_panel(ax, key, drawn)
  for ax in axes[len(keys) :]:
    ax.set_visible(False)
  return save_figure(
    fig, "Ablation: mean over seeds, band = min..max", png_path
  )
