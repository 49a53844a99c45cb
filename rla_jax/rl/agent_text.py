"""Token-level I/O of the three roles, shared by warm start, rollout and eval.

Prompts are rendered with `rla_jax.rl.prompts` and wrapped in the
tokenizer's chat template (one user turn, generation prompt appended);
responses are plain text ending at the template's end-of-turn token.
Keeping this in one module guarantees that supervised warm start and RL see
byte-identical prompts.
"""

from __future__ import annotations

from collections.abc import Sequence

from rla_jax.rl import prompts
from rla_jax.tokenizer import render_chat


def chat_ids(tokenizer, user_text: str) -> list[int]:
  """Token ids of a one-turn chat prompt ending with the assistant header."""
  text = render_chat(tokenizer, [{"role": "user", "content": user_text}])
  return tokenizer.encode(text, add_special_tokens=False)


def policy_step_text(
  observations: Sequence[str],
  actions: Sequence[str],
  admissible: Sequence[str],
  history_steps: int | None,
) -> str:
  """The policy's user message at one step (see prompts.policy_prompt)."""
  return prompts.policy_prompt(
    observations, actions, admissible, history_steps=history_steps
  )


CHOICE_PREFIX = "I choose "
COMMAND_PREFIX = "I will "
ANSWER_FORMATS = ("choice_line", "index", "command_index")


def policy_response_text(
  command: str, index: int, answer_format: str = "choice_line"
) -> str:
  """The warm-started policy's answer: "I choose k) <command>. \\boxed{k}"
  ("choice_line"), just "\\boxed{k}" ("index": every sampled token but
  the index is then fixed, so the policy gradient lands on the decision), or
  "I will <command>. \\boxed{k}" ("command_index": the decision is written
  out as the command first, token by token, and the index is then looked up
  from the candidate line that matches it).

  In "choice_line" the decision is the leading index; the rationale then
  copies candidate line k, so it names the executed action (the judge's
  criterion (b): no invented objects). Asked to write "I will <command>"
  first without drills for it, an early tiny policy named a non-candidate
  in 536 of 621 steps while its boxed index still chose well;
  "command_index" pairs that format with drills of the command -> index
  lookup (docs/results-history.md, session 6).
  """
  if answer_format not in ANSWER_FORMATS:
    raise ValueError(
      f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}"
    )
  if answer_format == "index":
    return f"\\boxed{{{index}}}"
  if answer_format == "command_index":
    return f"{COMMAND_PREFIX}{command}. \\boxed{{{index}}}"
  return f"{CHOICE_PREFIX}{index}) {command}. \\boxed{{{index}}}"


def judge_step_text(
  step_prompt: str, step_response: str, next_observation: str
) -> str:
  return prompts.judge_prompt(step_prompt, step_response, next_observation)


def judge_response_text(score: int) -> str:
  """A judge answer: a short verdict and +1/-1 in a box."""
  verdict = "good step" if score > 0 else "bad step"
  return f"This is a {verdict}. \\boxed{{{1 if score > 0 else -1}}}"


def end_of_turn_ids(tokenizer) -> list[int]:
  """Ids that end an assistant turn (stop tokens for sampling)."""
  ids = []
  for tok in ("<|im_end|>", "<|endoftext|>"):
    tid = tokenizer.convert_tokens_to_ids(tok)
    if isinstance(tid, int) and tid >= 0 and tid != tokenizer.unk_token_id:
      ids.append(tid)
  if not ids:
    raise ValueError("tokenizer has no <|im_end|> / <|endoftext|> token")
  return ids
