"""Seeds derived from integers: every random stream of a loop is named by
the integers it comes from (e.g. (seed, step, 1) for one step's rollouts)."""

from __future__ import annotations

import numpy as np


def derive_seed(*parts: int) -> int:
  """A 31-bit seed mixed from integers, stable across runs and processes.

  seed = SeedSequence([p & 0xFFFFFFFF for p in parts]).generate_state(1)[0]
  >> 1, so it fits a signed 32-bit int (a sampler's or random.Random's
  seed). Different tuples give independent streams; the same tuple always
  gives the same seed (no hashing of strings, no global state).

  Args:
    *parts: integers, e.g. (config seed, RL step, stream id).
  Returns:
    int in [0, 2**31).
  """
  return int(
    np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(
      1
    )[0]
    >> 1
  )
