"""The coding warm start's demonstrations: programs for the coder and
(input, expected output) tests for the unit-test generator, on select-family
tasks (`rla_jax.envs.coding.select_family`), rendered with the loop's own
prompts.

Coder answers are a one-line plan and a program in one of the family's
NUM_STYLES styles (drawn per example, so a statement has several
solutions). Test-generator answers work the test out before writing it:
the input, the integers that qualify, the answer, then the reference's
**Test Input:** / **Test Output:** blocks. Every answer follows from the
prompt alone (the statement names the aggregate and the predicates).
"""

from __future__ import annotations

import dataclasses
import json
import random

from rla_jax.envs.coding import render_policy_prompt, render_unit_test_prompt
from rla_jax.envs.coding import select_family as sf
from rla_jax.envs.coding.tasks import Task

_AGG_WORDS = {
  "sum": "their sum",
  "count": "how many there are",
  "max": "the largest",
  "min": "the smallest",
}


@dataclasses.dataclass(frozen=True)
class Example:
  """One SFT example: the user message and the answer text."""

  prompt_text: str
  response_text: str


def _spec(task: Task) -> dict:
  spec = json.loads(task.family_spec)
  if spec.get("kind") != sf.KIND:
    raise ValueError(f"task {task.task_id}: not a select-family task")
  return spec


def _condition_words(preds) -> str:
  return " and ".join(sf.PREDICATES[p][0] for p in preds) or "any"


def unit_test_prompt(task: Task) -> str:
  """The unit-test generator's prompt, as the loop renders it (the task's
  first test as the example)."""
  return render_unit_test_prompt(task.question, task.tests[0])


def program_example(task: Task, style: int) -> Example:
  """The coder's answer for `task` in program style `style`."""
  spec = _spec(task)
  plan = (
    f"Keep the integers that are {_condition_words(spec['preds'])}, then "
    f"print {_AGG_WORDS[spec['agg']]} (0 if none qualifies)."
  )
  program = sf.reference_program(task, style)
  return Example(
    render_policy_prompt(task.question),
    f"{plan}\n```python\n{program}```",
  )


def _worked_answer(agg: str, kept: list[int], out: str) -> str:
  """The answer line, with the arithmetic written out (a tiny model gets
  sums right far more often when it writes the terms first)."""
  if not kept:
    return f"none qualifies, so the answer is {out}"
  terms = " ".join(map(str, kept))
  if agg == "sum":
    expr = " + ".join(f"({x})" if x < 0 else str(x) for x in kept)
    return f"{expr} = {out}"
  if agg == "count":
    return f"{len(kept)} integers ({terms})"
  return f"{_AGG_WORDS[agg]} of {terms} is {out}"


def test_example(task: Task, rng: random.Random) -> Example:
  """The unit-test generator's answer for `task`: a fresh small input
  (1-3 integers in [-9, 9], k in 2-5), worked out, then the test."""
  spec = _spec(task)
  n, k = rng.randint(1, 3), rng.randint(2, 5)
  values = [rng.randint(-9, 9) for _ in range(n)]
  stdin = f"{n} {k}\n{' '.join(map(str, values))}\n"
  kept = [
    x
    for x in values
    if sf.solve("count", spec["preds"], f"1 {k}\n{x}\n") == "1"
  ]
  out = sf.solve(spec["agg"], spec["preds"], stdin)
  shown = " ".join(map(str, kept)) if kept else "none"
  work = (
    f"Take n = {n}, k = {k} and the integers {' '.join(map(str, values))}.\n"
    f"Integers that are {_condition_words(spec['preds'])}: {shown}.\n"
    f"Answer: {_worked_answer(spec['agg'], kept, out)}."
  )
  return Example(
    unit_test_prompt(task),
    f"{work}\n\n**Test Input:**\n```\n{stdin.rstrip()}\n```\n\n"
    f"**Test Output:**\n```\n{out}\n```\n\n**Explanation:** {shown} "
    f"qualify; {_AGG_WORDS[spec['agg']]}: {out}.",
  )


def make_examples(
  tasks: list[Task], seed: int
) -> tuple[list[Example], list[Example]]:
  """(coder examples, test-generator examples): one of each per task, the
  program style and the test input drawn from a stream of `seed`."""
  rng = random.Random(seed)
  programs = [program_example(t, rng.randrange(sf.NUM_STYLES)) for t in tasks]
  tests = [test_example(t, rng) for t in tasks]
  return programs, tests
