"""Shape buckets: a long run compiles a bounded number of programs.

Chunk lengths and batch sizes are rounded up to the next bucket; rows are
left-padded inside a chunk (padding slots are marked invalid in the cache,
so they change no row's output).
"""

from __future__ import annotations

import bisect

import numpy as np


def power_of_two_buckets(low: int, high: int) -> tuple[int, ...]:
  """(low, 2*low, 4*low, ..., high): powers of two capped by high."""
  out, b = [], max(1, low)
  while b < high:
    out.append(b)
    b *= 2
  out.append(high)
  return tuple(out)


def pick_bucket(n: int, buckets: tuple[int, ...], what: str) -> int:
  """Smallest bucket >= n; ValueError naming the sizes if none fits."""
  i = bisect.bisect_left(buckets, n)
  if i == len(buckets):
    raise ValueError(f"{what} of {n} exceeds the largest bucket "
                     f"{buckets[-1]} (buckets: {buckets})")
  return buckets[i]


def left_pad(rows: list[list[int]], length: int, batch: int, pad_id: int
             ) -> tuple[np.ndarray, np.ndarray]:
  """Left-pads token rows into [batch, length] ids and a 0/1 mask.

  Rows beyond len(rows) (batch-bucket filler) are all padding.
  """
  ids = np.full((batch, length), pad_id, np.int32)
  mask = np.zeros((batch, length), np.int32)
  for i, row in enumerate(rows):
    if row:
      ids[i, length - len(row):] = row
      mask[i, length - len(row):] = 1
  return ids, mask
