"""The host side of one sampler call: its prompt rows checked and laid out
(`check_prompt_rows`, `check_row_seeds`, `chunk_inputs`), and its decoded
rows trimmed into a `SampleOutput` (`trim_rows`). Pure numpy: the jitted
programs that consume and produce these arrays are in
`rla_jax.sampling.programs`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.sampling.buckets import left_pad


@dataclasses.dataclass
class SampleOutput:
  """Result of one sampler call, trimmed per row on the host.

  tokens[i]: generated ids of row i (stop token included if one was hit);
  logprobs[i]: float32 [len] log-prob of each generated token under the
  model's plain softmax; stopped[i]: True if row i ended on a stop token.
  """

  tokens: list[list[int]]
  logprobs: list[np.ndarray]
  stopped: list[bool]

  @property
  def lengths(self) -> list[int]:
    return [len(t) for t in self.tokens]


@dataclasses.dataclass(frozen=True)
class ChunkInputs:
  """One sampler call's host inputs (`chunk_inputs`).

  ids, mask: [B, T] left-padded rows (B the cache's rows, T the prompt
  bucket); active: [B] rows that sample; seeds, samples: [B * m] each
  decoded row's row seed and sample index (its noise stream); used: the
  cache slots filled before the chunk.
  """

  ids: np.ndarray
  mask: np.ndarray
  active: np.ndarray
  seeds: np.ndarray
  samples: np.ndarray
  used: int


def check_prompt_rows(
  rows: Sequence[Sequence[int]],
  *,
  allow_empty: bool,
  max_prompt_len: int,
  vocab_size: int,
  limit_key: str = "",
) -> None:
  """A ValueError naming the first bad row: none given, an empty row
  (unless allow_empty), one longer than max_prompt_len (naming
  `limit_key`, where it was configured), or a token id outside
  [0, vocab_size)."""
  if not rows:
    raise ValueError("no prompts given")
  for i, row in enumerate(rows):
    if not row and not allow_empty:
      raise ValueError(f"prompt {i} is empty")
    if len(row) > max_prompt_len:
      where = f" (set by {limit_key})" if limit_key else ""
      raise ValueError(
        f"prompt {i} has {len(row)} tokens, more than "
        f"max_prompt_len={max_prompt_len}{where}"
      )
    if row:
      arr = np.asarray(row)
      if arr.min() < 0 or arr.max() >= vocab_size:
        bad = int(arr[(arr < 0) | (arr >= vocab_size)][0])
        raise ValueError(
          f"prompt {i} has token id {bad} outside the vocabulary "
          f"[0, {vocab_size})"
        )


def check_row_seeds(row_seeds, n: int) -> None:
  """None, or n integers in [0, 2**32); a ValueError naming the first bad
  one otherwise."""
  if row_seeds is None:
    return
  if len(row_seeds) != n:
    raise ValueError(f"{len(row_seeds)} row_seeds for {n} rows")
  for i, s in enumerate(row_seeds):
    if not isinstance(s, (int, np.integer)) or not 0 <= s < 2**32:
      raise ValueError(f"row_seeds[{i}]={s!r} is not an integer in [0, 2**32)")


def chunk_inputs(
  rows,
  active_rows,
  num_samples: int,
  row_seeds,
  *,
  bucket: int,
  cache_rows: int,
  used: int,
  pad_id: int,
) -> ChunkInputs:
  """A chunk's host arrays: the n rows left-padded to their prompt bucket T
  and the cache's B = cache_rows rows, and the noise stream of each of the
  B * m decoded rows (row seed, sample index). Padding rows are inactive
  and draw from stream 0."""
  n, B, m = len(rows), cache_rows, int(num_samples)
  ids, mask = left_pad(rows, bucket, B, pad_id)
  active = np.zeros((B,), bool)
  active[:n] = active_rows
  seeds = np.zeros((B,), np.uint32)
  if row_seeds is not None:
    seeds[:n] = np.asarray(row_seeds, np.uint64).astype(np.uint32)
  return ChunkInputs(
    ids=ids,
    mask=mask,
    active=active,
    seeds=np.repeat(seeds, m),
    samples=np.tile(np.arange(m, dtype=np.uint32), B),
    used=used,
  )


def trim_rows(
  tok: np.ndarray,
  lp: np.ndarray,
  stopped: np.ndarray,
  active: np.ndarray,
  budget: int,
  stop_ids: set[int],
) -> SampleOutput:
  """The decoded rows (tok, lp: [n, max_new] host arrays; stopped, active:
  [n]) cut after their first stop token or at the budget; inactive rows
  are empty."""
  out_tokens, out_lp, out_stop = [], [], []
  for i in range(len(tok)):
    if not active[i]:
      out_tokens.append([])
      out_lp.append(np.zeros(0, np.float32))
      out_stop.append(False)
      continue
    row = tok[i].tolist()
    length = budget
    for j, t in enumerate(row[:budget]):
      if t in stop_ids:
        length = j + 1
        break
    out_tokens.append(row[:length])
    out_lp.append(np.asarray(lp[i, :length], np.float32))
    out_stop.append(bool(stopped[i]))
  return SampleOutput(out_tokens, out_lp, out_stop)
