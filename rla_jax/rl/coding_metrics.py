"""Phase 8 of a coding RL step (`rla_jax.rl.coding_loop`): the step's
metrics, read from the records the earlier phases pass on."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rla_jax.envs.coding import coding_metrics
from rla_jax.rl.phases import adaptation_metrics

if TYPE_CHECKING:
  from rla_jax.rl.adaptation import TaskPool
  from rla_jax.rl.coding_rollout import TaskRollout
  from rla_jax.rl.phases import StepRollouts, StepSamples


def step_metrics(
  played: list[TaskRollout],
  rolled: StepRollouts,
  samples: StepSamples,
  pool: TaskPool,
  proposed: int,
  proposal_prompt_counts: dict[str, int],
) -> dict:
  """Code / UT / Detect and rollout metrics over the active tasks' rollouts
  played [G], sample counts, the task pool's counters and the LLM env
  model's prompt counts this step (env/proposal_prompts_*)."""
  active = [played[i] for i in rolled.active_indices()]
  m = coding_metrics(
    [r.execution.gt_pass for r in active],
    [r.execution.gen_pass for r in active],
    [r.execution.valid_tests for r in active],
  )
  metrics = {f"train/{k}": v for k, v in m.items()}
  metrics.update(
    {
      "train/rollout_accuracy": float(
        np.mean([rolled.accuracies[i] for i in rolled.active_indices()])
      ),
      "train/policy_samples": len(samples.policy),
      "train/rm_samples": len(samples.reward),
      "train/valid_program_rate": float(
        np.mean([p is not None for r in active for p in r.programs])
      ),
      "train/valid_test_rate": float(
        np.mean([u is not None for r in active for u in r.tests] or [0.0])
      ),
      **adaptation_metrics(pool, proposed),
      **{
        f"env/proposal_prompts_{k}": v
        for k, v in proposal_prompt_counts.items()
      },
    }
  )
  return metrics
