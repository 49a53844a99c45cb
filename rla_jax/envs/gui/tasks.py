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


@dataclasses.dataclass(frozen=True)
class OSWorldTask:
  """One OSWorld example (by id) with a step budget. Its rewrites keep the
  example and move the budget (harder: one step fewer; easier: two more):
  OSWorld's template variants (other evaluators, hints) need the pre-built
  example set the reference ships, which these machines do not have."""

  example_id: str
  max_steps: int
  seed: int = 0  # OSWorld examples are not seeded

  def __post_init__(self):
    if not MIN_STEPS <= self.max_steps <= MAX_STEPS:
      raise ValueError(
        f"OSWorld task max_steps {self.max_steps} not in "
        f"[{MIN_STEPS}, {MAX_STEPS}]"
      )

  @property
  def page(self) -> str:
    """The example id the environment resets to."""
    return self.example_id

  @property
  def task_id(self) -> str:
    return f"{self.example_id}/{self.max_steps}"

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> OSWorldTask:
    return cls(**d)


def propose_osworld_variant(
  task: OSWorldTask, direction: str
) -> OSWorldTask | None:
  """The step-budget rewrite of an OSWorld task (`OSWorldTask`); None at
  the budget's bounds."""
  if direction not in ("harder", "easier"):
    raise ValueError(
      f"direction must be 'harder' or 'easier', got {direction!r}"
    )
  steps = task.max_steps + (-1 if direction == "harder" else 2)
  if not MIN_STEPS <= steps <= MAX_STEPS:
    return None
  return dataclasses.replace(task, max_steps=steps)


def load_osworld_examples(directory: str) -> dict[str, dict[str, Any]]:
  """{example id: example config} of every OSWorld example JSON (an object
  with "id" and "instruction") under directory, recursively."""
  import json
  import pathlib

  root = pathlib.Path(directory)
  if not root.is_dir():
    raise ValueError(f"OSWorld examples directory {directory!r} not found")
  examples = {}
  for path in sorted(root.rglob("*.json")):
    try:
      d = json.loads(path.read_text())
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: malformed JSON: {e}") from None
    if isinstance(d, dict) and "id" in d and "instruction" in d:
      examples[str(d["id"])] = d
  if not examples:
    raise ValueError(f"no OSWorld example JSONs under {directory!r}")
  return examples
