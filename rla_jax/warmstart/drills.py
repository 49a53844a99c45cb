"""Token samples for warm-start training:
policy/judge SFT samples and copy drills.

The policy answers "I choose <k>) <command>. \\boxed{<k>}": it decides the
index k, then copies the candidate line "<k>) <command>" of the prompt. That
copy is a content-addressed lookup a small transformer learns slowly from
one lookup per (long) SFT sample. A copy drill packs many lookups into one
short sequence: a candidate list (a real admissible list) as the user
message, then Q answers "I choose <k_q>) <c_q>. \\boxed{<k_q>}\n" for random
k_q. The loss weights the copied text (command and boxed index) 1 and the
rest `other_weight`, so the drill teaches the copy, not a preference among
indices.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from rla_jax.rl import agent_text

BOX_OPEN = "\\boxed{"


def _weighted_ids(
  tokenizer, text: str, spans: Sequence[tuple[int, int, float]], default: float
) -> tuple[list[int], list[float]]:
  """Token ids of `text` encoded whole (as the sampler's tokens decode) and
  per-token weights: w of the last span (lo, hi, w) a token overlaps, else
  `default`. Spans come from the fast tokenizer's offset mapping."""
  enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
  w = [default] * len(enc["input_ids"])
  for i, (a, b) in enumerate(enc["offset_mapping"]):
    for lo, hi, weight in spans:
      if a < hi and b > lo:
        w[i] = weight
  return list(enc["input_ids"]), w


def decision_spans(response_text: str) -> list[tuple[int, int]]:
  """Character spans of a response's decisions: the content of the last
  \\boxed{...} and, for a policy answer, the leading chosen index
  ("choice_line") or the written-out command ("command_index")."""
  start = response_text.rfind(BOX_OPEN)
  if start < 0:
    raise ValueError(f"response has no {BOX_OPEN!r}: {response_text!r}")
  lo = start + len(BOX_OPEN)
  hi = response_text.find("}", lo)
  spans = [(lo, len(response_text) if hi < 0 else hi)]
  lead = re.match(re.escape(agent_text.CHOICE_PREFIX) + r"(\d+)", response_text)
  if lead:
    spans.append(lead.span(1))
  if response_text.startswith(agent_text.COMMAND_PREFIX):
    end = response_text.rfind(". " + BOX_OPEN)
    if end > len(agent_text.COMMAND_PREFIX):
      spans.append((len(agent_text.COMMAND_PREFIX), end))
  return spans


def boxed_answer_sample(
  tokenizer, prompt_text: str, response_text: str, answer_weight: float
) -> tuple[list[int], list[int], np.ndarray]:
  """(prompt ids, response ids + <|im_end|>, weights): weight answer_weight
  on every token overlapping a decision (`decision_spans`), 1 elsewhere."""
  ids, w = _weighted_ids(
    tokenizer,
    response_text,
    [(lo, hi, answer_weight) for lo, hi in decision_spans(response_text)],
    1.0,
  )
  eot = agent_text.end_of_turn_ids(tokenizer)[0]
  return (
    agent_text.chat_ids(tokenizer, prompt_text),
    ids + [eot],
    np.asarray(w + [1.0], np.float32),
  )


def copy_drill(
  tokenizer,
  candidates: Sequence[str],
  num_queries: int,
  rng: np.random.Generator,
  other_weight: float = 0.1,
  answer_format: str = "choice_line",
) -> tuple[list[int], list[int], np.ndarray]:
  """One drill sample: (prompt ids, response ids, weights) as described above.

  The answers are in `answer_format`; "command_index" answers "I will <c_q>.
  \\boxed{<k_q>}", so the drill teaches the reverse lookup (command -> its
  index). "index" answers carry no command to copy, so its drills use
  "choice_line".
  """
  if not candidates:
    raise ValueError("copy_drill: empty candidate list")
  if answer_format not in agent_text.ANSWER_FORMATS:
    raise ValueError(
      f"copy_drill: answer_format must be one of "
      f"{agent_text.ANSWER_FORMATS}, got {answer_format!r}"
    )
  fmt = "choice_line" if answer_format == "index" else answer_format
  prompt = "Candidate actions:\n" + "\n".join(
    f"{k}) {c}" for k, c in enumerate(candidates)
  )
  text, spans = "", []
  for _ in range(num_queries):
    k = int(rng.integers(len(candidates)))
    answer = agent_text.policy_response_text(candidates[k], k, fmt)
    # the command and the boxed index are copied
    copied = (
      len(agent_text.COMMAND_PREFIX)
      if fmt == "command_index"
      else answer.index(")")
    )
    spans.append((len(text) + copied, len(text) + answer.rindex("}"), 1.0))
    text += answer + "\n"
  ids, w = _weighted_ids(tokenizer, text, spans, other_weight)
  return agent_text.chat_ids(tokenizer, prompt), ids, np.asarray(w, np.float32)
