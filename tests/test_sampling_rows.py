"""The sampler's host-side rows (rla_jax.sampling.rows) on hand-made
cases."""

import numpy as np
import pytest

from rla_jax.sampling import rows


def test_trim_rows_cuts_after_the_first_stop_token_or_at_the_budget():
  tok = np.array([[5, 9, 7, 9], [5, 6, 7, 8], [1, 2, 3, 4]])
  lp = -np.arange(12, dtype=np.float32).reshape(3, 4)
  out = rows.trim_rows(
    tok,
    lp,
    stopped=np.array([True, False, True]),
    active=np.array([True, True, False]),
    budget=3,
    stop_ids={9},
  )
  assert out.tokens == [[5, 9], [5, 6, 7], []]
  np.testing.assert_array_equal(out.logprobs[0], [0.0, -1.0])
  np.testing.assert_array_equal(out.logprobs[1], [-4.0, -5.0, -6.0])
  assert out.logprobs[2].shape == (0,)
  assert out.stopped == [True, False, False]
  assert out.lengths == [2, 3, 0]


def test_chunk_inputs_pad_rows_and_name_each_decoded_rows_stream():
  chunk = rows.chunk_inputs(
    [[3, 4, 5], [6]],
    np.array([True, False]),
    2,
    [7, 2**32 - 1],
    bucket=4,
    cache_rows=3,
    used=10,
    pad_id=0,
  )
  np.testing.assert_array_equal(
    chunk.ids, [[0, 3, 4, 5], [0, 0, 0, 6], [0, 0, 0, 0]]
  )
  np.testing.assert_array_equal(
    chunk.mask, [[0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
  )
  np.testing.assert_array_equal(chunk.active, [True, False, False])
  # B * m decoded rows, row-major: row i sample j -> i * m + j
  np.testing.assert_array_equal(chunk.seeds, [7, 7, 2**32 - 1, 2**32 - 1, 0, 0])
  np.testing.assert_array_equal(chunk.samples, [0, 1, 0, 1, 0, 1])
  assert chunk.used == 10


@pytest.mark.parametrize(
  "prompts, message",
  [
    ([], "no prompts given"),
    ([[1], []], "prompt 1 is empty"),
    ([[1] * 6], "prompt 0 has 6 tokens, more than max_prompt_len=5 (set by k)"),
    ([[1, 10]], "prompt 0 has token id 10 outside the vocabulary [0, 10)"),
  ],
)
def test_check_prompt_rows_names_the_bad_row(prompts, message):
  with pytest.raises(ValueError) as err:
    rows.check_prompt_rows(
      prompts,
      allow_empty=False,
      max_prompt_len=5,
      vocab_size=10,
      limit_key="k",
    )
  assert message in str(err.value)


def test_check_row_seeds_names_the_bad_seed():
  rows.check_row_seeds(None, 3)
  rows.check_row_seeds([0, 2**32 - 1], 2)
  with pytest.raises(ValueError, match="1 row_seeds for 2 rows"):
    rows.check_row_seeds([0], 2)
  with pytest.raises(ValueError, match=r"row_seeds\[1\]=-1 is not an integer"):
    rows.check_row_seeds([0, -1], 2)
