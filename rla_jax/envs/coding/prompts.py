"""Prompt renderers for the coding setting (user-message text; the RL loop
applies the chat template).

The structure follows the reference (Gen-Verse/Open-AgentRL
``sample/llm_*_rollout.py``), in our own words: the policy thinks, then writes
one python block using input()/print(); the unit-test generator writes exactly
ONE test as **Test Input:** / **Test Output:** fenced blocks plus an
explanation; the environment model proposes one harder/easier problem as JSON,
anchored to the root problem.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rla_jax.envs.coding.tasks import Task

MAX_PROMPT_TEST_CHARS = 100
"""Tests whose input+output is longer than this are left out of the proposal
prompt (reference)."""


def render_policy_prompt(question: str, evaluation: bool = False) -> str:
  """Policy prompt: reason first, then one complete program in a single
  ```python block."""
  rules = [
    "Solve the programming problem below.",
    "First think through the problem and an efficient algorithm step by step.",
    "Then give one complete Python 3 program that reads its input with input() "
    "and writes the answer with print().",
    "Put the program in a single ```python code block at the end of your "
    "answer.",
  ]
  if evaluation:
    rules.append(
      "The program must compute the answer from whatever input it receives; do "
      "not hard-code or print the example outputs."
    )
  return "\n".join(rules) + f"\n\nProblem:\n{question.strip()}\n"


def render_unit_test_prompt(
  question: str, example: tuple[str, str] | None = None
) -> str:
  """Unit-test generator prompt: exactly ONE new, correct and discriminative
  stdin/stdout test."""
  parts = [
    "You design unit tests for programming problems, and you are rigorous "
    "about correctness.",
    "Write exactly ONE new test for the problem below. It must be correct (the "
    "output is what a correct program prints for that input) and "
    "discriminative (a subtly wrong program would fail it).",
    "Reason step by step to choose an input and to derive its output by hand; "
    "only give a test whose output you are sure of.",
    "",
    f"Problem:\n{question.strip()}",
  ]
  if example is not None:
    parts += [
      "",
      f"Example input:\n```\n{example[0].rstrip()}\n```",
      f"Example output:\n```\n{example[1].rstrip()}\n```",
    ]
  parts += [
    "",
    "After your reasoning, end your answer with exactly this format:",
    "**Test Input:**\n```\n<the input given on stdin>\n```\n",
    "**Test Output:**\n```\n<the exact expected stdout>\n```\n",
    "**Explanation:** <one or two sentences on why the output is correct>",
  ]
  return "\n".join(parts) + "\n"


def _tests_block(
  tests: Sequence[tuple[str, str]], pass_rates: Sequence[float] | None = None
) -> str:
  lines = []
  for i, (inp, out) in enumerate(tests):
    if len(inp) + len(out) > MAX_PROMPT_TEST_CHARS:
      continue
    rate = (
      ""
      if pass_rates is None
      else f"  (pass rate of current solutions: {pass_rates[i]:.2f})"
    )
    lines.append(f"- input: {json.dumps(inp)}  output: {json.dumps(out)}{rate}")
  return "\n".join(lines) if lines else "- (all tests too long to show)"


def render_task_proposal_prompt(
  root: Task,
  current: Task,
  direction: str,
  accuracy: float,
  gt_pass_rates: Sequence[float],
  generated_tests: Sequence[tuple[str, str, float]] = (),
) -> str:
  """Environment-model prompt: propose ONE harder/easier problem close to the
  ROOT problem.

  gt_pass_rates: float [T_current] pass rate of each ground-truth test of
  ``current`` over the policy samples; generated_tests: (input, output,
  pass_rate) from the unit-test generator.
  """
  if direction not in ("harder", "easier"):
    raise ValueError(
      f"direction must be 'harder' or 'easier', got {direction!r}"
    )
  if len(gt_pass_rates) != len(current.tests):
    raise ValueError(
      f"gt_pass_rates has {len(gt_pass_rates)} entries for "
      f"{len(current.tests)} tests"
    )
  gen = [(i, o) for i, o, _ in generated_tests]
  gen_rates = [r for _, _, r in generated_tests]
  return (
    "\n".join(
      [
        "You curate programming problems for training a code model.",
        "Current solutions solve the current problem with accuracy "
        f"{accuracy:.2f}. Create ONE new problem that is {direction.upper()} "
        "than the current one, together with its ground-truth tests.",
        "Critical anchor: stay close to the ROOT problem's topic, required "
        "skill, input/output style and constraints; change the difficulty only "
        "in a small, controlled way.",
        "",
        f"ROOT problem:\n{root.question.strip()}\nROOT tests:\n"
        f"{_tests_block(root.tests)}",
        "",
        f"CURRENT problem:\n{current.question.strip()}\n"
        f"CURRENT tests:\n{_tests_block(current.tests, gt_pass_rates)}",
        "",
        "Tests written by the unit-test generator (they may be wrong):",
        _tests_block(gen, gen_rates) if gen else "- (none)",
        "",
        "Output one JSON object and nothing after it:",
        '{"question": "...", "test_method": "stdio", "test_time_limit": '
        f'{current.time_limit_s:g}, "test_input": ["..."], "test_output": '
        '["..."]}',
        "Give at least 4 tests; test_input and test_output must have the same "
        "length, and every output must be exactly what a correct program "
        "prints.",
      ]
    )
    + "\n"
  )
