"""Sampler correctness: greedy, padding, stop tokens, log-probs, sessions,
bounded compilation and input validation."""

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


@pytest.fixture(scope="module")
def model():
  return Qwen(CFG, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def prompts():
  rng = np.random.RandomState(0)
  return [list(map(int, rng.randint(3, 211, size=n))) for n in (3, 11, 20, 7)]


def _sampler(model, **kw):
  kw = {"max_prompt_len": 64, "max_new_tokens": 10, "pad_id": 0, **kw}
  return Sampler(model, **kw)


@pytest.mark.parametrize("attention", ["einsum", "blockwise"])
def test_greedy_is_teacher_forced_argmax_and_logprobs_match(
  model, prompts, attention
):
  """Sampler and training forward with the same attention kernel (the
  module's `model`, "auto", is einsum on CPU at these sizes)."""
  model = Qwen(CFG, rngs=nnx.Rngs(0), attention=attention)
  out = _sampler(model).generate(prompts, greedy=True)
  assert out.lengths == [10] * 4
  for p, toks, lps in zip(prompts, out.tokens, out.logprobs, strict=True):
    seq = jnp.asarray([p + toks])
    logits, _ = model(seq)
    argmax = np.asarray(jnp.argmax(logits[0, len(p) - 1 : -1], -1)).tolist()
    assert argmax == toks
    train_lp = np.asarray(sequence_logprobs(model, seq, jnp.ones_like(seq)))
    np.testing.assert_allclose(lps, train_lp[0, len(p) :], atol=1e-4)


@pytest.mark.parametrize("attention", ["einsum", "blockwise"])
def test_sampled_logprobs_match_training_forward(model, prompts, attention):
  model = Qwen(CFG, rngs=nnx.Rngs(0), attention=attention)
  out = _sampler(model).generate(
    prompts, seed=7, temperature=0.7, top_p=0.9, top_k=50
  )
  for p, toks, lps in zip(prompts, out.tokens, out.logprobs, strict=True):
    seq = jnp.asarray([p + toks])
    train_lp = np.asarray(sequence_logprobs(model, seq, jnp.ones_like(seq)))
    np.testing.assert_allclose(lps, train_lp[0, len(p) :], atol=1e-4)


def test_left_padding_does_not_change_rows(model, prompts):
  sampler = _sampler(model)
  batched = sampler.generate(prompts, greedy=True)
  for i, p in enumerate(prompts):
    assert sampler.generate([p], greedy=True).tokens[0] == batched.tokens[i]


def test_row_stops_at_stop_token_while_others_continue(model, prompts):
  free = _sampler(model).generate(prompts, greedy=True)
  stop = free.tokens[0][2]  # row 0 emits this at step 3
  out = _sampler(model, stop_token_ids=[stop, 1]).generate(prompts, greedy=True)
  for row_free, row, stopped in zip(
    free.tokens, out.tokens, out.stopped, strict=True
  ):
    cut = next(
      (j + 1 for j, t in enumerate(row_free) if t in (stop, 1)), len(row_free)
    )
    assert row == row_free[:cut]
    assert stopped == (cut < len(row_free) or row_free[-1] in (stop, 1))
  assert out.lengths[0] == 3 and max(out.lengths) == 10


def test_seeded_sampling_is_deterministic(model, prompts):
  sampler = _sampler(model)
  kw = dict(temperature=1.0, top_p=0.95, top_k=0)
  a = sampler.generate(prompts, seed=11, **kw)
  b = sampler.generate(prompts, seed=11, **kw)
  c = sampler.generate(prompts, seed=12, **kw)
  assert a.tokens == b.tokens and a.tokens != c.tokens


def test_top_k_one_is_greedy(model, prompts):
  sampler = _sampler(model)
  assert (
    sampler.generate(prompts, seed=3, top_k=1).tokens
    == sampler.generate(prompts, greedy=True).tokens
  )


def test_session_continuation_equals_reencoding(model, prompts):
  sampler = _sampler(model)
  session = sampler.session(batch_size=4, num_slots=256)
  rng = np.random.RandomState(1)
  history = [[] for _ in prompts]
  turn_inputs = [prompts] + [
    [list(map(int, rng.randint(3, 211, size=n))) for n in sizes]
    for sizes in ((4, 2, 9, 1), (6, 6, 3, 2))
  ]
  for new in turn_inputs:
    out = session.turn(new, greedy=True)
    for i in range(4):
      history[i] += new[i]
    ref = sampler.generate(history, greedy=True)
    assert out.tokens == ref.tokens
    for a, b in zip(out.logprobs, ref.logprobs, strict=True):
      np.testing.assert_allclose(a, b, atol=1e-4)
    for i in range(4):
      history[i] += out.tokens[i]
  # an inactive row appends and generates nothing
  out = session.turn(
    [[5], [], [6], [7]], active=[True, False, True, True], greedy=True
  )
  assert out.tokens[1] == [] and all(len(t) for t in out.tokens[::2])


def test_session_cache_grows_by_powers_of_two(model, prompts):
  """Decode attends to the slots in use: the cache holds the next power of
  two of what a turn needs (the capacity at most) and keeps its slots when
  it grows (a greedy turn equals re-encoding the history); warm sessions of
  the same shapes compile nothing."""
  sampler = _sampler(model, prompt_buckets=(16, 32, 64))
  turns = ([p[:5] for p in prompts], prompts, [p[:3] for p in prompts])

  def play(num_slots):
    session = sampler.session(batch_size=4, num_slots=num_slots)
    sizes, outs = [], []
    for t, new in enumerate(turns):
      kw = {"greedy": True} if t == 2 else {"seed": t, "temperature": 1.0}
      outs.append(session.turn(new, **kw))
      sizes.append(session.cache.num_slots)
    return sizes, outs

  # slots needed (used + chunk bucket + 10 new): 0+16+10 = 26 -> 32;
  # 26+32+10 = 68 -> 128; 68+16+10 = 94 -> 128 (or the capacity)
  assert play(256)[0] == [32, 128, 128]
  sizes, outs = play(100)
  assert sizes == [32, 100, 100]
  history = [[] for _ in prompts]
  for new, out in zip(turns[:2], outs, strict=False):
    for i in range(4):
      history[i] += new[i] + out.tokens[i]
  ref = sampler.generate(
    [h + p for h, p in zip(history, turns[2], strict=True)], greedy=True
  )
  assert outs[2].tokens == ref.tokens
  with CompileCounter() as counter:
    again_sizes, again = play(100)
  assert counter.count == 0
  assert again_sizes == sizes
  assert [o.tokens for o in again] == [o.tokens for o in outs]


def test_no_recompilation_once_buckets_are_warm(model):
  sampler = _sampler(model, prompt_buckets=(16, 32, 64), batch_buckets=(4, 8))
  rng = np.random.RandomState(2)

  def make(n, b):
    return [
      list(map(int, rng.randint(3, 211, size=rng.randint(1, n + 1))))
      for _ in range(b)
    ]

  for n in (16, 32, 64):  # warm every (prompt bucket, batch bucket)
    for b in (4, 8):
      sampler.generate(make(n, b), greedy=True)
  with CompileCounter() as counter:
    for call in range(20):
      batch = make(int(rng.choice([5, 16, 30, 64])), int(rng.randint(1, 9)))
      sampler.generate(
        batch,
        seed=call,
        temperature=float(rng.uniform(0.5, 1)),
        top_p=float(rng.uniform(0.8, 1)),
        top_k=int(rng.randint(0, 20)),
        greedy=bool(call % 2),
        max_new_tokens=int(rng.randint(1, 11)),
      )
  assert counter.count == 0


def test_bad_requests_fail_before_compiling(model, prompts):
  sampler = _sampler(model, max_prompt_len=32)
  named = _sampler(
    model, max_prompt_len=32, limit_key="config.rollout.max_prompt_len"
  )
  with CompileCounter() as counter:
    with pytest.raises(
      ValueError, match="prompt 1 has 40 tokens, more than max_prompt_len=32"
    ):
      sampler.generate([[3], [4] * 40])
    with pytest.raises(
      ValueError, match=r"max_prompt_len=32 \(set by config.rollout"
    ):
      named.generate([[4] * 40])
    with pytest.raises(ValueError, match="prompt 0 is empty"):
      sampler.generate([[]])
    with pytest.raises(
      ValueError,
      match="token id 211 outside the "
      r"vocabulary \[0, 211\)",
    ):
      sampler.generate([[3, 211]])
    with pytest.raises(ValueError, match="no prompts given"):
      sampler.generate([])
  assert counter.count == 0
  session = sampler.session(batch_size=1, num_slots=40)
  with pytest.raises(
    ValueError,
    match=r"cache overflow: 0 slots used \+ "
    r"chunk bucket 32 \+ max_new_tokens "
    r"10 > 40 slots",
  ):
    session.turn([[5] * 20])


def test_num_samples_share_one_prefill(model, prompts):
  sampler = _sampler(model)
  m = 3
  greedy = sampler.generate(prompts, greedy=True, num_samples=m)
  single = sampler.generate(prompts, greedy=True)
  assert greedy.tokens == [t for t in single.tokens for _ in range(m)]
  out = sampler.generate(prompts, seed=5, temperature=1.0, num_samples=m)
  assert len(out.tokens) == len(prompts) * m
  assert (
    out.tokens
    == sampler.generate(prompts, seed=5, temperature=1.0, num_samples=m).tokens
  )
  for i, p in enumerate(prompts):
    samples = out.tokens[i * m : (i + 1) * m]
    assert len({tuple(s) for s in samples}) > 1  # independent draws
    for toks, lps in zip(
      samples, out.logprobs[i * m : (i + 1) * m], strict=True
    ):
      seq = jnp.asarray([p + toks])
      train_lp = np.asarray(sequence_logprobs(model, seq, jnp.ones_like(seq)))
      np.testing.assert_allclose(lps, train_lp[0, len(p) :], atol=1e-4)


def test_geometric_buckets_bound_padding():
  from rla_jax.sampling.buckets import geometric_buckets

  b = geometric_buckets(16, 1024, per_octave=4, multiple=16)
  assert b[0] == 16 and b[-1] == 1024 and list(b) == sorted(set(b))
  assert all(x % 16 == 0 for x in b)
  assert (256, 320, 384, 448, 512) == tuple(x for x in b if 256 <= x <= 512)
  # above the rounding floor no bucket pads by more than 25 %
  # consecutive pairs (x, y) of buckets: zip stops at the last one on purpose
  assert all(y <= 1.25 * x for x, y in zip(b, b[1:], strict=False) if x >= 64)
  assert geometric_buckets(1, 9)[:8] == (1, 2, 3, 4, 5, 6, 7, 8)
  with pytest.raises(ValueError, match="bad arguments"):
    geometric_buckets(8, 4)
