"""Phase 7 of a GUI RL step (`rla_jax.rl.gui_loop`): rewrites of the tasks
outside the adaptation band within their family, each proposed with its
critic summary (what the judge saw; the reference leaves it empty), which
is appended to workdir/critic_summaries.jsonl."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING

import numpy as np

from rla_jax.envs.gui.tasks import (
  OSWorldTask,
  propose_gui_variant,
  propose_osworld_variant,
)
from rla_jax.rl.phases import adapt_tasks

if TYPE_CHECKING:
  from rla_jax.rl.adaptation import TaskPool
  from rla_jax.rl.gui_rollout import GuiEpisode
  from rla_jax.rl.phases import Resolution, StepRollouts


def critic_summary(episodes: list[GuiEpisode], scores: np.ndarray) -> str:
  """A task's critic feedback from its rollouts and the judge's votes
  scores [N, K, m]: success rate, valid-action rate, the share of steps
  judged as progress, and the steps judged worst."""
  steps = [(n, k) for n, e in enumerate(episodes) for k in range(e.num_steps)]
  if not steps:
    return "no steps"
  mean = {(n, k): float(scores[n, k].mean()) for n, k in steps}
  worst = sorted(steps, key=lambda nk: mean[nk])[:2]
  valid = np.mean([v for e in episodes for v in e.valid_actions])
  lines = [
    f"success {np.mean([e.won for e in episodes]):.2f} over "
    f"{len(episodes)} rollouts; valid actions {valid:.2f}; steps judged "
    f"as progress {np.mean([mean[s] > 0 for s in steps]):.2f}",
  ]
  for n, k in worst:
    a = episodes[n].actions[k]
    what = a.summary() if hasattr(a, "summary") else f"invalid: {a.reason}"
    lines.append(f"rollout {n} step {k + 1} ({what[:60]}): {mean[n, k]:+.2f}")
  return "\n".join(lines)


def propose_variant(task, direction: str):
  """The family rewrite of a MiniWoB++ or OSWorld task ('harder' or
  'easier'), or None where the family has none."""
  if isinstance(task, OSWorldTask):
    return propose_osworld_variant(task, direction)
  return propose_gui_variant(task, direction)


@dataclasses.dataclass(frozen=True)
class CriticLog:
  """critic_summaries.jsonl in a run's workdir (written by the primary
  process only): one JSON record per proposal."""

  workdir: str
  enabled: bool

  def write(self, step: int, task, direction: str, variant, summary: str):
    """Appends {step, task, direction, variant (None: no rewrite),
    critic_summary}."""
    if not self.enabled:
      return
    record = {
      "step": step,
      "task": task.task_id,
      "direction": direction,
      "variant": None if variant is None else variant.task_id,
      "critic_summary": summary,
    }
    path = os.path.join(self.workdir, "critic_summaries.jsonl")
    with open(path, "a") as f:
      f.write(json.dumps(record) + "\n")


def adapt_gui_tasks(
  pool: TaskPool,
  registry: dict,
  episodes: list[GuiEpisode],
  scores: np.ndarray,
  rolled: StepRollouts,
  resolution: Resolution,
  step: int,
  critic_log: CriticLog,
) -> int:
  """Phase 7: a harder / easier family rewrite (acc <= low -> easier, the
  ALFWorld/GUI rule) for each slot outside the band, each logged with its
  critic summary from its group's episodes and votes scores [E, K, m];
  returns the number proposed (`phases.adapt_tasks`)."""

  def propose(i: int, direction: str):
    task = registry[rolled.groups[i].task_id]
    variant = propose_variant(task, direction)
    rows = rolled.rows[i]
    summary = critic_summary([episodes[r] for r in rows], scores[rows])
    critic_log.write(step, task, direction, variant, summary)
    return variant

  return adapt_tasks(
    pool,
    registry,
    rolled,
    resolution,
    propose,
    variant_id=lambda task: task.task_id,
    low_inclusive=True,
  )
