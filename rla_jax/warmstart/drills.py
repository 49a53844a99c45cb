"""Token samples for warm-start training: policy/judge SFT samples and lookup drills.

The policy answers "I will <command>. \\boxed{<index>}": the index must be
copied from the candidate line "<index>) <command>" of the prompt, a
content-addressed lookup that a small transformer learns slowly from
one lookup per (long) SFT sample. A lookup drill packs many lookups into
one short sequence: a candidate list (a real admissible list) as the user
message, then Q answers "I will <c_q>. \\boxed{<k_q>}\\n" for random k_q.
The loss weights the index tokens 1 and the rest `other_weight`, so the
drill teaches the copy, not a preference among commands.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rla_jax.rl import agent_text

BOX_OPEN = "\\boxed{"


def _ids(tokenizer, text: str) -> list[int]:
  return tokenizer.encode(text, add_special_tokens=False)


def boxed_answer_sample(tokenizer, prompt_text: str, response_text: str,
                        answer_weight: float) -> tuple[list[int], list[int], np.ndarray]:
  """(prompt ids, response ids + <|im_end|>, weights): weight answer_weight
  on every token overlapping the content of the last \\boxed{...}, 1 elsewhere.

  The response is encoded whole (exactly as the RL sampler's tokens decode);
  token spans come from the fast tokenizer's offset mapping.
  """
  start = response_text.rfind(BOX_OPEN)
  if start < 0:
    raise ValueError(f"response has no {BOX_OPEN!r}: {response_text!r}")
  lo = start + len(BOX_OPEN)
  hi = response_text.find("}", lo)
  hi = len(response_text) if hi < 0 else hi
  enc = tokenizer(response_text, add_special_tokens=False, return_offsets_mapping=True)
  ids = list(enc["input_ids"])
  w = np.ones(len(ids) + 1, np.float32)
  for i, (a, b) in enumerate(enc["offset_mapping"]):
    if a < hi and b > lo:
      w[i] = answer_weight
  eot = agent_text.end_of_turn_ids(tokenizer)[0]
  return agent_text.chat_ids(tokenizer, prompt_text), ids + [eot], w


def lookup_drill(tokenizer, candidates: Sequence[str], num_queries: int,
                 rng: np.random.Generator, other_weight: float = 0.1
                 ) -> tuple[list[int], list[int], np.ndarray]:
  """One drill sample: (prompt ids, response ids, weights) as described above."""
  if not candidates:
    raise ValueError("lookup_drill: empty candidate list")
  prompt = "Candidate actions:\n" + "\n".join(
      f"{k}) {c}" for k, c in enumerate(candidates))
  resp: list[int] = []
  w: list[float] = []
  for _ in range(num_queries):
    k = int(rng.integers(len(candidates)))
    head = _ids(tokenizer, f"I will {candidates[k]}. {BOX_OPEN}")
    index = _ids(tokenizer, str(k))
    tail = _ids(tokenizer, "}\n")
    resp += head + index + tail
    w += [other_weight] * len(head) + [1.0] * len(index) + [other_weight] * len(tail)
  return agent_text.chat_ids(tokenizer, prompt), resp, np.asarray(w, np.float32)
