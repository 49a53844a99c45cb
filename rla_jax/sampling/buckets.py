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


def geometric_buckets(
  low: int, high: int, per_octave: int = 4, multiple: int = 1
) -> tuple[int, ...]:
  """Buckets with `per_octave` evenly spaced sizes in every [2^k, 2^(k+1)]
  from `low` up to `high` (included), each rounded up to `multiple`.

  With per_octave=4 the padding waste is at most 25 % (vs 50 % for powers
  of two), for at most 4x as many compiled shapes. E.g. (16, 512, 4, 16):
  16, 32, 48, 64, 80, 96, 112, 128, 160, ..., 448, 512.
  """
  if per_octave < 1 or multiple < 1 or low < 1 or high < low:
    raise ValueError(
      f"geometric_buckets: bad arguments low={low} "
      f"high={high} per_octave={per_octave} "
      f"multiple={multiple}"
    )
  out, base = set(), 1
  while base < low:
    base *= 2
  base = max(1, base // 2)
  while base < high:
    for j in range(per_octave):
      size = base + (base * j) // per_octave
      size = -(-size // multiple) * multiple
      if low <= size < high:
        out.add(size)
    base *= 2
  out.add(high)
  return tuple(sorted(out))


def pick_bucket(n: int, buckets: tuple[int, ...], what: str) -> int:
  """Smallest bucket >= n; ValueError naming the sizes if none fits."""
  i = bisect.bisect_left(buckets, n)
  if i == len(buckets):
    raise ValueError(
      f"{what} of {n} exceeds the largest bucket "
      f"{buckets[-1]} (buckets: {buckets})"
    )
  return buckets[i]


def left_pad(
  rows: list[list[int]], length: int, batch: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
  """Left-pads token rows into [batch, length] ids and a 0/1 mask.

  Rows beyond len(rows) (batch-bucket filler) are all padding.
  """
  ids = np.full((batch, length), pad_id, np.int32)
  mask = np.zeros((batch, length), np.int32)
  for i, row in enumerate(rows):
    if row:
      ids[i, length - len(row) :] = row
      mask[i, length - len(row) :] = 1
  return ids, mask
