"""The layer-unrolled sampling forward (per-layer KV cache) against the
scanned training forward, and the sampler built on it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_hf_checkpoint

from rla_jax.compile_counter import CompileCounter
from rla_jax.models import init_cache, load_qwen, unrolled
from rla_jax.sampling.sampler import Sampler
from rla_jax.sampling.token_selection import first_argmax


def _batch(vocab, seed=0):
  rng = np.random.RandomState(seed)
  tokens = rng.randint(0, vocab, (3, 9))
  mask = np.ones((3, 9), np.int32)
  mask[1, :4] = 0  # left padding
  mask[2, :1] = 0
  return tokens, mask


@pytest.mark.parametrize("attention", ["einsum", "blockwise"])
@pytest.mark.parametrize("model_type,tie", [("qwen2", False), ("qwen3", True)])
def test_unrolled_forward_equals_scanned_forward(
  tmp_path, model_type, tie, attention
):
  model = load_qwen(
    build_hf_checkpoint(
      str(tmp_path), model_type, tie=tie, num_heads=4, num_kv_heads=2
    ),
    attention=attention,
  )
  tokens, mask = _batch(300)
  ref, _ = model(jnp.asarray(tokens), jnp.asarray(mask))  # lax.scan path
  params = unrolled.unstack(model)
  cache = init_cache(model.cfg, 3, 16)
  h, cache = unrolled.forward(
    model.cfg,
    params,
    jnp.asarray(tokens),
    jnp.asarray(mask),
    cache,
    attention=attention,
  )
  ours = unrolled.logits(model.cfg, params, h)
  real = mask.astype(bool)
  assert np.abs(np.asarray(ours)[real] - np.asarray(ref)[real]).max() <= 1e-5
  # one [B, K, S, H] buffer per layer, the chunk written at slots [0, 9)
  cfg = model.cfg
  assert len(cache.k) == len(cache.v) == cfg.num_layers
  assert all(
    x.shape == (3, cfg.num_kv_heads, 16, cfg.head_dim)
    for x in cache.k + cache.v
  )
  assert int(cache.end) == 9
  assert not np.asarray(cache.k[0])[:, :, 9:].any()


def _scan_greedy(model, prompt, n):
  """Greedy decode by re-running the scanned forward on the whole
  sequence each step: (tokens, log-probs)."""
  seq, lps = list(prompt), []
  for _ in range(n):
    logits, _ = model(jnp.asarray([seq]))
    logp = jax.nn.log_softmax(logits[0, -1].astype(jnp.float32))
    tok = int(jnp.argmax(logp))
    seq.append(tok)
    lps.append(float(logp[tok]))
  return seq[len(prompt) :], np.asarray(lps, np.float32)


@pytest.mark.parametrize("attention", ["einsum", "blockwise"])
def test_sampler_decode_equals_scanned_reference(tiny_qwen3_dir, attention):
  model = load_qwen(tiny_qwen3_dir, attention=attention)
  rng = np.random.RandomState(3)
  prompts = [list(map(int, rng.randint(3, 300, size=n))) for n in (5, 12)]
  out = Sampler(model, max_prompt_len=16, max_new_tokens=8).generate(
    prompts, greedy=True
  )
  for p, toks, lps in zip(prompts, out.tokens, out.logprobs, strict=True):
    ref_toks, ref_lps = _scan_greedy(model, p, 8)
    assert toks == ref_toks
    np.testing.assert_allclose(lps, ref_lps, atol=1e-5)


def test_session_turns_compile_nothing_after_warm_up(tiny_qwen3_dir):
  model = load_qwen(tiny_qwen3_dir)
  sampler = Sampler(
    model, max_prompt_len=16, max_new_tokens=4, prompt_buckets=(8, 16)
  )
  rng = np.random.RandomState(4)

  def turn(n):
    return [list(map(int, rng.randint(3, 300, size=n))) for _ in range(2)]

  # The cache grows by powers of two, and each turn's slots advance by its
  # chunk bucket, so a warm-up whose turns fall in the same buckets reaches
  # the same cache sizes (16, 32, 64, 64) and compiles every program the
  # turns below need, whatever their lengths and sampling keywords.
  warm = sampler.session(batch_size=2, num_slots=128)
  for n in (5, 13, 7, 2):  # buckets 8, 16, 8, 8
    warm.turn(turn(n), greedy=True)
  session = sampler.session(batch_size=2, num_slots=128)
  with CompileCounter() as counter:
    for n in (3, 16, 8, 1):
      session.turn(turn(n), temperature=0.8, seed=n)
  assert counter.count == 0
  assert len(session.cache.k) == model.cfg.num_layers


def test_first_argmax_matches_argmax_with_ties():
  x = jnp.asarray(
    [[1.0, 3.0, 3.0, 0.0], [-2.0, -1.0, -5.0, -1.0], [0.0, 0.0, 0.0, 0.0]]
  )
  assert np.asarray(first_argmax(x)).tolist() == [1, 1, 0]
  y = jax.random.normal(jax.random.key(0), (8, 4096))
  np.testing.assert_array_equal(first_argmax(y), jnp.argmax(y, -1))
