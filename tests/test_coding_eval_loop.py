"""CodingLoop.evaluate with scripted samplers and the real sandbox: the
same sampling seeds at every evaluation, selection and reference-judged
UT metrics, and changes paired against the start evaluation's per-run
outcomes, kept through the checkpoint's JSON state."""

from __future__ import annotations

import json
import math
import types

import numpy as np
import pytest

from configs import coding
from rla_jax.envs.coding import SandboxExecutor
from rla_jax.envs.coding.tasks import Task
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.coding_loop import CodingLoop

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
ZERO = "print(0)\n"
TASKS = [
  Task(task_id="e0", question="Print a + b.", tests=(("1 2\n", "3\n"),)),
  Task(task_id="e1", question="Print a + b.", tests=(("5 5\n", "10\n"),)),
]
GOOD_TEST = "**Test Input:**\n```\n2 2\n```\n**Test Output:**\n```\n4\n```\n"
BAD_TEST = "**Test Input:**\n```\n2 2\n```\n**Test Output:**\n```\n5\n```\n"


class TextTokenizer:
  """Prompts: one id per character; a response token id indexes `texts`."""

  def __init__(self):
    self.texts = []

  def apply_chat_template(self, messages, **kw):
    return messages[0]["content"]

  def encode(self, text, add_special_tokens=False):
    return [ord(ch) % 256 for ch in text]

  def decode(self, ids, skip_special_tokens=True):
    return self.texts[ids[0]]


class ScriptedSampler:
  """Row i * num_samples + j answers script[i][j]; records every seed."""

  def __init__(self, tokenizer, script):
    self.tokenizer, self.script, self.seeds = tokenizer, script, []

  def generate(self, prompt_ids, *, seed, num_samples, **sampling):
    self.seeds.append(seed)
    tokens = []
    for i in range(len(prompt_ids)):
      for j in range(num_samples):
        self.tokenizer.texts.append(self.script[i][j])
        tokens.append([len(self.tokenizer.texts) - 1])
    return types.SimpleNamespace(
      tokens=tokens, logprobs=[np.zeros(1)] * len(tokens)
    )


@pytest.fixture
def loop():
  """A CodingLoop with 2 eval tasks, 3 programs and 2 tests per task,
  scripted samplers and a real sandbox (no models built)."""
  c = coding.get_config("smoke")
  c.eval.update(
    num_tasks=2,
    programs_per_task=3,
    tests_per_task=2,
    greedy=False,
    temperature=1.0,
  )
  loop = object.__new__(CodingLoop)
  tokenizer = TextTokenizer()
  loop.config, loop.tokenizer, loop.logged = c, tokenizer, []
  loop.log = loop.logged.append
  loop.eval_tasks = TASKS
  loop.pool, loop.registry = TaskPool(["t0"]), {}
  loop.eval_start, loop.eval_rule_logged = None, False
  loop.reference_program = None
  loop.samplers = {
    "policy": ScriptedSampler(tokenizer, None),
    "reward": ScriptedSampler(tokenizer, [[GOOD_TEST, BAD_TEST]] * 2),
  }
  loop.executor = SandboxExecutor(max_workers=1)
  yield loop
  loop.executor.close()


def _programs(rows):
  return [[f"```python\n{p}```" for p in row] for row in rows]


def test_eval_seeds_do_not_depend_on_the_step(loop):
  loop.policy_sampler.script = _programs([[SUM, ZERO, ZERO]] * 2)
  loop.evaluate(-1)
  loop.evaluate(7)
  for sampler in (loop.policy_sampler, loop.reward_sampler):
    first, later = sampler.seeds
    assert first == later


def test_eval_selection_reference_rule_and_paired_changes(loop):
  # start: task 0 has one correct program of 3, task 1 none
  loop.policy_sampler.script = _programs([[ZERO, SUM, ZERO], [ZERO] * 3])
  start = loop.evaluate(-1)
  # by correct programs: task 0's good test passes its correct program,
  # the bad one does not; task 1 has no correct program (out of ut)
  assert start["eval/code"] == pytest.approx(1 / 6)
  assert start["eval/ut"] == 0.5
  # task 0: the good test selects the correct program; task 1: nothing
  assert start["eval/selected_code"] == pytest.approx(0.5)
  assert start["eval/random_code"] == pytest.approx(1 / 6)
  assert start["eval/selection_gain"] == pytest.approx(1 / 3)
  assert (start["eval/code_runs"], start["eval/ut_runs"]) == (6, 4)
  assert "eval/code_change" not in start
  assert loop.eval_start.won == {"code": [0, 1, 0, 0, 0, 0], "ut": [1, 0, 0, 0]}
  assert "passing every correct sampled program" in loop.logged[0]

  # the checkpoint's JSON state keeps the start outcomes
  state = json.loads(json.dumps(loop.task_state()))
  kept, loop.eval_start = loop.eval_start, None
  loop.load_task_state(state)
  assert loop.eval_start == kept

  # later: task 1 learnt; task 0's first program too
  loop.policy_sampler.script = _programs([[SUM, SUM, ZERO], [SUM, ZERO, SUM]])
  later = loop.evaluate(3)
  d = np.array([1, 0, 0, 1, 0, 1])  # code: end - start per run
  assert later["eval/code"] == pytest.approx(4 / 6)
  assert later["eval/code_change"] == pytest.approx(d.mean())
  assert later["eval/code_change_stderr"] == pytest.approx(
    math.sqrt(d.var(ddof=1) / d.size)
  )
  # ut outcomes now [1, 0, 1, 0]: d = 0, 0, +1, 0; the start mean 1/4
  # is not start eval/ut (0.5: task 1 had no correct program then)
  assert later["eval/ut"] == 0.5
  assert later["eval/ut_change"] == pytest.approx(0.25)
  assert later["eval/ut_change_start"] == pytest.approx(0.25)
  assert later["eval/ut_change_stderr"] == pytest.approx(0.25)

  # with a reference for every task the reference judges the tests, and
  # the start outcomes, judged otherwise, are not paired
  loop.reference_program = lambda task: SUM
  loop.load_task_state(state)
  assert loop.eval_start is None and "not paired" in loop.logged[-1]
  loop.eval_rule_logged = False
  ref = loop.evaluate(-1)
  assert "by the task's reference program" in loop.logged[-1]
  assert ref["eval/ut"] == 0.5  # the good test of each task
  assert loop.eval_start.won["ut"] == [1, 0, 1, 0]
  again = loop.evaluate(4)  # the same programs and tests: no change
  assert (again["eval/ut_change"], again["eval/ut_change_stderr"]) == (0, 0)
  assert "eval/ut_change_start" not in again


def test_eval_settings_are_checked_naming_the_key():
  from rla_jax.errors import ConfigError

  loop = object.__new__(CodingLoop)
  loop.config = coding.get_config("smoke")
  loop.check_config()
  loop.config.eval.programs_per_task = 0
  with pytest.raises(ConfigError, match=r"eval\.programs_per_task=0"):
    loop.check_config()
