"""Row-seeded sampler calls split by prompt bucket.

A sampler call pads every prompt to the bucket of its longest one. In the
ALFWorld loop's turns most prompts are ~250 tokens but a few reach ~700,
so one call pads all rows to 768 slots: profiled on the default's
evaluation, the whole batch's prefill ran at the longest prompt's cost
(docs/RESULTS.md, session 18). Where every row draws from its own noise
stream (`row_seeds`), a row's tokens do not depend on the other rows or on
the bucket, so the rows can be sampled in one call per prompt bucket and
put back in order: the same rows, each padded only to its own bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

from rla_jax.sampling.buckets import pick_bucket


def bucket_groups(
  lengths: Sequence[int], buckets: Sequence[int]
) -> list[list[int]]:
  """Row indices grouped by the prompt bucket of their length, shortest
  bucket first, each group in row order. lengths: [N] prompt lengths."""
  groups: dict[int, list[int]] = {}
  for i, n in enumerate(lengths):
    bucket = pick_bucket(max(1, n), buckets, "prompt length")
    groups.setdefault(bucket, []).append(i)
  return [groups[b] for b in sorted(groups)]


def merge_rows(
  parts: Sequence[tuple[list[int], list]], n: int, num_samples: int
) -> list:
  """The per-row fields of several calls put back in row order.

  parts: (row indices of a call, its [len(indices) * m] per-row values,
  row a's sample j at a * m + j); returns the [n * m] values of the whole
  batch, row i's sample j at i * m + j."""
  m = num_samples
  out: list = [None] * (n * m)
  for rows, values in parts:
    if len(values) != len(rows) * m:
      raise ValueError(f"{len(values)} values for {len(rows)} rows x {m}")
    for a, i in enumerate(rows):
      out[i * m : (i + 1) * m] = values[a * m : (a + 1) * m]
  missing = [k for k, v in enumerate(out) if v is None]
  if missing:
    raise ValueError(f"rows {sorted({k // m for k in missing})} not sampled")
  return out
