"""The steps the judge votes on: jobs and mask by hand."""

import numpy as np

from rla_jax.rl.judge_votes import draw_step_columns, judged_steps


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


def test_judged_steps_keep_only_the_chosen_steps():
  chosen = np.array([[1, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 1]], bool)
  jobs, mask = judged_steps(
    [3, 2, 4], include=[True, True, False], chosen=chosen
  )
  assert jobs == [(0, 0), (0, 2), (1, 1)]
  assert mask.tolist() == [
    [True, False, True, False],
    [False, True, False, False],
    [False, False, False, False],
  ]


def test_draw_step_columns_draws_whole_columns_per_task():
  num_steps = [5, 3, 5, 2, 2, 1]
  rows = [[0, 1, 2], [3, 4], [5]]
  mask = draw_step_columns(rows, num_steps, 2, np.random.default_rng(3))
  assert mask.shape == (6, 5)
  for group in rows:
    longest = max(num_steps[n] for n in group)
    columns = set(np.nonzero(mask[group].any(0))[0])
    assert len(columns) == min(2, longest)
    for n in group:  # every episode of the group that reached a column
      assert set(np.nonzero(mask[n])[0]) == {
        k for k in columns if k < num_steps[n]
      }
  # Task 0's columns come from its 5 indices: numpy's draw, seeded.
  ref = np.random.default_rng(3).choice(5, size=2, replace=False)
  assert set(np.nonzero(mask[0])[0]) == set(ref.tolist())
  # 0 = every step.
  every = draw_step_columns(rows, num_steps, 0, np.random.default_rng(0))
  assert every.sum() == sum(num_steps)
  # Uniform over indices: each of task 0's 5 indices drawn ~2/5 of the time.
  counts = sum(
    draw_step_columns([[0]], [5], 2, np.random.default_rng(s))[0].astype(int)
    for s in range(2000)
  )
  np.testing.assert_allclose(counts / 2000, 0.4, atol=0.05)
