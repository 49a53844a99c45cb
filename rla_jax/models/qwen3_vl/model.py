"""Qwen3-VL (`Qwen3VLForConditionalGeneration`) in Flax NNX.

`Qwen3VL` is the text decoder (`rla_jax.models.qwen.Qwen`: a Qwen3 with
interleaved M-RoPE, stacked and scanned for training, unrolled over the KV
cache for sampling) plus a `VisionTower`. Everything that takes a text
model (the sampler, the Learner, log-probs, checkpoints) takes a Qwen3VL;
images enter through two extra inputs:

  positions [B, T, 3]  M-RoPE (temporal, height, width) positions
                       (`inputs.mrope_offsets`; text tokens carry the same
                       value on the three axes);
  visual               `VisualTokens`: the image features placed at the
                       image-pad tokens, and the DeepStack features added
                       after the first E decoder layers,

built by `visual_tokens(images, feature_rows)` from an `ImageBatch` (the
pixels of a call's images, grouped by patch grid so each group is one
static shape).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx, struct

from rla_jax.models.qwen import Qwen
from rla_jax.models.qwen3_vl.config import Qwen3VLConfig
from rla_jax.models.qwen3_vl.vision import VisionTower
from rla_jax.models.visual_tokens import VisualTokens


@struct.dataclass
class ImageBatch:
  """The images of one call, grouped by patch grid.

  pixels: one [I_g, P_g, Cp] array per group (the image processor's
  patches, P_g = h_g x w_g); grids: the static (h_g, w_g) of each group.
  The feature table the tower makes is the groups' merged features
  concatenated in this order, I_g x P_g / m^2 rows per group (padding
  images included: they are encoded and never referenced).
  """

  pixels: tuple[jax.Array, ...]
  grids: tuple[tuple[int, int], ...] = struct.field(pytree_node=False)


def encode_images(
  vision: VisionTower, images: ImageBatch
) -> tuple[jax.Array, jax.Array]:
  """The feature table of a call's images: features [M, D] and DeepStack
  features [E, M, D], M = sum_g I_g P_g / m^2 (groups in order)."""
  feats, deep = [], []
  for pixels, grid in zip(images.pixels, images.grids, strict=True):
    f, d = vision(pixels, grid)
    feats.append(f.reshape(-1, f.shape[-1]))
    deep.append(d.reshape(d.shape[0], -1, d.shape[-1]))
  return jnp.concatenate(feats), jnp.concatenate(deep, axis=1)


class Qwen3VL(Qwen):
  """Qwen3-VL: a Qwen3 decoder (`Qwen`, with self.cfg the text config)
  and its vision tower (self.vision). `vl_cfg`: the whole configuration."""

  def __init__(
    self,
    cfg: Qwen3VLConfig,
    *,
    rngs: nnx.Rngs,
    dtype=jnp.float32,
    param_dtype=jnp.float32,
    remat: str = "none",
    attention: str = "auto",
  ):
    super().__init__(
      cfg.text,
      rngs=rngs,
      dtype=dtype,
      param_dtype=param_dtype,
      remat=remat,
      attention=attention,
    )
    self.vl_cfg = cfg
    self.vision = VisionTower(
      cfg.vision,
      rngs=rngs,
      dtype=dtype,
      param_dtype=param_dtype,
      attention=attention,
    )

  def visual_tokens(
    self, images: ImageBatch, feature_rows: jax.Array
  ) -> VisualTokens:
    """`VisualTokens` for a token batch whose image-pad tokens take
    feature-table rows feature_rows [B, T] (-1: a text token)."""
    features, deepstack = encode_images(self.vision, images)
    return VisualTokens(
      feature_rows=feature_rows.astype(jnp.int32),
      features=features,
      deepstack=deepstack,
    )
