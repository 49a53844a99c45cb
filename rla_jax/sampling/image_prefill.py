"""Prefill of a chunk that holds images (Qwen3-VL), for `Sampler`.

One jitted program encodes the call's images with the vision tower, places
their features at the image-pad tokens and appends the chunk to the cache
with M-RoPE positions (each row's `KVCache.next_pos` plus the chunk's
offsets, `qwen3_vl.inputs.mrope_offsets`); the cache's next_pos then points
one past the row's largest position, so decode and later text-only turns
continue exactly as transformers' rope deltas do. The chunk runs as one
whole-batch forward (the row / time pieces of `sampling.prefill` are for
text chunks).

Compiled shapes: the batch and chunk buckets, and per image grid its image
count rounded up to a power of two (`inputs.image_batch`). With the
sampler's `image_grids` set, every call carries a group for each allowed
grid, so image chunks compile one program per batch and chunk bucket.

Dimension letters: B rows, T chunk tokens, V vocabulary.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from rla_jax.models import unrolled
from rla_jax.models.kv_cache import KVCache
from rla_jax.models.qwen3_vl import inputs as vision_inputs
from rla_jax.models.qwen3_vl.config import Qwen3VLConfig
from rla_jax.models.qwen3_vl.model import ImageBatch, encode_images
from rla_jax.models.visual_tokens import VisualTokens


def check_grids(rows_images, allowed_grids) -> None:
  """Raises ValueError naming the first image whose patch grid is not in
  allowed_grids (None: any grid)."""
  for r, images in enumerate(rows_images):
    for j, image in enumerate(images):
      if allowed_grids is not None and tuple(image.grid) not in allowed_grids:
        raise ValueError(
          f"row {r} image {j}: patch grid {tuple(image.grid)} is not one of "
          f"the sampler's image_grids {sorted(allowed_grids)}"
        )


def image_chunk(
  rows: Sequence[Sequence[int]],
  rows_images: Sequence[Sequence[vision_inputs.Image]],
  length: int,
  batch: int,
  cfg: Qwen3VLConfig,
  allowed_grids: Sequence[tuple[int, int]] | None,
  images_per_grid: int,
) -> vision_inputs.ImageLayout:
  """Checks a chunk's images and lays them out like `left_pad` lays out
  its tokens (`inputs.image_layout`; every allowed grid gets a group, so
  image chunks of one batch shape share one program). Raises ValueError
  (before anything compiles) for a grid not in allowed_grids (when given)
  or image-pad tokens that do not match a row's images."""
  check_grids(rows_images, allowed_grids)
  return vision_inputs.image_layout(
    rows,
    rows_images,
    length,
    batch,
    cfg,
    images_per_grid,
    align="left",
    grids=sorted(allowed_grids or ()),
  )


@functools.partial(
  jax.jit,
  static_argnums=(0, 1, 2),
  static_argnames=("attention",),
  donate_argnums=(5,),
)
def prefill_with_images(
  cfg,
  dtype,
  vision_graphdef,
  params,
  vision_state,
  cache: KVCache,
  tokens,
  mask,
  offsets,
  feature_rows,
  images: ImageBatch,
  attention="auto",
):
  """Appends a chunk with images to the donated cache; returns (cache, the
  last position's logits [B, V] float32)."""
  vision = nnx.merge(vision_graphdef, vision_state)
  features, deepstack = encode_images(vision, images)
  visual = VisualTokens(feature_rows, features, deepstack)
  positions = cache.next_pos[:, None, None] + offsets
  h, cache = unrolled.forward(
    cfg,
    params,
    tokens,
    mask,
    cache,
    positions,
    dtype,
    attention=attention,
    visual=visual,
  )
  return cache, unrolled.logits(cfg, params, h[:, -1], dtype)


def cast_floating(state, dtype):
  """The state with floating leaves cast to dtype (the sampling copy)."""
  return jax.tree.map(
    lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x,
    state,
  )
