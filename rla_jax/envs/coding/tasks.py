"""The coding task record and the output-comparison rule.

A coding task is a problem statement plus stdin/stdout tests. The reference
(RLAnything coding setting, Gen-Verse/Open-AgentRL) keeps at most 8 tests per
task (``tests[:8]``) and compares outputs after whitespace-token normalisation;
both rules live here so every loader and every executor uses the same ones.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

MAX_TESTS_PER_TASK = 8
"""Tests kept per task, as in the reference (``tests[:8]``)."""

DEFAULT_TIME_LIMIT_S = 2.0
"""Per-test time limit of the reference training config (eval uses 6 s)."""


class TaskFormatError(ValueError):
  """A task record (dict, JSON line, proposal) does not have the required
  shape."""


@dataclasses.dataclass(frozen=True)
class Task:
  """One stdin/stdout programming task.

  Attributes:
    task_id: unique id inside a task pool.
    question: the problem statement shown to the policy.
    tests: ground-truth tests, a tuple of ``(stdin, expected_stdout)`` pairs.
    time_limit_s: per-test wall/CPU limit in seconds.
    difficulty: a number; higher is harder (family level, or a dataset label
      mapped to a number: easy=1, medium=2, hard=3; 0 when unknown).
    root_id: id of the original task this one descends from (itself for
      originals).
    parent_id: id of the task this one was derived from (None for originals).
    family_spec: for generated (offline family) tasks, a JSON string that lets
      ``offline_family.propose_variant`` rebuild harder/easier variants; ""
      otherwise.
  """

  task_id: str
  question: str
  tests: tuple[tuple[str, str], ...]
  time_limit_s: float = DEFAULT_TIME_LIMIT_S
  difficulty: float = 0.0
  root_id: str = ""
  parent_id: str | None = None
  family_spec: str = ""

  def __post_init__(self):
    if not isinstance(self.task_id, str) or not self.task_id:
      raise TaskFormatError(
        f"task_id must be a non-empty string, got {self.task_id!r}"
      )
    if not isinstance(self.question, str) or not self.question.strip():
      raise TaskFormatError(
        f"task {self.task_id!r}: question must be a non-empty string"
      )
    tests = tuple(tuple(t) for t in self.tests)
    if not tests:
      raise TaskFormatError(f"task {self.task_id!r}: needs at least one test")
    for i, t in enumerate(tests):
      if len(t) != 2 or not all(isinstance(x, str) for x in t):
        raise TaskFormatError(
          f"task {self.task_id!r}: test {i} must be a (stdin, stdout) pair of "
          f"strings, got {t!r}"
        )
    object.__setattr__(self, "tests", tests)
    if not (
      isinstance(self.time_limit_s, (int, float))
      and 0 < float(self.time_limit_s) <= 600
    ):
      raise TaskFormatError(
        f"task {self.task_id!r}: time_limit_s must be in (0, 600], got "
        f"{self.time_limit_s!r}"
      )
    object.__setattr__(self, "time_limit_s", float(self.time_limit_s))
    object.__setattr__(self, "difficulty", float(self.difficulty))
    if not self.root_id:
      object.__setattr__(self, "root_id", self.task_id)

  def to_dict(self) -> dict[str, Any]:
    """JSON-serialisable dict (tests become lists of two strings)."""
    d = dataclasses.asdict(self)
    d["tests"] = [list(t) for t in self.tests]
    return d

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> Task:
    """Inverse of ``to_dict``; unknown keys are an error (they indicate a wrong
    file)."""
    if not isinstance(d, Mapping):
      raise TaskFormatError(
        f"Task.from_dict needs a mapping, got {type(d).__name__}"
      )
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - known
    if unknown:
      raise TaskFormatError(f"Task.from_dict: unknown keys {sorted(unknown)}")
    missing = {"task_id", "question", "tests"} - set(d)
    if missing:
      raise TaskFormatError(f"Task.from_dict: missing keys {sorted(missing)}")
    return cls(**dict(d))

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> Task:
    return cls.from_dict(json.loads(text))


def cap_tests(
  tests: Sequence[tuple[str, str]], max_tests: int = MAX_TESTS_PER_TASK
) -> tuple[tuple[str, str], ...]:
  """Keep the first ``max_tests`` tests (reference: ``tests[:8]``)."""
  return tuple((str(a), str(b)) for a, b in list(tests)[:max_tests])


def normalise_output(text: str) -> str:
  """Whitespace-token normal form: ``" ".join(text.split())`` (reference
  comparison rule)."""
  return " ".join(text.split())


def outputs_match(actual: str, expected: str) -> bool:
  """True iff the two outputs are equal after whitespace-token normalisation."""
  return normalise_output(actual) == normalise_output(expected)


DIFFICULTY_LABELS = {"easy": 1.0, "medium": 2.0, "hard": 3.0}


def difficulty_from_label(label: Any) -> float:
  """Map a dataset difficulty label (easy/medium/hard or a number) to a float;
  unknown -> 0."""
  if isinstance(label, (int, float)) and not isinstance(label, bool):
    return float(label)
  if isinstance(label, str):
    return DIFFICULTY_LABELS.get(label.strip().lower(), 0.0)
  return 0.0
