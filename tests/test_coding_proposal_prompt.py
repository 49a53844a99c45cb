"""The coding env model's proposal prompt stays within max_prompt_len.

Generated tests (model text of any length) are dropped from the prompt
when it would not fit, and a prompt that does not fit even then yields no
proposal; both are counted and logged.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from rla_jax.envs.coding.tasks import Task
from rla_jax.rl.coding_loop import CodingLoop


class CharTokenizer:
  """One token per character; the chat template is the text itself."""

  def apply_chat_template(self, messages, **kw):
    return messages[0]["content"]

  def encode(self, text, add_special_tokens=False):
    return [ord(ch) % 256 for ch in text]


def _fake_loop(limit):
  logs = []
  task = Task(
    task_id="t0", question="Print the sum of two ints.", tests=(("1 2", "3"),)
  )
  loop = types.SimpleNamespace(
    registry={"t0": task},
    config=types.SimpleNamespace(
      rollout=types.SimpleNamespace(max_prompt_len=limit)
    ),
    tokenizer=CharTokenizer(),
    log=logs.append,
    proposal_prompt_counts={"without_tests": 0, "too_long": 0},
  )
  return loop, task, logs


def _play(test_len=None):
  """A played group whose one generated test has a test_len-character
  input (None: no valid generated test)."""
  return types.SimpleNamespace(
    execution=types.SimpleNamespace(
      gt_pass=np.ones((2, 1), bool), gen_pass=np.ones((2, 1), bool)
    ),
    tests=[None if test_len is None else ("x" * test_len, "y")],
  )


def _ids(loop, task, play):
  rolled = types.SimpleNamespace(accuracies=[0.9])
  return CodingLoop._proposal_prompt_ids(loop, play, task, "harder", rolled, 0)


@pytest.fixture
def full_len():
  loop, task, _ = _fake_loop(10**6)
  return len(_ids(loop, task, _play(60))), len(_ids(loop, task, _play()))


def test_prompt_with_generated_tests_when_it_fits(full_len):
  with_tests, _ = full_len
  loop, task, logs = _fake_loop(with_tests)
  ids = _ids(loop, task, _play(60))
  assert len(ids) == with_tests and "x" * 20 in "".join(map(chr, ids))
  assert loop.proposal_prompt_counts == {"without_tests": 0, "too_long": 0}
  assert logs == []


def test_generated_tests_dropped_when_too_long(full_len):
  with_tests, without = full_len
  assert without < with_tests
  loop, task, _ = _fake_loop(with_tests - 1)
  ids = _ids(loop, task, _play(60))
  assert ids is not None and len(ids) == without
  assert "x" * 20 not in "".join(map(chr, ids))
  assert loop.proposal_prompt_counts == {"without_tests": 1, "too_long": 0}


def test_no_proposal_and_a_log_line_when_nothing_fits(full_len):
  _, without = full_len
  loop, task, logs = _fake_loop(without - 1)
  assert _ids(loop, task, _play(60)) is None
  assert loop.proposal_prompt_counts == {"without_tests": 0, "too_long": 1}
  assert len(logs) == 1 and "config.rollout.max_prompt_len" in logs[0]
