"""Key/value cache shared by prefill, decode and multi-turn continuation.

Layout: one key and one value buffer per layer, each [B, K, S, H] (a tuple
of L arrays, not one [L, ...] array: the layer-unrolled sampling forward,
`rla_jax.models.unrolled`, updates each layer's buffer in place with no
layer indexing; heads before slots: on CPU the [B, K, S, H] layout measured
1.2-1.4x faster than [B, S, K, H] for decode, see
../shared/spec/perf-anchors.md section 2.6).

All rows write at the same slot pointer `end`, so a chunk of T new tokens
goes to slots [end, end + T) for every row. Rows whose chunk is shorter are
left-padded inside the chunk; `valid[b, s]` marks which slots hold real
tokens, and `next_pos[b]` is the RoPE position the next real token of row b
gets (the number of real tokens seen so far). Padding therefore never
changes any row's positions or attention, which is what makes left padding
and turn-by-turn continuation exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rla_jax.models.config import QwenConfig

KV_AXES = ("batch", "kv_heads", "cache_slots", "head_dim")


@struct.dataclass
class KVCache:
  k: tuple[jax.Array, ...]  # L x [B, K, S, H]
  v: tuple[jax.Array, ...]  # L x [B, K, S, H]
  valid: jax.Array  # [B, S] bool: slot holds a real token
  end: jax.Array  # [] int32: next slot to write (same for every row)
  next_pos: jax.Array  # [B] int32: RoPE position of each row's next token

  @property
  def batch_size(self) -> int:
    return self.valid.shape[0]

  @property
  def num_slots(self) -> int:
    return self.valid.shape[1]


def init_cache(
  cfg: QwenConfig, batch_size: int, num_slots: int, dtype=jnp.float32
) -> KVCache:
  """An empty cache with room for `num_slots` tokens per row."""
  shape = (batch_size, cfg.num_kv_heads, num_slots, cfg.head_dim)
  L = cfg.num_layers
  return KVCache(
    k=tuple(jnp.zeros(shape, dtype) for _ in range(L)),
    v=tuple(jnp.zeros(shape, dtype) for _ in range(L)),
    valid=jnp.zeros((batch_size, num_slots), bool),
    end=jnp.zeros((), jnp.int32),
    next_pos=jnp.zeros((batch_size,), jnp.int32),
  )


def is_axes(x) -> bool:
  """True for one leaf of `cache_logical_axes` (a tuple of axis names)."""
  return isinstance(x, tuple) and all(isinstance(a, str) for a in x)


def cache_logical_axes(cfg: QwenConfig) -> KVCache:
  """Logical axis names of each cache array, in the cache's tree structure
  (map it against a cache with `jax.tree.map(..., is_leaf=is_axes)`)."""
  L = cfg.num_layers
  return KVCache(
    k=(KV_AXES,) * L,
    v=(KV_AXES,) * L,
    valid=("batch", "cache_slots"),
    end=(),
    next_pos=("batch",),
  )
