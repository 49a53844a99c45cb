"""Choosing the next token: greedy, temperature, top-k and top-p.

All knobs are traced values (changing them never recompiles). The filter
runs under `lax.cond`, so the O(V log V) sort is skipped when neither top-k
nor top-p is active.

Sampling noise comes either from one key for the whole batch (a row's draw
then depends on its position in the batch and on the batch's size) or from
one key per row (`row_keys`, `per_row`): row i's draw then depends only on
its key and its logits, which is what common random numbers need.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NEG_INF = -jnp.inf


def top_k_top_p_filter(
  logits: jax.Array, top_k: jax.Array, top_p: jax.Array
) -> jax.Array:
  """Masks logits outside the top-k set and the top-p nucleus to -inf.

  logits: [B, V] float32 (already temperature-scaled); top_k: [] int
  (<= 0 disables); top_p: [] float in (0, 1] (1 disables). The nucleus is
  the smallest prefix of tokens sorted by probability whose mass reaches
  top_p (the token that crosses top_p is kept).
  """
  V = logits.shape[-1]
  desc = -jnp.sort(-logits, axis=-1)  # [B, V]
  k = jnp.where(top_k > 0, jnp.minimum(top_k, V), V)
  kth = jnp.take_along_axis(
    desc, jnp.broadcast_to(k - 1, desc.shape[:-1])[..., None], axis=-1
  )  # [B, 1]
  desc_k = jnp.where(desc >= kth, desc, NEG_INF)
  probs = jax.nn.softmax(desc_k, axis=-1)
  mass_before = jnp.cumsum(probs, axis=-1) - probs
  n_keep = jnp.maximum(jnp.sum(mass_before < top_p, axis=-1), 1)  # [B]
  pth = jnp.take_along_axis(desc_k, (n_keep - 1)[:, None], axis=-1)
  return jnp.where(logits >= jnp.maximum(kth, pth), logits, NEG_INF)


def first_argmax(x: jax.Array) -> jax.Array:
  """jnp.argmax(x, axis=-1) (first index of the maximum), as int32.

  x: [B, V]. Computed as min{v : x[v] == max(x)}: two plain reductions,
  which XLA:CPU runs ~8x faster than argmax's (value, index) reduction
  (4.5 vs 0.5 ms at B=32, V=32768; docs/benchmark-history.md, "Sampler
  decode, round 2"). For a row containing NaN the index is unspecified but
  in [0, V).
  """
  V = x.shape[-1]
  top = jnp.max(x, axis=-1, keepdims=True)
  idx = jnp.min(jnp.where(x == top, jnp.arange(V, dtype=jnp.int32), V), axis=-1)
  return jnp.minimum(idx, V - 1).astype(jnp.int32)


def row_stream_keys(
  key: jax.Array, row_seeds: jax.Array, sample_ids: jax.Array
) -> jax.Array:
  """One base key per row: fold_in(fold_in(key, row_seeds[r]),
  sample_ids[r]) (typed keys [B]; row_seeds, sample_ids: [B] uint32).

  A row's stream is named by (key, its row seed, its sample index) only, so
  it is the same in any batch, at any position and in any batch bucket;
  sample j of a prompt gets its own stream (sample 0 is the stream of a
  single-sample call).
  """
  return jax.vmap(
    lambda s, j: jax.random.fold_in(jax.random.fold_in(key, s), j)
  )(row_seeds, sample_ids)


def categorical_per_row(keys: jax.Array, logits: jax.Array) -> jax.Array:
  """One categorical draw per row, row r from keys[r] only: [B] int32.

  keys: typed keys [B]; logits: [B, V] (masked entries -inf).
  """
  return jax.vmap(lambda k, x: jax.random.categorical(k, x))(keys, logits)


def select_tokens(
  logits: jax.Array,
  key: jax.Array,
  temperature: jax.Array,
  top_p: jax.Array,
  top_k: jax.Array,
  greedy: jax.Array,
  row_keys: jax.Array | None = None,
  per_row: jax.Array | bool = False,
) -> tuple[jax.Array, jax.Array]:
  """Samples one token per row; returns (tokens [B], logprobs [B]).

  logits: [B, V] float32. The returned log-prob is log softmax(logits) of
  the chosen token (logit - logsumexp(logits)): the policy's own
  probability, independent of temperature/top-p/top-k, which is what the
  PPO ratio needs. greedy (or temperature <= 0) takes the argmax.

  Noise: one draw over the whole batch from `key`, or, where `per_row`
  (a traced bool: both choices share one program) is true, row r's draw
  from row_keys[r] alone (`categorical_per_row`).
  """
  logits = logits.astype(jnp.float32)

  def draw(scaled):
    if row_keys is None:
      return jax.random.categorical(key, scaled, axis=-1)
    return jax.lax.cond(
      per_row,
      lambda y: categorical_per_row(row_keys, y),
      lambda y: jax.random.categorical(key, y, axis=-1),
      scaled,
    )

  def sample(x):
    scaled = x / jnp.maximum(temperature, 1e-6)
    scaled = jax.lax.cond(
      (top_k > 0) | (top_p < 1.0),
      lambda y: top_k_top_p_filter(y, top_k, top_p),
      lambda y: y,
      scaled,
    )
    return draw(scaled).astype(jnp.int32)

  # The B x V random draw runs only when sampling: greedy decoding skips it
  # (25% of a greedy decode step at B=32, V=32768; benchmarks/NOTES_sampler).
  tokens = jax.lax.cond(
    greedy | (temperature <= 0), first_argmax, sample, logits
  )
  chosen = jnp.take_along_axis(logits, tokens[:, None], axis=-1)[:, 0]
  return tokens, chosen - jax.nn.logsumexp(logits, axis=-1)
