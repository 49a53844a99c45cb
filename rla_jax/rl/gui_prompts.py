"""The GUI setting's prompts: the Qwen3-VL computer-use policy and the
screenshot judge (reference section 4, OSWorld RM prompt).

Images enter a prompt as IMAGE placeholders (`<|vision_start|>
<|image_pad|><|vision_end|>`), one per screenshot, in the order of the
prompt's image list; `qwen3_vl.inputs.expand_image_pads` gives each pad
token its image's merged-patch count after tokenisation.
"""

from __future__ import annotations

from collections.abc import Sequence

VISION_START, IMAGE_PAD, VISION_END = (
  "<|vision_start|>",
  "<|image_pad|>",
  "<|vision_end|>",
)
IMAGE = VISION_START + IMAGE_PAD + VISION_END
VISION_TOKENS = (VISION_START, IMAGE_PAD, VISION_END)

ACTION_HELP = (
  "left_click, double_click, right_click, middle_click and mouse_move take "
  '"coordinate": [x, y]; left_click_drag takes "start_coordinate" and '
  '"coordinate"; type takes "text"; key takes "keys" (a list); scroll '
  'takes "pixels" and "coordinate"; wait takes "time"; terminate takes '
  '"status" ("success" or "failure").'
)


def _history(actions: Sequence[str]) -> str:
  if not actions:
    return "Previous actions: none."
  lines = [f"{i + 1}. {a}" for i, a in enumerate(actions)]
  return "Previous actions:\n" + "\n".join(lines)


def policy_prompt(
  instruction: str, actions: Sequence[str], num_images: int
) -> str:
  """The policy's user message at one step: the tool, the task, the
  earlier actions (one-line summaries) and the last num_images
  screenshots (the current one last).

  The reply format is the reference Qwen3-VL agent's: one `Action:` line,
  then one <tool_call>{"name": "computer_use", "arguments": {...}}
  </tool_call>, coordinates on a 1000 x 1000 grid over the screenshot."""
  shots = "\n".join(
    ("Current screenshot:" if i == num_images - 1 else "Earlier screenshot:")
    + "\n"
    + IMAGE
    for i in range(num_images)
  )
  return (
    "You are a GUI agent operating a web page through the computer_use "
    "tool. Coordinates are on a 1000 x 1000 grid over the screenshot, "
    "(0, 0) at the top left. Actions: " + ACTION_HELP + "\n"
    f"Task: {instruction}\n"
    f"{_history(actions)}\n"
    f"{shots}\n"
    "Reply with one line 'Action: <one sentence>' and then "
    '<tool_call>{"name": "computer_use", "arguments": {"action": ...}}'
    "</tool_call>."
  )


def judge_prompt(
  instruction: str,
  earlier_actions: Sequence[str],
  has_previous: bool,
  previous_action: str,
  response: str,
) -> str:
  """The judge's user message for the most recent step of a GUI agent:
  the earlier actions, the previous screenshot with its action (when the
  step is not the first), the current screenshot, the objective and the
  agent's full response, then the screenshot after the action; +1 / -1 in
  \\boxed{}. Images, in order: [previous,] current, next."""
  previous = (
    f"Previous screenshot (then the agent did: {previous_action}):\n{IMAGE}\n"
    if has_previous
    else ""
  )
  return (
    "You are an evaluator for the most recent step of a GUI agent.\n"
    f"{_history(earlier_actions)}\n"
    f"{previous}"
    f"Current screenshot:\n{IMAGE}\n"
    f"Objective: {instruction}\n"
    f"Agent response:\n{response}\n"
    f"Screenshot after the action:\n{IMAGE}\n"
    "Score +1 if the step is relevant to the objective, executable, "
    "coherent with the response and makes visible progress; otherwise -1 "
    "(a no-op, an action that undoes progress, a hallucinated element, a "
    "malformed call). Think first, then put the score in \\boxed{}."
  )
