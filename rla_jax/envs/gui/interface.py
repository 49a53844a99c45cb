"""The batched GUI environment protocol shared by the MiniWoB++ and OSWorld
backends.

A backend holds N environments (slots). ``reset`` starts one task instance
per slot, ``step`` applies one action per slot and returns one observation
per slot, always in slot order; ``close`` releases the browsers or VMs.
Actions are what ``rla_jax.envs.gui.action_parser.parse_action`` returns: a
``GuiAction`` (pixel coordinates on that slot's screenshot), an
``InvalidAction`` (nothing is executed; the step is recorded in ``info``) or
None (nothing is executed, e.g. a slot that is already done).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from rla_jax.envs.gui.actions import GuiAction, InvalidAction

StepAction = GuiAction | InvalidAction | None


@dataclasses.dataclass(frozen=True)
class GuiObservation:
  """What one environment slot shows after a reset or a step.

  Attributes:
    screenshot: uint8 [H, W, 3] RGB screenshot, H and W fixed per backend.
    instruction: The task's natural-language goal.
    done: True once the episode has ended (success, failure or time-out).
    success: True iff the episode ended successfully.
    reward: The task reward of this step (0.0 until the episode ends).
    info: Backend details (task id, seed, step count, raw rewards, the
      executed command, an invalid action's reason...).
  """

  screenshot: np.ndarray
  instruction: str
  done: bool
  success: bool
  reward: float
  info: dict[str, Any] = dataclasses.field(default_factory=dict)


class GuiEnvironment(Protocol):
  """A batch of GUI environments (see the module docstring)."""

  @property
  def num_envs(self) -> int:
    """N, the number of slots."""
    ...

  def reset(
    self, task_ids: Sequence[str], seeds: Sequence[int]
  ) -> list[GuiObservation]:
    """Starts task ``task_ids[i]`` with seed ``seeds[i]`` in slot i.

    Args:
      task_ids: N task ids (a MiniWoB++ task name, an OSWorld example id).
      seeds: N ints; the same (task id, seed) gives the same instance.

    Returns:
      N first observations.
    """
    ...

  def step(self, actions: Sequence[StepAction]) -> list[GuiObservation]:
    """Applies ``actions[i]`` in slot i.

    Args:
      actions: N actions (GuiAction, InvalidAction or None).

    Returns:
      N observations after the actions.
    """
    ...

  def close(self) -> None:
    """Releases every slot's browser or VM; idempotent."""
    ...


def check_batch(name: str, values: Sequence[Any], num_envs: int) -> None:
  """Raises ValueError unless ``values`` has one entry per slot.

  Args:
    name: The argument's name, for the message.
    values: The per-slot sequence.
    num_envs: N, the backend's slot count.
  """
  if len(values) != num_envs:
    raise ValueError(f"{name} has {len(values)} entries; expected {num_envs}")
