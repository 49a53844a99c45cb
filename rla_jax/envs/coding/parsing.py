"""Parsing of model outputs in the coding setting. Nothing here raises on model
text: anything unparseable returns None (an invalid sample, rewarded as such
downstream)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from rla_jax.envs.coding.tasks import MAX_TESTS_PER_TASK, Task, TaskFormatError

_PY_BLOCK = re.compile(
  r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE
)
_FENCE = r"```[^\n`]*\r?\n(.*?)```"
_TEST_PAIR = re.compile(
  r"\*{0,2}\s*Test\s+Input\s*:?\s*\*{0,2}\s*:?\s*"
  + _FENCE
  + r"\s*\*{0,2}\s*Test\s+Output\s*:?\s*\*{0,2}\s*:?\s*"
  + _FENCE,
  re.DOTALL | re.IGNORECASE,
)
MIN_PROPOSAL_TESTS = 4


def extract_code(text: Any) -> str | None:
  """The last closed ```python (or ```py / ```python3) block of ``text``;
  None if there is none or it is blank."""
  if not isinstance(text, str):
    return None
  blocks = _PY_BLOCK.findall(text)
  if not blocks:
    return None
  code = blocks[-1].strip("\n")
  return code + "\n" if code.strip() else None


def _block_text(block: str) -> str:
  text = block.strip("\r\n")
  if (
    "\n" not in text and "\\n" in text
  ):  # the test written on one line with literal "\n"
    text = text.replace("\\n", "\n")
  return text


def parse_generated_test(text: Any) -> tuple[str, str] | None:
  """(stdin, expected_stdout) from the last **Test Input:** / **Test Output:**
  fenced pair.

  Returns None when no pair is found or either side is blank (the reference's
  "Invalid Test"). stdin is given a trailing newline so the last input() line is
  terminated.
  """
  if not isinstance(text, str):
    return None
  pairs = _TEST_PAIR.findall(text)
  if not pairs:
    return None
  stdin, stdout = (_block_text(b) for b in pairs[-1])
  if not stdin.strip() or not stdout.strip():
    return None
  return stdin + "\n", stdout + "\n"


def _json_objects(text: str) -> list[Any]:
  """All JSON values that decode starting at a '{' (fenced ```json blocks
  included)."""
  decoder = json.JSONDecoder()
  found = []
  pos = text.find("{")
  while pos != -1:
    try:
      obj, end = decoder.raw_decode(text, pos)
      found.append(obj)
      pos = text.find("{", end)
    except ValueError:
      pos = text.find("{", pos + 1)
  return found


def _as_test_strings(values: Any) -> list[str] | None:
  if not isinstance(values, list):
    return None
  out = []
  for v in values:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
      return None
    s = str(v)
    if not s.strip():
      return None
    out.append(s if s.endswith("\n") else s + "\n")
  return out


def task_from_proposal(obj: Any, parent: Task) -> Task | None:
  """Validate one decoded proposal {question, test_input[], test_output[],
  test_time_limit?}.

  Needs a non-blank question and >= 4 equal-length, non-blank test lists; keeps
  the first 8 tests. The new task descends from ``parent`` (parent_id) and keeps
  its root_id.
  """
  if not isinstance(obj, dict):
    return None
  question = obj.get("question")
  inputs, outputs = (
    _as_test_strings(obj.get("test_input")),
    _as_test_strings(obj.get("test_output")),
  )
  if (
    not isinstance(question, str)
    or not question.strip()
    or inputs is None
    or outputs is None
  ):
    return None
  if len(inputs) != len(outputs) or len(inputs) < MIN_PROPOSAL_TESTS:
    return None
  limit = obj.get("test_time_limit", parent.time_limit_s)
  if (
    isinstance(limit, bool)
    or not isinstance(limit, (int, float))
    or not 0 < limit <= 60
  ):
    limit = parent.time_limit_s
  tests = tuple(zip(inputs, outputs, strict=True))[:MAX_TESTS_PER_TASK]
  digest = hashlib.sha1(
    json.dumps([question, tests], ensure_ascii=False).encode()
  ).hexdigest()[:12]
  try:
    return Task(
      task_id=f"{parent.root_id}~{digest}",
      question=question.strip(),
      tests=tests,
      time_limit_s=float(limit),
      difficulty=parent.difficulty,
      root_id=parent.root_id,
      parent_id=parent.task_id,
    )
  except TaskFormatError:
    return None


def parse_task_proposal(text: Any, parent: Task) -> Task | None:
  """The environment model's proposal as a Task: the last valid JSON object in
  ``text``, else None."""
  if not isinstance(text, str):
    return None
  for obj in reversed(_json_objects(text)):
    task = task_from_proposal(obj, parent)
    if task is not None:
      return task
  return None
