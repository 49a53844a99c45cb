"""Prefill in bounded pieces: rows in blocks, the chunk in time slices.

A whole-batch prefill holds one layer's temporaries for every row at once
(MLP activations [B, T, F], attention scores [B, N, T, S], the hidden
states): for a 7B judge over hundreds of 2048-token prompts they dominate
peak memory (docs/MEMORY_PLAN.md, "prefill_transient"). `prefill` runs the
same forward in pieces inside one jitted program:

  * rows: the batch is viewed per batch shard as [D, Bd] (D = devices the
    batch axis is sharded over, Bd = B / D rows each) and a
    `lax.fori_loop` runs blocks of at most `rows` rows of every shard at
    once ([D * rows] rows per piece, each device its own rows: no rows move
    between devices). Each block reads its rows' cache, appends its chunk
    and writes the keys and values back with dynamic_update_slice on the
    row axis. When `rows` does not divide Bd the last block starts at
    Bd - rows and recomputes a few rows (the same values, written twice).
  * tokens: each block's [rows, T] chunk is appended as successive
    cache-continuing slices of at most `tokens` columns (each attends to
    the valid earlier slots, as a later turn does).

The loop's trip count and every shape follow from the bucket's shapes, so a
bucket compiles once. Dimension letters as in `config.QwenConfig`; B rows,
T chunk length, S cache slots, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rla_jax.models import unrolled
from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import KVCache


@dataclasses.dataclass(frozen=True)
class PiecePlan:
  """How `prefill` splits a batch (static: part of the compiled program).

  rows: most rows per piece on each batch shard (0 = all of them);
  tokens: most chunk columns per time slice (0 = the whole chunk);
  shards: D, the number of batch shards (1 without a mesh);
  mesh / batch_axes: the mesh and the mesh axes the batch axis is sharded
    over (None without a mesh): each piece is constrained to them.
  """

  rows: int = 0
  tokens: int = 0
  shards: int = 1
  mesh: Mesh | None = None
  batch_axes: tuple[str, ...] | None = None

  @property
  def whole(self) -> bool:
    """True when no piece is smaller than today's whole-batch call."""
    return self.rows <= 0 and self.tokens <= 0


def _constrain(x: jax.Array, plan: PiecePlan, lead: int) -> jax.Array:
  """x sharded over plan.batch_axes on axis 0, its next lead - 1 axes
  replicated and the rest left to the compiler (no-op without a mesh)."""
  if plan.mesh is None or not plan.batch_axes:
    return x
  axes = plan.batch_axes[0] if len(plan.batch_axes) == 1 else plan.batch_axes
  spec = P(axes, *([None] * (lead - 1)), *([P.UNCONSTRAINED] * (x.ndim - lead)))
  return jax.lax.with_sharding_constraint(x, NamedSharding(plan.mesh, spec))


def _split(x: jax.Array, plan: PiecePlan) -> jax.Array:
  """[B, ...] -> [D, Bd, ...]: each batch shard's rows on axis 1."""
  D = plan.shards
  return _constrain(x.reshape(D, x.shape[0] // D, *x.shape[1:]), plan, 2)


def _merge(x: jax.Array, plan: PiecePlan) -> jax.Array:
  """[D, Bd, ...] -> [B, ...], the inverse of `_split`."""
  return _constrain(x.reshape(-1, *x.shape[2:]), plan, 1)


def _take(x: jax.Array, start, rows: int, plan: PiecePlan) -> jax.Array:
  """[D, Bd, ...] -> [D * rows, ...]: rows [start, start + rows) of each
  shard."""
  y = jax.lax.dynamic_slice_in_dim(x, start, rows, axis=1)
  return _merge(_constrain(y, plan, 2), plan)


def _put(x: jax.Array, y: jax.Array, start, plan: PiecePlan) -> jax.Array:
  """Writes [D * rows, ...] y into rows [start, start + rows) of each
  shard of [D, Bd, ...] x (the inverse of `_take`)."""
  y = _split(y.astype(x.dtype), plan)
  return jax.lax.dynamic_update_slice_in_dim(x, y, start, axis=1)


def _time_slices(
  cfg: QwenConfig,
  params,
  tokens,
  mask,
  cache: KVCache,
  tokens_per,
  dtype,
  attention="auto",
):
  """Appends the [B, T] chunk as slices of at most tokens_per columns;
  returns the updated cache and the last position's logits [B, V]."""
  T = tokens.shape[1]
  step = T if tokens_per <= 0 else min(tokens_per, T)
  for a in range(0, T, step):
    cols = slice(a, a + step)
    h, cache = unrolled.forward(
      cfg,
      params,
      tokens[:, cols],
      mask[:, cols],
      cache,
      dtype=dtype,
      attention=attention,
    )
  return cache, unrolled.logits(cfg, params, h[:, -1], dtype)


def _row_blocks(
  cfg, dtype, plan, params, cache: KVCache, tokens, mask, attention
):
  """The fori_loop over row blocks; returns the blocks' keys and values
  (split [D, Bd, K, S, H] per layer) and logits [D, Bd, V]."""
  Bd = cache.batch_size // plan.shards
  r = min(plan.rows, Bd)
  split = functools.partial(_split, plan=plan)
  ks, vs = tuple(map(split, cache.k)), tuple(map(split, cache.v))
  valid, next_pos = split(cache.valid), split(cache.next_pos)
  ids, msk = split(tokens), split(mask)
  out = split(jnp.zeros((cache.batch_size, cfg.vocab_size), jnp.float32))

  def body(j, carry):
    ks, vs, out = carry
    start = jnp.minimum(j * r, Bd - r)  # the last block may overlap
    take = functools.partial(_take, start=start, rows=r, plan=plan)
    piece = KVCache(
      k=tuple(map(take, ks)),
      v=tuple(map(take, vs)),
      valid=take(valid),  # the rows' state before this prefill
      end=cache.end,
      next_pos=take(next_pos),
    )
    piece, lg = _time_slices(
      cfg, params, take(ids), take(msk), piece, plan.tokens, dtype, attention
    )
    put = functools.partial(_put, start=start, plan=plan)
    ks = tuple(map(put, ks, piece.k))
    vs = tuple(map(put, vs, piece.v))
    return ks, vs, put(out, lg)

  n = -(-Bd // r)
  return jax.lax.fori_loop(0, n, body, (ks, vs, out))


@functools.partial(
  jax.jit,
  static_argnums=(0, 1, 2),
  static_argnames=("attention",),
  donate_argnums=(4,),
)
def prefill(
  cfg: QwenConfig,
  dtype,
  plan: PiecePlan,
  params,
  cache: KVCache,
  tokens,
  mask,
  attention="auto",
):
  """Appends the left-padded [B, T] chunk (mask [B, T], 1 = real token) to
  the donated cache in pieces; returns (cache, last position's logits
  [B, V] float32), as a whole-batch forward would. attention: the
  implementation name (`rla_jax.models.attention`)."""
  Bd = cache.batch_size // plan.shards
  if plan.rows <= 0 or plan.rows >= Bd:  # time slices only
    return _time_slices(
      cfg, params, tokens, mask, cache, plan.tokens, dtype, attention
    )
  ks, vs, out = _row_blocks(
    cfg, dtype, plan, params, cache, tokens, mask, attention
  )
  mask = mask.astype(bool)
  new = KVCache(
    k=tuple(_merge(x, plan) for x in ks),
    v=tuple(_merge(x, plan) for x in vs),
    valid=jax.lax.dynamic_update_slice(cache.valid, mask, (0, cache.end)),
    end=cache.end + tokens.shape[1],
    next_pos=cache.next_pos + mask.sum(1).astype(jnp.int32),
  )
  return new, _merge(out, plan)
