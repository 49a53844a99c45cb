"""Multi-turn sampling: each turn appends an agent's new tokens to its kept
KV cache (`Sampler.session`).

Every sampled token is written to the cache (the stop token included), so
a turn appends only the new observation's tokens: per-turn cost grows with
the new tokens, not with the history (benchmarks/bench_multiturn.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rla_jax.models.kv_cache import KVCache

if TYPE_CHECKING:
  from rla_jax.sampling.rows import SampleOutput
  from rla_jax.sampling.sampler import Sampler


class Session:
  """Multi-turn continuation: each turn appends tokens to a kept cache.

  `turn(new_tokens, active)` appends new_tokens[i] to row i (the previous
  turn's generated tokens are already cached) and samples the reply. Rows
  with active[i] False append nothing and generate nothing. The sampling
  keywords are `Sampler.generate`'s (not num_samples); row_seeds and
  images (Qwen3-VL: a new screenshot with the turn's text), if given, have
  one entry per session row.

  The cache grows with the conversation, so decode attends to the slots in
  use rather than to all `num_slots` (the session's capacity): before a
  turn it holds the next power of two >= slots used + the chunk's bucket +
  max_new_tokens (at most num_slots). Powers of two bound the shapes, and
  so the compiled prefill and decode programs, at log2(num_slots), while
  decode reads under 2x the slots it needs.
  """

  def __init__(self, sampler: Sampler, batch_size: int, num_slots: int):
    self.sampler = sampler
    self.batch_size = batch_size
    self.num_slots = num_slots
    self.batch_rows = sampler.batch_bucket(batch_size)  # the cache's B
    self.cache: KVCache | None = None  # made by the first turn

  @property
  def slots_used(self) -> int:
    return 0 if self.cache is None else int(self.cache.end)

  def _make_room(self, chunk_bucket: int) -> None:
    """Grows the cache to hold this turn (or refuses it, naming the
    capacity) before anything runs."""
    need = self.sampler.caches.check_room(
      self.slots_used, chunk_bucket, self.num_slots
    )
    size = min(self.num_slots, 1 << (need - 1).bit_length())
    if self.cache is None:
      self.cache = self.sampler.caches.new(self.batch_rows, size)
    elif size > self.cache.num_slots:
      self.cache = self.sampler.caches.grown(self.cache, size)

  def turn(
    self,
    new_tokens: Sequence[Sequence[int]],
    active: Sequence[bool] | None = None,
    **sample_kw,
  ) -> SampleOutput:
    if len(new_tokens) != self.batch_size:
      raise ValueError(
        f"expected {self.batch_size} rows, got {len(new_tokens)}"
      )
    active = np.asarray(
      [True] * self.batch_size if active is None else active, bool
    )
    rows = [
      list(r) if a else [] for r, a in zip(new_tokens, active, strict=True)
    ]
    for i, (r, a) in enumerate(zip(rows, active, strict=True)):
      if a and not r:
        raise ValueError(f"row {i} is active but has no new tokens")
    self.sampler.check_rows(rows, allow_empty=True)
    self.sampler.check_row_seeds(sample_kw.get("row_seeds"), len(rows))
    images = sample_kw.pop("images", None)
    if images is not None:
      if len(images) != len(rows):
        raise ValueError(f"{len(images)} image lists for {len(rows)} rows")
      images = [
        list(imgs) if a else [] for imgs, a in zip(images, active, strict=True)
      ]
    bucket = self.sampler.chunk_bucket(rows)
    layout = self.sampler.image_chunk(rows, images, bucket, self.batch_rows)
    self._make_room(bucket)
    self.cache, out = self.sampler.run_chunk(
      self.cache,
      rows,
      active,
      **{
        "seed": 0,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "greedy": False,
        "max_new_tokens": None,
        "row_seeds": None,
        **sample_kw,
      },
      image_layout=layout,
    )
    return out
