"""Qwen3-VL's vision tower in Flax NNX.

pixels [I, P, Cp] (I images of one grid, P = h x w patches in the image
processor's spatial-merge-block order) -> merged features [I, P/m^2, D] and
DeepStack features [E, I, P/m^2, D]:

  x = pixels @ W_patch + b                         (the 3-D patch conv)
  x += sum_k pos_embed[tap_k] * weight_k           (learned 2-D positions,
                                                    bilinearly resampled)
  x = block_l(x) for l < depth, with 2-D RoPE      (pre-LayerNorm ViT blocks)
  features  = merger(x)                            (2x2 patches -> 1 token)
  deepstack = [merger_e(x after block e) for e in deepstack_visual_indexes]

Blocks are stacked along L and run with `lax.scan` in segments that end at
the DeepStack layers. Images attend within themselves only (one frame per
image: grid t = 1). The grid geometry (patch rows/columns, interpolation
taps) depends only on the static (h, w), so it is numpy, computed at trace
time.

Dimension letters as in `qwen3_vl.config`: I images, P patches, Dv, Nv,
Hv, Fv, Cp, m; D the text hidden size; E DeepStack layers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rla_jax.models.attention import attention as masked_attention
from rla_jax.models.ops import apply_rope, dense
from rla_jax.models.qwen import init_param
from rla_jax.models.qwen3_vl.config import VisionConfig

LN_EPS = 1e-6

BLOCK_PARAM_AXES = {
  "norm1_w": ("layers", "norm"),
  "norm1_b": ("layers", "norm"),
  "norm2_w": ("layers", "norm"),
  "norm2_b": ("layers", "norm"),
  "wqkv": ("layers", "vision_embed", "qkv", "vision_heads", "head_dim"),
  "bqkv": ("layers", "qkv", "vision_heads", "head_dim"),
  "wo": ("layers", "vision_heads", "head_dim", "vision_embed"),
  "bo": ("layers", "norm"),
  "fc1": ("layers", "vision_embed", "vision_mlp"),
  "b1": ("layers", "vision_mlp"),
  "fc2": ("layers", "vision_mlp", "vision_embed"),
  "b2": ("layers", "norm"),
}

MERGER_PARAM_AXES = {
  "norm_w": ("norm",),
  "norm_b": ("norm",),
  "fc1": ("vision_merge", "vision_mlp"),
  "b1": ("vision_mlp",),
  "fc2": ("vision_mlp", "embed"),
  "b2": ("norm",),
}


def block_param_shapes(cfg: VisionConfig) -> dict[str, tuple[int, ...]]:
  L, D, N, H, F = (
    cfg.depth,
    cfg.hidden_size,
    cfg.num_heads,
    cfg.head_dim,
    cfg.intermediate_size,
  )
  return {
    "norm1_w": (L, D),
    "norm1_b": (L, D),
    "norm2_w": (L, D),
    "norm2_b": (L, D),
    "wqkv": (L, D, 3, N, H),
    "bqkv": (L, 3, N, H),
    "wo": (L, N, H, D),
    "bo": (L, D),
    "fc1": (L, D, F),
    "b1": (L, F),
    "fc2": (L, F, D),
    "b2": (L, D),
  }


def merger_param_shapes(
  cfg: VisionConfig, postshuffle: bool
) -> dict[str, tuple[int, ...]]:
  """One patch merger; the DeepStack mergers normalise after the 2x2
  shuffle (postshuffle: norm over m^2 Dv), the final one before it."""
  merged = cfg.hidden_size * cfg.merge_unit
  norm = merged if postshuffle else cfg.hidden_size
  return {
    "norm_w": (norm,),
    "norm_b": (norm,),
    "fc1": (merged, merged),
    "b1": (merged,),
    "fc2": (merged, cfg.out_hidden_size),
    "b2": (cfg.out_hidden_size,),
  }


# ------------------------------------------------------- grid geometry


def patch_rows_cols(h: int, w: int, merge: int) -> tuple[np.ndarray, ...]:
  """(row, col) [P] of each patch of an h x w grid in spatial-merge-block
  order: blocks of m x m patches, row-major, each block row-major."""
  within = np.arange(h * w)
  blocks_w = w // merge
  in_col = within % merge
  in_row = (within // merge) % merge
  block_col = (within // (merge * merge)) % blocks_w
  block_row = within // (merge * merge * blocks_w)
  return block_row * merge + in_row, block_col * merge + in_col


def _axis_taps(index: np.ndarray, size: int, side: int):
  """Bilinear (align_corners=True) taps into a side-long table for target
  positions index of an axis of length size: taps, weights [P, 2]."""
  src = index.astype(np.float32) * (side - 1) / max(size - 1, 1)
  floor = np.floor(src)
  offsets = np.arange(2)
  taps = np.clip(floor[:, None].astype(np.int64) + offsets, 0, side - 1)
  weights = np.clip(
    1 - np.abs(src[:, None] - floor[:, None] - offsets), 0, None
  )
  return taps, weights.astype(np.float32)


def position_embedding_taps(cfg: VisionConfig, h: int, w: int):
  """The learned [side^2, Dv] position grid resampled to an h x w image
  (transformers' bilinear `align_corners=True` interpolation): indices and
  weights [P, 4]; pos[p] = sum_k table[indices[p, k]] * weights[p, k]."""
  row, col = patch_rows_cols(h, w, cfg.spatial_merge_size)
  side = cfg.grid_side
  h_taps, h_w = _axis_taps(row, h, side)
  w_taps, w_w = _axis_taps(col, w, side)
  idx = (h_taps[:, :, None] * side + w_taps[:, None, :]).reshape(-1, 4)
  wts = (h_w[:, :, None] * w_w[:, None, :]).reshape(-1, 4)
  return idx.astype(np.int32), wts


def rope_tables(cfg: VisionConfig, h: int, w: int):
  """The 2-D RoPE of the patches: positions [P, 2] (row, col), and per
  pair [Hv/2] its axis (first half rows, second half columns) and
  frequency theta^(-2i / (Hv/2)) for i < Hv/4 (the same in both halves)."""
  row, col = patch_rows_cols(h, w, cfg.spatial_merge_size)
  quarter = cfg.head_dim // 4
  inv = 1.0 / (
    np.float32(cfg.rope_theta)
    ** (np.arange(0, 2 * quarter, 2, dtype=np.float32) / (2 * quarter))
  )
  pair_axis = np.repeat(np.arange(2), quarter)
  inv_freq = np.concatenate([inv, inv]).astype(np.float32)
  return np.stack([row, col], -1).astype(np.int32), pair_axis, inv_freq


def check_grid(cfg: VisionConfig, h: int, w: int) -> None:
  """Raises ValueError unless an h x w patch grid is one the tower takes."""
  m = cfg.spatial_merge_size
  if h <= 0 or w <= 0 or h % m or w % m:
    raise ValueError(
      f"image grid {h}x{w} patches: both sides must be positive multiples "
      f"of spatial_merge_size {m}"
    )


# ------------------------------------------------------------- modules


def layer_norm(x, w, b):
  """(x - mean) / sqrt(var + 1e-6) * w + b over the last axis, float32."""
  x32 = x.astype(jnp.float32)
  mean = x32.mean(-1, keepdims=True)
  var = ((x32 - mean) ** 2).mean(-1, keepdims=True)
  y = (x32 - mean) * jax.lax.rsqrt(var + LN_EPS)
  return (y * w.astype(jnp.float32) + b.astype(jnp.float32)).astype(x.dtype)


def _init_kind(name: str) -> str:
  if name.endswith("_w") and name.startswith("norm"):
    return "ones"
  if name.startswith("b") or name.endswith("_b"):
    return "zeros"
  return "normal"


class VisionTower(nnx.Module):
  """The Qwen3-VL vision encoder with its patch mergers."""

  def __init__(
    self,
    cfg: VisionConfig,
    *,
    rngs: nnx.Rngs,
    dtype=jnp.float32,
    param_dtype=jnp.float32,
    attention: str = "auto",
  ):
    self.cfg = cfg
    self.dtype = dtype
    self.attention = attention
    self.patch_w = init_param(
      rngs,
      (cfg.patch_dim, cfg.hidden_size),
      "normal",
      param_dtype,
      ("vision_patch", "vision_embed"),
    )
    self.patch_b = init_param(
      rngs, (cfg.hidden_size,), "zeros", param_dtype, ("norm",)
    )
    self.pos_embed = init_param(
      rngs,
      (cfg.num_position_embeddings, cfg.hidden_size),
      "normal",
      param_dtype,
      ("vision_positions", "vision_embed"),
    )
    self.blocks = nnx.Dict(
      {
        name: init_param(
          rngs, shape, _init_kind(name), param_dtype, BLOCK_PARAM_AXES[name]
        )
        for name, shape in block_param_shapes(cfg).items()
      }
    )
    self.merger = nnx.Dict(
      {
        name: init_param(
          rngs, shape, _init_kind(name), param_dtype, MERGER_PARAM_AXES[name]
        )
        for name, shape in merger_param_shapes(cfg, False).items()
      }
    )
    E = len(cfg.deepstack_visual_indexes)
    self.deepstack_mergers = nnx.Dict(
      {
        name: init_param(
          rngs,
          (E, *shape),
          _init_kind(name),
          param_dtype,
          ("deepstack", *MERGER_PARAM_AXES[name]),
        )
        for name, shape in merger_param_shapes(cfg, True).items()
      }
    )

  def _block(self, p, x, positions, pair_axis, inv_freq):
    """One pre-LayerNorm ViT block. x: [I, P, Dv] -> [I, P, Dv]."""
    dt = self.dtype
    n_img, P, _ = x.shape
    h = layer_norm(x, p["norm1_w"], p["norm1_b"])
    qkv = dense(h, p["wqkv"].astype(dt)) + p["bqkv"].astype(dt)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [I, P, Nv, Hv]
    q = apply_rope(q, positions, inv_freq, pair_axis)
    k = apply_rope(k, positions, inv_freq, pair_axis)
    # Bidirectional within the image: every query sits at the last slot.
    attn = masked_attention(
      q,
      k.transpose(0, 2, 1, 3),
      v.transpose(0, 2, 1, 3),
      jnp.ones((n_img, P), bool),
      jnp.full((P,), P - 1, jnp.int32),
      implementation=self.attention,
    )
    x = x + dense(attn, p["wo"].astype(dt), num_in=2) + p["bo"].astype(dt)
    h = layer_norm(x, p["norm2_w"], p["norm2_b"])
    h = jax.nn.gelu(
      dense(h, p["fc1"].astype(dt)) + p["b1"].astype(dt), approximate=True
    )
    return x + dense(h, p["fc2"].astype(dt)) + p["b2"].astype(dt)

  def _merge(self, p, x, postshuffle: bool):
    """m x m neighbouring patches -> one D-sized token: [I, P, Dv] ->
    [I, P/m^2, D] (LayerNorm, then fc1, exact GELU, fc2)."""
    dt = self.dtype
    n_img, P, Dv = x.shape
    merged = (n_img, P // self.cfg.merge_unit, Dv * self.cfg.merge_unit)
    if postshuffle:
      x = layer_norm(x.reshape(merged), p["norm_w"], p["norm_b"])
    else:
      x = layer_norm(x, p["norm_w"], p["norm_b"]).reshape(merged)
    x = jax.nn.gelu(
      dense(x, p["fc1"].astype(dt)) + p["b1"].astype(dt), approximate=False
    )
    return dense(x, p["fc2"].astype(dt)) + p["b2"].astype(dt)

  def __call__(self, pixels: jax.Array, grid: tuple[int, int]):
    """pixels [I, P, Cp] of I images on one static (h, w) patch grid ->
    (features [I, P/m^2, D], deepstack [E, I, P/m^2, D])."""
    cfg, dt = self.cfg, self.dtype
    h, w = grid
    check_grid(cfg, h, w)
    _, P, Cp = pixels.shape
    if P != h * w or Cp != cfg.patch_dim:
      raise ValueError(
        f"pixels of shape {pixels.shape} do not fit a {h}x{w} grid of "
        f"{cfg.patch_dim}-value patches"
      )
    x = dense(pixels.astype(dt), self.patch_w[...].astype(dt))
    x = x + self.patch_b[...].astype(dt)
    idx, wts = position_embedding_taps(cfg, h, w)
    table = self.pos_embed[...].astype(jnp.float32)
    pos = (table[jnp.asarray(idx)] * jnp.asarray(wts)[..., None]).sum(1)
    x = x + pos.astype(dt)[None]
    positions, pair_axis, inv_freq = rope_tables(cfg, h, w)
    positions = jnp.asarray(positions)[None]  # [1, P, 2]
    stacked = {name: v[...] for name, v in self.blocks.items()}

    def body(x, p):
      return self._block(p, x, positions, pair_axis, inv_freq), None

    deepstack, start = [], 0
    ds_params = {k: v[...] for k, v in self.deepstack_mergers.items()}
    for e, stop in enumerate(cfg.deepstack_visual_indexes):
      piece = {k: v[start : stop + 1] for k, v in stacked.items()}
      x, _ = jax.lax.scan(body, x, piece)
      merger = {k: v[e] for k, v in ds_params.items()}
      deepstack.append(self._merge(merger, x, postshuffle=True))
      start = stop + 1
    if start < cfg.depth:
      piece = {k: v[start:] for k, v in stacked.items()}
      x, _ = jax.lax.scan(body, x, piece)
    features = self._merge(
      {k: v[...] for k, v in self.merger.items()}, x, postshuffle=False
    )
    if deepstack:
      return features, jnp.stack(deepstack)
    return features, jnp.zeros((0, *features.shape), features.dtype)
