"""Image features placed into a decoder's token stream (Qwen3-VL).

A prompt with images holds one image-pad token per merged image patch. The
vision tower (`rla_jax.models.qwen3_vl.vision`) turns every image of a call
into rows of one feature table; `VisualTokens.feature_rows` says, for each
token, which table row replaces its embedding (-1: a text token). The same
tokens get DeepStack features added after the first E decoder layers.

Dimension letters: B batch, T tokens, M feature-table rows, E DeepStack
layers, D hidden.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class VisualTokens:
  """feature_rows: [B, T] int32, the feature-table row of each image-pad
  token, -1 elsewhere; features: [M, D] merged image features; deepstack:
  [E, M, D] the DeepStack features of the same rows (E may be 0)."""

  feature_rows: jax.Array
  features: jax.Array
  deepstack: jax.Array

  @property
  def num_deepstack(self) -> int:
    return self.deepstack.shape[0]

  @property
  def mask(self) -> jax.Array:
    """[B, T] bool: the image-pad tokens."""
    return self.feature_rows >= 0


def place_features(x: jax.Array, visual: VisualTokens) -> jax.Array:
  """x [B, T, D] token embeddings with each image-pad token's embedding
  replaced by its feature row: x'[b, t] = features[feature_rows[b, t]]
  where feature_rows[b, t] >= 0, else x[b, t]."""
  rows = jnp.maximum(visual.feature_rows, 0)
  picked = visual.features.astype(x.dtype)[rows]
  return jnp.where(visual.mask[..., None], picked, x)


def add_deepstack(x: jax.Array, visual: VisualTokens, layer) -> jax.Array:
  """DeepStack after decoder layer `layer` (a Python or traced int):
  x'[b, t] = x[b, t] + deepstack[layer, feature_rows[b, t]] at image-pad
  tokens when layer < E; x unchanged otherwise. x: [B, T, D]."""
  E = visual.num_deepstack
  if E == 0:
    return x
  rows = jnp.maximum(visual.feature_rows, 0)
  table = visual.deepstack[jnp.minimum(layer, E - 1)].astype(x.dtype)
  on = visual.mask[..., None] & (layer < E)
  return jnp.where(on, x + table[rows], x)
