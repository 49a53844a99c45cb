"""The sampler's jitted device programs (`Sampler` runs them).

  prefill_whole  one forward pass appending a left-padded chunk [B, T] to
                 the cache; returns the cache and the last position's
                 logits [B, V] (the pieces variant is
                 `rla_jax.sampling.prefill.prefill`);
  repeat_rows    each row's cache and logits repeated m times, so m
                 samples of one prompt share one prefill;
  copy_slots     a cache's slots copied to the front of a larger one (a
                 `Session` growing its cache);
  decode         a `lax.while_loop` that samples a token, appends it to
                 the cache and computes the next logits until every row has
                 stopped or spent its budget.

The cache is donated to prefill_whole and decode, so it is updated in
place. Dimension letters as in `config.QwenConfig`: B rows, T chunk
length, S cache slots, V vocabulary.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from rla_jax.models import unrolled
from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import KVCache
from rla_jax.sampling.token_selection import row_stream_keys, select_tokens


@functools.partial(
  jax.jit,
  static_argnums=(0, 1),
  static_argnames=("attention",),
  donate_argnums=(3,),
)
def prefill_whole(
  cfg: QwenConfig, dtype, params, cache: KVCache, tokens, mask, attention="auto"
):
  """The whole chunk in one forward: tokens, mask [B, T] (left-padded) are
  written at slots [cache.end, cache.end + T) and attend to every valid
  earlier slot. Returns (the cache, the last position's logits [B, V])."""
  h, cache = unrolled.forward(
    cfg, params, tokens, mask, cache, dtype=dtype, attention=attention
  )
  return cache, unrolled.logits(cfg, params, h[:, -1], dtype)


@functools.partial(jax.jit, static_argnums=(2,))
def repeat_rows(cache: KVCache, logits, m: int):
  """Each row's cache and next-token logits repeated m times (row-major):
  m samples of one prompt share a single prefill."""

  def rep(x, axis):
    return jnp.repeat(x, m, axis=axis)

  return KVCache(
    k=tuple(rep(x, 0) for x in cache.k),
    v=tuple(rep(x, 0) for x in cache.v),
    valid=rep(cache.valid, 0),
    end=cache.end,
    next_pos=rep(cache.next_pos, 0),
  ), rep(logits, 0)


def copy_slots(new: KVCache, old: KVCache) -> KVCache:
  """`new` (more slots, empty) holding `old`'s slots [0, S_old) and its
  pointers."""
  S = old.num_slots

  def put(n, o):
    return n.at[:, :, :S].set(o)

  return KVCache(
    k=tuple(map(put, new.k, old.k)),
    v=tuple(map(put, new.v, old.v)),
    valid=new.valid.at[:, :S].set(old.valid),
    end=old.end,
    next_pos=old.next_pos,
  )


@functools.partial(
  jax.jit,
  static_argnums=(0, 1, 2),
  static_argnames=("attention",),
  donate_argnums=(4,),
)
def decode(
  cfg: QwenConfig,
  dtype,
  max_new_static,
  params,
  cache: KVCache,
  logits,
  active,
  key,
  row_seeds,
  sample_ids,
  per_row,
  temperature,
  top_p,
  top_k,
  greedy,
  max_new,
  stop_ids,
  pad_id,
  attention="auto",
):
  """Samples up to max_new (<= max_new_static) tokens per active row.

  Noise at step t: fold_in(key, t) over the batch, or, where per_row,
  row r's own fold_in(row_stream_keys(...)[r], t)."""
  B = logits.shape[0]
  row_keys = row_stream_keys(key, row_seeds, sample_ids)
  out_tok = jnp.full((B, max_new_static), pad_id, jnp.int32)
  out_lp = jnp.zeros((B, max_new_static), jnp.float32)

  def cond(c):
    step, done = c[0], c[5]
    return (step < max_new) & ~jnp.all(done)

  def body(c):
    step, cache, logits, out_tok, out_lp, done, stopped = c
    tok, lp = select_tokens(
      logits,
      jax.random.fold_in(key, step),
      temperature,
      top_p,
      top_k,
      greedy,
      jax.vmap(lambda k: jax.random.fold_in(k, step))(row_keys),
      per_row,
    )
    live = ~done
    tok = jnp.where(live, tok, pad_id)
    out_tok = out_tok.at[:, step].set(tok)
    out_lp = out_lp.at[:, step].set(jnp.where(live, lp, 0.0))
    hit = live & jnp.isin(tok, stop_ids)
    stopped = stopped | hit
    done = done | hit | (step + 1 >= max_new)
    h, cache = unrolled.forward(
      cfg,
      params,
      tok[:, None],
      live[:, None],
      cache,
      dtype=dtype,
      attention=attention,
    )
    logits = unrolled.logits(cfg, params, h[:, 0], dtype)
    return step + 1, cache, logits, out_tok, out_lp, done, stopped

  init = (
    jnp.zeros((), jnp.int32),
    cache,
    logits,
    out_tok,
    out_lp,
    ~active,
    jnp.zeros((B,), bool),
  )
  step, cache, _, out_tok, out_lp, _, stopped = jax.lax.while_loop(
    cond, body, init
  )
  return cache, out_tok, out_lp, stopped, step
