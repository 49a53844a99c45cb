"""The steps the judge votes on: jobs and mask by hand."""

import numpy as np

from rla_jax.rl.judge_votes import judged_steps


def test_judged_steps_lists_included_episodes_steps_in_order():
  jobs, mask = judged_steps([2, 0, 3], [True, True, False])
  assert jobs == [(0, 0), (0, 1)]
  np.testing.assert_array_equal(
    mask, [[True, True, False], [False] * 3, [False] * 3]
  )
  jobs, mask = judged_steps([1, 2])
  assert jobs == [(0, 0), (1, 0), (1, 1)]
  np.testing.assert_array_equal(mask, [[True, False], [True, True]])
  jobs, mask = judged_steps([0])
  assert jobs == [] and mask.shape == (1, 1) and not mask.any()
