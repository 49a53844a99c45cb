"""Grouping a sampler call's rows by prompt bucket and putting the groups'
outputs back in row order (rla_jax/sampling/length_groups.py)."""

import pytest

from rla_jax.sampling.length_groups import bucket_groups, merge_rows


def test_bucket_groups_by_hand():
  assert bucket_groups([5, 40, 7, 16, 17], (16, 32, 64)) == [
    [0, 2, 3],
    [4],
    [1],
  ]
  assert bucket_groups([0, 1], (16,)) == [[0, 1]]
  with pytest.raises(ValueError, match="prompt length of 65"):
    bucket_groups([65], (16, 32, 64))


def test_merge_rows_restores_row_major_order_with_samples():
  # rows 0 and 2 in one call, row 1 in another; 2 samples per row
  parts = [([0, 2], ["a0", "a1", "c0", "c1"]), ([1], ["b0", "b1"])]
  assert merge_rows(parts, 3, 2) == ["a0", "a1", "b0", "b1", "c0", "c1"]
  with pytest.raises(ValueError, match=r"rows \[1\] not sampled"):
    merge_rows(parts[:1], 3, 2)
  with pytest.raises(ValueError, match="3 values for 2 rows x 2"):
    merge_rows([([0, 2], ["a", "b", "c"])], 3, 2)
