"""Per-row sampling noise (`row_seeds`): a row's draws depend only on (seed,
its row seed, its sample index, the step), not on its batch position, the
batch bucket or the other rows; log-probs stay the model's; no recompiles."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY_QWEN3
from flax import nnx

from rla_jax.compile_counter import CompileCounter
from rla_jax.models import Qwen
from rla_jax.models.logprobs import sequence_logprobs
from rla_jax.sampling.sampler import Sampler

CFG = TINY_QWEN3
KW = dict(seed=3, temperature=1.0)


@pytest.fixture(scope="module")
def model():
  return Qwen(CFG, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def sampler(model):
  return Sampler(
    model,
    max_prompt_len=64,
    max_new_tokens=12,
    batch_buckets=(1, 4, 16),
    prompt_buckets=(16, 32, 64),
  )


def _prompts(n, seed=0, lengths=(3, 11, 20, 7, 40, 5)):
  rng = np.random.RandomState(seed)
  return [
    list(map(int, rng.randint(3, 211, size=lengths[i % len(lengths)])))
    for i in range(n)
  ]


def test_row_draws_do_not_depend_on_batch(sampler):
  """The same (prompt, row seed) alone (bucket 1), at position 2 of 4
  (bucket 4) and at position 7 of 9 beside a 40-token prompt (bucket 16,
  a longer prompt bucket), in a session too: the same tokens. Without row
  seeds the positions draw different noise (the control)."""
  p, s = _prompts(1, seed=9, lengths=(7,))[0], 12345
  alone = sampler.generate([p], row_seeds=[s], **KW)
  four = _prompts(4, seed=1)
  four[2] = p
  in_four = sampler.generate(four, row_seeds=[5, 6, s, 7], **KW)
  nine = _prompts(9, seed=2)
  nine[7] = p
  seeds9 = [100 + i for i in range(9)]
  seeds9[7] = s
  in_nine = sampler.generate(nine, row_seeds=seeds9, **KW)
  # 32-token prompt bucket + 12 new tokens: generate's cache shape
  session = sampler.session(batch_size=4, num_slots=44)
  in_session = session.turn(four, row_seeds=[5, 6, s, 7], **KW)
  ref = alone.tokens[0]
  assert len(ref) == 12
  assert in_four.tokens[2] == ref and in_nine.tokens[7] == ref
  assert in_session.tokens[2] == ref
  for lp in (in_four.logprobs[2], in_nine.logprobs[7]):
    np.testing.assert_allclose(lp, alone.logprobs[0], atol=1e-5)
  # the other rows' noise changes nothing either
  again = sampler.generate(four, row_seeds=[8, 9, s, 10], **KW)
  assert again.tokens[2] == ref and again.tokens[0] != in_four.tokens[0]
  # control: one key per batch gives position-dependent draws
  assert (
    sampler.generate(four, **KW).tokens[2]
    != (sampler.generate([p, p, p, p], **KW).tokens[0])
  )


def test_row_seed_names_the_stream(sampler):
  """Same row seed: same sample (also for a copy of the prompt in the same
  batch); different row seeds or a different call seed: different ones."""
  p = _prompts(1, seed=4, lengths=(9,))[0]
  out = sampler.generate([p] * 4, row_seeds=[1, 2, 1, 3], **KW)
  assert out.tokens[0] == out.tokens[2]
  assert len({tuple(t) for t in out.tokens}) == 3
  rerun = sampler.generate([p] * 4, row_seeds=[1, 2, 1, 3], **KW)
  assert rerun.tokens == out.tokens
  other = sampler.generate([p], row_seeds=[1], seed=4, temperature=1.0)
  assert other.tokens[0] != out.tokens[0]


def test_num_samples_are_distinct_streams(sampler):
  """num_samples=3: the samples of a prompt differ; sample 0 is the single
  sample's stream; sample j of a prompt is the same in another batch."""
  ps = _prompts(4, seed=5)
  out = sampler.generate(ps, row_seeds=[7, 8, 9, 10], num_samples=3, **KW)
  for i in range(4):
    assert len({tuple(t) for t in out.tokens[3 * i : 3 * i + 3]}) == 3
  single = sampler.generate(ps, row_seeds=[7, 8, 9, 10], **KW)
  assert [out.tokens[3 * i] for i in range(4)] == single.tokens
  alone = sampler.generate([ps[2]], row_seeds=[9], num_samples=3, **KW)
  assert alone.tokens == out.tokens[6:9]


def test_row_seeded_logprobs_match_training_forward(model, sampler):
  """Log-probs are the model's log-softmax at the chosen tokens, with
  temperature, top-p and top-k filtering the draw."""
  ps = _prompts(4, seed=6, lengths=(9,))  # one training-forward shape
  out = sampler.generate(
    ps,
    row_seeds=[3, 1, 4, 1],
    seed=7,
    temperature=0.7,
    top_p=0.9,
    top_k=50,
  )
  for r, (toks, lps) in enumerate(zip(out.tokens, out.logprobs, strict=True)):
    seq = jnp.asarray([ps[r] + toks])
    train_lp = np.asarray(sequence_logprobs(model, seq, jnp.ones_like(seq)))
    np.testing.assert_allclose(lps, train_lp[0, len(ps[r]) :], atol=1e-4)


def test_row_seeds_never_recompile(sampler):
  """Once a (prompt, batch) bucket is warm, calls with other row seeds,
  other seeds, or none at all reuse the compiled programs."""
  rng = np.random.RandomState(8)
  ps = _prompts(3, seed=7, lengths=(5, 9, 14))
  sampler.generate(ps, row_seeds=[0, 1, 2], **KW)  # warm: bucket (16, 4)
  with CompileCounter() as counter:
    for call in range(6):
      seeds = [int(x) for x in rng.randint(0, 2**32, size=3, dtype=np.int64)]
      sampler.generate(
        ps,
        seed=call,
        row_seeds=seeds if call % 3 else None,
        temperature=float(rng.uniform(0.5, 1)),
        greedy=call == 4,
      )
  assert counter.count == 0


def test_bad_row_seeds_fail_before_compiling(sampler):
  session = sampler.session(2, 64)
  with CompileCounter() as counter:
    with pytest.raises(ValueError, match="2 row_seeds for 3 rows"):
      sampler.generate([[3], [4], [5]], row_seeds=[1, 2])
    with pytest.raises(ValueError, match=r"row_seeds\[1\]=-1 is not"):
      sampler.generate([[3], [4]], row_seeds=[1, -1])
    with pytest.raises(ValueError, match=r"row_seeds\[0\]=1.5 is not"):
      session.turn([[3], [4]], row_seeds=[1.5, 2])
  assert counter.count == 0


def test_rows_split_by_prompt_bucket_sample_as_one_call(
  model, sampler, monkeypatch
):
  """Row-seeded prompts of buckets 16, 32 and 64 run as one call per
  bucket (4 + 1 + 1 rows), with the tokens, stops and log-probs of the
  single padded call; without row seeds they stay one call."""
  whole = Sampler(
    model,
    max_prompt_len=64,
    max_new_tokens=12,
    batch_buckets=(1, 4, 16),
    prompt_buckets=(16, 32, 64),
    split_by_length=False,
  )
  ps = _prompts(6, seed=11)  # lengths 3, 11, 20, 7, 40, 5
  seeds = [21, 22, 23, 24, 25, 26]
  calls = []
  call = sampler._generate_call

  def counted(prompts, *args, **kw):
    calls.append(len(prompts))
    return call(prompts, *args, **kw)

  monkeypatch.setattr(sampler, "_generate_call", counted)
  split = sampler.generate(ps, row_seeds=seeds, num_samples=2, **KW)
  assert calls == [4, 1, 1]
  ref = whole.generate(ps, row_seeds=seeds, num_samples=2, **KW)
  assert split.tokens == ref.tokens and split.stopped == ref.stopped
  for a, b in zip(split.logprobs, ref.logprobs, strict=True):
    np.testing.assert_allclose(a, b, atol=1e-5)
  calls.clear()
  sampler.generate(ps, **KW)
  assert calls == [6]
