"""GUI tasks and their rule-based adaptation (MiniWoB++).

A task is one seeded instance of a MiniWoB++ page with a step budget; its
rollouts replay the same instance, so a task's accuracy is the policy's
success rate on it. Task families order pages of one kind by difficulty
(e.g. click-test < click-test-2 < click-button < click-button-sequence).
Adaptation rewrites a task within its family, as the paper rewrites an
OSWorld task within its template: harder = the next page of the family on
the same seed, or (at the top) one step fewer; easier = the previous page,
or (at the bottom) two steps more. Candidates are accepted by the shared
acceptance rule (`rla_jax.rl.adaptation`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Family -> MiniWoB++ pages, easiest first.
FAMILIES: dict[str, tuple[str, ...]] = {
  "click": (
    "click-test",
    "click-test-2",
    "click-button",
    "click-button-sequence",
  ),
  "text": ("focus-text", "focus-text-2", "enter-text", "enter-text-2"),
  "tab": (
    "click-tab",
    "click-tab-2-easy",
    "click-tab-2-medium",
    "click-tab-2-hard",
  ),
  "dialog": ("click-dialog", "click-dialog-2"),
  "checkbox": ("click-checkboxes", "click-checkboxes-large"),
}
MIN_STEPS, MAX_STEPS = 1, 30


@dataclasses.dataclass(frozen=True)
class GuiTask:
  """One task: family page `level` (an index into FAMILIES[family]) on
  instance `seed`, ended as a failure after `max_steps` actions."""

  family: str
  level: int
  seed: int
  max_steps: int

  def __post_init__(self):
    if self.family not in FAMILIES:
      raise ValueError(
        f"GUI task family {self.family!r} is not one of {sorted(FAMILIES)}"
      )
    top = len(FAMILIES[self.family]) - 1
    if not 0 <= self.level <= top:
      raise ValueError(
        f"GUI task level {self.level} outside 0..{top} of family "
        f"{self.family!r}"
      )
    if not MIN_STEPS <= self.max_steps <= MAX_STEPS:
      raise ValueError(
        f"GUI task max_steps {self.max_steps} not in [{MIN_STEPS}, {MAX_STEPS}]"
      )

  @property
  def page(self) -> str:
    """The MiniWoB++ task name."""
    return FAMILIES[self.family][self.level]

  @property
  def task_id(self) -> str:
    return f"{self.page}@{self.seed}/{self.max_steps}"

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> GuiTask:
    return cls(**d)


def propose_gui_variant(task: GuiTask, direction: str) -> GuiTask | None:
  """A harder or easier rewrite of `task` within its family (module
  docstring); None when no rewrite is left (the step budget at its bound).
  """
  top = len(FAMILIES[task.family]) - 1
  if direction == "harder":
    if task.level < top:
      return dataclasses.replace(task, level=task.level + 1)
    steps = task.max_steps - 1
  elif direction == "easier":
    if task.level > 0:
      return dataclasses.replace(task, level=task.level - 1)
    steps = task.max_steps + 2
  else:
    raise ValueError(
      f"direction must be 'harder' or 'easier', got {direction!r}"
    )
  if not MIN_STEPS <= steps <= MAX_STEPS:
    return None
  return dataclasses.replace(task, max_steps=steps)


def gui_task_set(
  families: tuple[str, ...],
  levels: tuple[int, ...],
  num_tasks: int,
  seed: int,
  max_steps: int,
) -> list[GuiTask]:
  """num_tasks tasks cycling over (family, level) pairs (levels beyond a
  family's top are skipped), instance seeds seed, seed + 1, ..."""
  pairs = [(f, lv) for f in families for lv in levels if lv < len(FAMILIES[f])]
  if not pairs:
    raise ValueError(f"no GUI tasks for families {families} at levels {levels}")
  return [
    GuiTask(*pairs[i % len(pairs)], seed=seed + i, max_steps=max_steps)
    for i in range(num_tasks)
  ]
