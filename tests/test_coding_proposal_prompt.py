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
from rla_jax.rl.coding_env_model import CodingLLMEnvModel, ProposalRequest


class CharTokenizer:
  """One token per character; the chat template is the text itself."""

  def apply_chat_template(self, messages, **kw):
    return messages[0]["content"]

  def encode(self, text, add_special_tokens=False):
    return [ord(ch) % 256 for ch in text]


def _env_model(limit):
  """(an env model whose prompts may hold `limit` tokens, a task, its
  log lines)"""
  logs = []
  task = Task(
    task_id="t0", question="Print the sum of two ints.", tests=(("1 2", "3"),)
  )
  model = CodingLLMEnvModel(
    None,  # no sampler: prompt_ids samples nothing
    CharTokenizer(),
    None,
    attempts=1,
    max_prompt_len=limit,
    log=logs.append,
  )
  return model, task, logs


def _play(test_len=None):
  """A played group whose one generated test has a test_len-character
  input (None: no valid generated test)."""
  return types.SimpleNamespace(
    execution=types.SimpleNamespace(
      gt_pass=np.ones((2, 1), bool), gen_pass=np.ones((2, 1), bool)
    ),
    tests=[None if test_len is None else ("x" * test_len, "y")],
  )


def _ids(model, task, play):
  return model.prompt_ids(ProposalRequest(play, task, task, "harder", 0.9))


@pytest.fixture
def full_len():
  model, task, _ = _env_model(10**6)
  return len(_ids(model, task, _play(60))), len(_ids(model, task, _play()))


def test_prompt_with_generated_tests_when_it_fits(full_len):
  with_tests, _ = full_len
  model, task, logs = _env_model(with_tests)
  ids = _ids(model, task, _play(60))
  assert len(ids) == with_tests and "x" * 20 in "".join(map(chr, ids))
  assert model.counts == {"without_tests": 0, "too_long": 0}
  assert logs == []


def test_generated_tests_dropped_when_too_long(full_len):
  with_tests, without = full_len
  assert without < with_tests
  model, task, _ = _env_model(with_tests - 1)
  ids = _ids(model, task, _play(60))
  assert ids is not None and len(ids) == without
  assert "x" * 20 not in "".join(map(chr, ids))
  assert model.counts == {"without_tests": 1, "too_long": 0}


def test_no_proposal_and_a_log_line_when_nothing_fits(full_len):
  _, without = full_len
  model, task, logs = _env_model(without - 1)
  assert _ids(model, task, _play(60)) is None
  assert model.counts == {"without_tests": 0, "too_long": 1}
  assert len(logs) == 1 and "config.rollout.max_prompt_len" in logs[0]
