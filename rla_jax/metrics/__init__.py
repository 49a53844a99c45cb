"""Metrics and reporting: per-step writer
(TensorBoard + JSONL + terminal) and reports."""

from rla_jax.metrics.ablation import (
  mean_and_sample_std,
  rl_step_seconds,
  write_ablation_table,
)
from rla_jax.metrics.ablation_curves import plot_ablation_curves
from rla_jax.metrics.summary import (
  last_values,
  paired_change_lines,
  summary_markdown,
  write_summary,
)
from rla_jax.metrics.writer import MetricsWriter

__all__ = [
  "MetricsWriter",
  "write_summary",
  "summary_markdown",
  "paired_change_lines",
  "last_values",
  "write_ablation_table",
  "plot_ablation_curves",
  "rl_step_seconds",
  "mean_and_sample_std",
]
