"""The sampler's KV caches: empty ones, grown ones, and the room a chunk
needs.

Caches are made and grown by jitted programs with explicit output
shardings, so every cache is placed exactly like the caches the prefill
and decode programs return: a session's first turn and its later turns
share compiled programs (an uncommitted fresh cache used to cost one extra
compile).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import KVCache, cache_logical_axes, init_cache
from rla_jax.sampling import programs
from rla_jax.sampling.placement import Placement


class KVCacheFactory:
  """Makes and grows a sampler's caches (one jitted program per shape).

  Args:
    cfg: the model's config (the cache's layers, heads and head size).
    placement: the sampler's mesh and rules.
    max_new_tokens: the sampler's static cap on tokens generated per call
      (every chunk needs room for them).
  """

  def __init__(
    self, cfg: QwenConfig, placement: Placement, max_new_tokens: int
  ):
    self.cfg = cfg
    self.placement = placement
    self.max_new_tokens = max_new_tokens
    self.dtype = None  # set by `follow`, with the device placement
    self._device = None
    self._makers = {}
    self._growers = {}

  def follow(self, params, dtype) -> None:
    """Makes later caches in `dtype`, committed (without a mesh) to the
    device(s) of `params`, like the programs' outputs."""
    self.dtype = dtype
    device = jax.tree.leaves(params)[0].sharding
    if isinstance(device, NamedSharding):  # e.g. a 1-device mesh
      device = NamedSharding(device.mesh, PartitionSpec())  # any rank
    self._device = device

  def new(self, batch: int, num_slots: int) -> KVCache:
    """An empty cache, made by a jitted program (one per shape) with
    explicit output shardings: on a mesh it is created in place, shard by
    shard; without one it is committed to the parameters' device."""
    key = (batch, num_slots, jnp.dtype(self.dtype).name)
    if key not in self._makers:
      make = functools.partial(
        init_cache, self.cfg, batch, num_slots, self.dtype
      )
      if self.placement.mesh is not None:
        out = self.placement.shardings(
          cache_logical_axes(self.cfg), jax.eval_shape(make)
        )
      else:  # committed to the parameters' device(s), like the outputs
        out = self._device
      self._makers[key] = jax.jit(make, out_shardings=out)
    return self._makers[key]()

  def grown(self, cache: KVCache, num_slots: int) -> KVCache:
    """`cache` with room for num_slots tokens per row: its slots copied to
    the front of a fresh cache (placed as `new` places one), the rest
    empty. One jitted copy per (old, new) shape, written into the donated
    fresh cache (`cache` is not donated: no output has its shape)."""
    new = self.new(cache.batch_size, num_slots)
    key = (cache.num_slots, num_slots, cache.batch_size)
    if key not in self._growers:
      self._growers[key] = jax.jit(
        programs.copy_slots,
        donate_argnums=(0,),
        out_shardings=jax.tree.map(lambda a: a.sharding, new),
      )
    return self._growers[key](new, cache)

  def check_room(self, used: int, chunk_bucket: int, num_slots: int) -> int:
    """The slots a chunk needs (used + its bucket + max_new_tokens), or a
    ValueError naming them when num_slots cannot hold them."""
    need = used + chunk_bucket + self.max_new_tokens
    if need > num_slots:
      raise ValueError(
        f"cache overflow: {used} slots used + chunk bucket {chunk_bucket} + "
        f"max_new_tokens {self.max_new_tokens} > {num_slots} slots"
      )
    return need
