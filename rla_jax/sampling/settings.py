"""`SamplingParams`: the sampling settings of a rollout or judge pass,
passed to the sampler's calls as keywords (``**dataclasses.asdict(params)``).
One record for every setting (ALFWorld, GUI, coding, the judges), so the
loops read their config sections into it and the rollouts take it whole."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class SamplingParams:
  """temperature / top_p / top_k (0: off) shape the token distribution;
  greedy takes the argmax instead; max_new_tokens caps the reply (None: the
  sampler's own cap)."""

  temperature: float = 0.8
  top_p: float = 0.95
  top_k: int = 0
  greedy: bool = False
  max_new_tokens: int | None = None
