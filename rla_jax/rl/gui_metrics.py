"""The metrics of a GUI RL step (phase 8 of `rla_jax.rl.gui_loop`) and of
an evaluation, read from the phases' records."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
  from rla_jax.rl.gui_rollout import GuiEpisode
  from rla_jax.rl.phases import StepJudgements, StepRollouts


def _valid_action_rate(episodes) -> float:
  return float(np.mean([v for e in episodes for v in e.valid_actions] or [0]))


def step_metrics(
  episodes: list[GuiEpisode], judged: StepJudgements, rolled: StepRollouts
) -> dict:
  """Rollout metrics over the active tasks' episodes (none when every
  group was a candidate), and the judge's +1 and unparseable vote rates
  on the judged steps."""
  active = [
    episodes[r] for i in rolled.active_indices() for r in rolled.rows[i]
  ]
  out = {}
  if active:
    out["train/rollout_accuracy"] = float(np.mean([e.won for e in active]))
    out["train/mean_episode_steps"] = float(
      np.mean([e.num_steps for e in active])
    )
    out["train/valid_action_rate"] = _valid_action_rate(active)
  scores, mask = judged.scores, judged.mask
  if judged.judgements is not None and mask.any():
    out["train/judge_positive_rate"] = float((scores[mask] > 0).mean())
    out["train/judge_unparseable_rate"] = float((scores[mask] == 0).mean())
  return out


def evaluation_metrics(episodes: list[GuiEpisode]) -> dict:
  """Success, valid-action rate and mean length of evaluation episodes."""
  return {
    "eval/success": float(np.mean([e.won for e in episodes])),
    "eval/valid_action_rate": _valid_action_rate(episodes),
    "eval/mean_episode_steps": float(np.mean([e.num_steps for e in episodes])),
  }
