"""Parsing of model outputs (code, generated
tests, task proposals) and prompt structure."""

import json

import pytest

from rla_jax.envs.coding import parsing, prompts
from rla_jax.envs.coding.tasks import Task

PARENT = Task(
  task_id="root-1",
  question="Print the sum of two integers.",
  tests=(("1 2\n", "3\n"),),
  time_limit_s=2.0,
  difficulty=1.0,
)


def test_extract_code_takes_last_python_block():
  text = (
    "think...\n```python\nprint(1)\n```\nbetter:\n"
    "```Python\nprint(2)\n```\n```\nnot python\n```"
  )
  assert parsing.extract_code(text) == "print(2)\n"
  assert (
    parsing.extract_code("```py\nx = input()\nprint(x)\n```")
    == "x = input()\nprint(x)\n"
  )


@pytest.mark.parametrize(
  "text",
  [
    None,
    42,
    "",
    "no code here",
    "```python\nprint(1)\n",  # unclosed
    "```python\n   \n```",
    "```\nprint(1)\n```",
    "```cpp\nint main(){}\n```",
  ],
)
def test_extract_code_invalid_is_none(text):
  assert parsing.extract_code(text) is None


def test_generated_test_round_trip_with_prompt_format():
  model_output = (
    "Let me reason. For input 3 4 the sum is 7.\n\n"
    "**Test Input:**\n```\n3 4\n```\n\n"
    "**Test Output:**\n```\n7\n```\n\n**Explanation:** 3 + 4 = 7."
  )
  assert parsing.parse_generated_test(model_output) == ("3 4\n", "7\n")
  # the rendered prompt shows the same markers the parser expects
  prompt = prompts.render_unit_test_prompt(PARENT.question, PARENT.tests[0])
  assert (
    "**Test Input:**" in prompt
    and "**Test Output:**" in prompt
    and "exactly ONE" in prompt
  )


def test_generated_test_last_match_and_literal_newlines():
  text = (
    "**Test Input:**\n```\n1\n```\n**Test Output:**\n```\n1\n```\n"
    "Wait, better one:\n"
    "**Test Input:**\n```text\n2\\n5 6\n```\n**Test Output:**\n```\n11\n```"
  )
  assert parsing.parse_generated_test(text) == ("2\n5 6\n", "11\n")


@pytest.mark.parametrize(
  "text",
  [
    None,
    "",
    "**Test Input:** 3 4 **Test Output:** 7",
    "**Test Input:**\n```\n\n```\n**Test Output:**\n```\n7\n```",
    "**Test Input:**\n```\n3\n```\n**Test Output:**\n```\n  \n```",
    "**Test Input:**\n```\n3\n```\n",
  ],
)
def test_generated_test_invalid_is_none(text):
  assert parsing.parse_generated_test(text) is None


def _proposal(n_in=4, n_out=4, **extra):
  obj = {
    "question": "Print the sum of three integers.",
    "test_method": "stdio",
    "test_time_limit": 4,
    "test_input": [f"{i} {i} {i}" for i in range(n_in)],
    "test_output": [str(3 * i) for i in range(n_out)],
  }
  obj.update(extra)
  return obj


def test_task_proposal_valid():
  text = "Thinking {not json}.\n```json\n" + json.dumps(_proposal()) + "\n```"
  task = parsing.parse_task_proposal(text, PARENT)
  assert task is not None
  assert task.question == "Print the sum of three integers."
  assert task.tests[1] == ("1 1 1\n", "3\n") and len(task.tests) == 4
  assert (
    task.parent_id == "root-1"
    and task.root_id == "root-1"
    and task.time_limit_s == 4.0
  )
  assert parsing.parse_task_proposal(text, PARENT) == task  # deterministic id


def test_task_proposal_caps_tests_and_uses_last_valid_object():
  first = json.dumps(_proposal(question="First."))
  last = json.dumps(_proposal(12, 12))
  task = parsing.parse_task_proposal(
    first + "\nrevised:\n" + last + "\n{broken", PARENT
  )
  assert (
    task.question == "Print the sum of three integers." and len(task.tests) == 8
  )


@pytest.mark.parametrize(
  "obj",
  [
    _proposal(3, 3),
    _proposal(5, 4),
    _proposal(question="  "),
    _proposal(test_input="1 2 3"),
    {"question": "q"},
    _proposal(test_output=[None, "1", "2", "3"]),
  ],
)
def test_task_proposal_invalid_is_none(obj):
  assert parsing.parse_task_proposal(json.dumps(obj), PARENT) is None


def test_task_proposal_bad_time_limit_falls_back_to_parent():
  task = parsing.parse_task_proposal(
    json.dumps(_proposal(test_time_limit="fast")), PARENT
  )
  assert task.time_limit_s == PARENT.time_limit_s
  assert parsing.parse_task_proposal("no json at all", PARENT) is None
  assert parsing.parse_task_proposal(None, PARENT) is None


def test_policy_and_proposal_prompts():
  p = prompts.render_policy_prompt("Add two numbers.")
  assert (
    "```python" in p
    and "input()" in p
    and "print()" in p
    and p.rstrip().endswith("Add two numbers.")
  )
  assert "hard-code" in prompts.render_policy_prompt("Q", evaluation=True)
  long_test = ("9" * 200 + "\n", "1\n")
  current = Task(
    task_id="c",
    question="Sum three.",
    tests=(("1 1 1\n", "3\n"), long_test),
    root_id="root-1",
  )
  text = prompts.render_task_proposal_prompt(
    PARENT, current, "harder", 0.9, [1.0, 0.5], [("2 2 2\n", "6\n", 0.75)]
  )
  assert (
    "HARDER" in text
    and "ROOT problem" in text
    and "0.75" in text
    and "9" * 200 not in text
  )
  assert '"test_input"' in text
  with pytest.raises(ValueError, match="direction"):
    prompts.render_task_proposal_prompt(
      PARENT, current, "sideways", 0.5, [1.0, 0.5]
    )
  with pytest.raises(ValueError, match="gt_pass_rates"):
    prompts.render_task_proposal_prompt(PARENT, current, "easier", 0.5, [1.0])
