"""Coding environment of RLAnything: tasks, datasets, sandboxed execution,
parsing, rewards, prompts.

Public API used by the RL loop:
- ``Task`` (frozen; ``to_dict`` / ``from_dict`` for checkpointing the task pool)
- ``generate_offline_tasks``, ``offline_train_eval_split``, ``propose_variant``
  (offline family)
- ``load_jsonl_tasks`` (CURE / CodeContests / LiveCodeBench / LiveBench JSONL)
- ``SandboxExecutor`` (``run`` -> ``ResultMatrix`` [P, T]; ``execute`` over
  (program, stdin) pairs)
- ``extract_code``, ``parse_generated_test``, ``parse_task_proposal``
- ``code_rewards``, ``unit_test_rewards``, ``accuracy``, ``coding_metrics``
  (the accuracy band is ``rla_jax.rl.advantages.accuracy_in_band``)
- ``render_policy_prompt``, ``render_unit_test_prompt``,
  ``render_task_proposal_prompt``
The TFDS builder lives in ``rla_jax.envs.coding.tfds_builder`` (imports
tensorflow_datasets).
"""

from rla_jax.envs.coding.datasets import (
  DatasetFormatError,
  LoadReport,
  load_jsonl_tasks,
)
from rla_jax.envs.coding.offline_family import (
  generate_offline_tasks,
  offline_train_eval_split,
  propose_variant,
)
from rla_jax.envs.coding.parsing import (
  extract_code,
  parse_generated_test,
  parse_task_proposal,
)
from rla_jax.envs.coding.prompts import (
  render_policy_prompt,
  render_task_proposal_prompt,
  render_unit_test_prompt,
)
from rla_jax.envs.coding.rewards import (
  accuracy,
  code_rewards,
  coding_metrics,
  filter_by_accuracy_band,
  gt_code_mask,
  unit_test_rewards,
)
from rla_jax.envs.coding.sandbox import SandboxExecutor, SandboxLimits
from rla_jax.envs.coding.sandbox_outcomes import ExecutionOutcome, ResultMatrix
from rla_jax.envs.coding.tasks import (
  MAX_TESTS_PER_TASK,
  Task,
  TaskFormatError,
  outputs_match,
)

__all__ = [
  "DatasetFormatError",
  "LoadReport",
  "load_jsonl_tasks",
  "generate_offline_tasks",
  "offline_train_eval_split",
  "propose_variant",
  "extract_code",
  "parse_generated_test",
  "parse_task_proposal",
  "render_policy_prompt",
  "render_task_proposal_prompt",
  "render_unit_test_prompt",
  "accuracy",
  "code_rewards",
  "coding_metrics",
  "filter_by_accuracy_band",
  "gt_code_mask",
  "unit_test_rewards",
  "ExecutionOutcome",
  "ResultMatrix",
  "SandboxExecutor",
  "SandboxLimits",
  "MAX_TESTS_PER_TASK",
  "Task",
  "TaskFormatError",
  "outputs_match",
]
