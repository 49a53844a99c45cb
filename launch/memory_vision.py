"""Qwen3-VL terms of the memory model: screenshot sizes (the image
processor's `smart_resize`), the images a device encodes, and the vision
tower's FLOPs, activations and transients (analytical estimates of what
`rla_jax.models.qwen3_vl.vision` materialises; `launch/memory_model.py`
states the precision plan, `launch/activation_memory.py` the attention
terms they reuse).

Dimension letters: P patches of one screenshot, I images, Dv / Fv / Lv /
Nv / Hv the tower's hidden size, MLP size, depth, heads and head size, m
the spatial merge size (m^2 = merge_unit), E DeepStack mergers, D the text
model's hidden size.
"""

from __future__ import annotations

import math

from launch.activation_memory import (
  BF16,
  F32,
  attention_prefill_bytes,
  attention_train_bytes,
  local_dim,
)
from rla_jax.models.qwen3_vl import VisionConfig

# The image processor's pixel bounds (preprocessor_config.json of
# Qwen3-VL-8B-Instruct: size.shortest_edge / size.longest_edge, which are
# pixel counts, not edges).
MIN_PIXELS = 65536
MAX_PIXELS = 16777216


# ------------------------------------------------------------ screenshots
def smart_resize(
  height: int,
  width: int,
  factor: int,
  min_pixels: int = MIN_PIXELS,
  max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
  """The image processor's resize (transformers' Qwen2-VL `smart_resize`):
  each side rounded to a multiple of factor (= patch x merge), then both
  scaled by one beta into [min_pixels, max_pixels], aspect ratio kept."""
  if max(height, width) / min(height, width) > 200:
    raise ValueError(f"aspect ratio of {height}x{width} is over 200")
  h = round(height / factor) * factor
  w = round(width / factor) * factor
  if h * w > max_pixels:
    beta = math.sqrt(height * width / max_pixels)
    h = max(factor, math.floor(height / beta / factor) * factor)
    w = max(factor, math.floor(width / beta / factor) * factor)
  elif h * w < min_pixels:
    beta = math.sqrt(min_pixels / (height * width))
    h = math.ceil(height * beta / factor) * factor
    w = math.ceil(width * beta / factor) * factor
  return h, w


def screenshot_grid(
  v: VisionConfig,
  screen: tuple[int, int],
  min_pixels: int = MIN_PIXELS,
  max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
  """(h, w) patch grid of a (height, width) screenshot after `smart_resize`
  at factor patch_size x spatial_merge_size: the tower attends over
  P = h x w patches; the prompt holds h x w / m^2 merged tokens."""
  factor = v.patch_size * v.spatial_merge_size
  height, width = smart_resize(*screen, factor, min_pixels, max_pixels)
  return height // v.patch_size, width // v.patch_size


def screenshot_tokens(
  v: VisionConfig, screen: tuple[int, int], **bounds
) -> int:
  """Merged (image-pad) tokens of one screenshot: h x w / m^2 (bounds:
  `screenshot_grid`'s min_pixels / max_pixels)."""
  h, w = screenshot_grid(v, screen, **bounds)
  return h * w // v.merge_unit


def pow2_at_least(n: int) -> int:
  """Smallest power of two >= n (`qwen3_vl.inputs.image_batch` pads each
  grid's image count so)."""
  return 1 << (max(n, 1) - 1).bit_length()


def images_per_device(
  images_per_row: int, rows: int, batch_shards: int, sharded: bool
) -> int:
  """Images one device encodes for `rows` rows (the whole call or micro-
  batch) split over `batch_shards`: its own rows' images when sharded,
  else every image of the call (padded to a power of two), as the
  Sampler and the Learner place a call's pixels now (replicated)."""
  if not images_per_row:
    return 0
  if sharded:
    return -(-rows // batch_shards) * images_per_row
  return pow2_at_least(rows * images_per_row)


# ------------------------------------------------------------ vision tower
def vision_flops_per_image(v: VisionConfig, P: int, D: int) -> dict:
  """Forward FLOPs of the tower on one image of P patches:
  matmul = 2 P (Cp Dv + Lv (3Dv^2 + Dv^2 + 2 Dv Fv)) + 2 (P / m^2)
    (1 + E) (Q^2 + Q D), Q = m^2 Dv (patch embedding, blocks, the final
    and E DeepStack mergers);
  attention = 4 Lv Nv Hv P^2 (QK^T and PV, bidirectional over the image)."""
  Dv, Fv, Lv = v.hidden_size, v.intermediate_size, v.depth
  Q, E = v.merge_unit * Dv, len(v.deepstack_visual_indexes)
  blocks = Lv * (4 * Dv * Dv + 2 * Dv * Fv)
  matmul = 2 * P * (v.patch_dim * Dv + blocks)
  matmul += 2 * (P // v.merge_unit) * (1 + E) * (Q * Q + Q * D)
  attention = 4 * Lv * v.num_heads * v.head_dim * P * P
  return {"matmul": matmul, "attention": attention}


def image_feature_bytes(v: VisionConfig, images: int, P: int, D: int) -> int:
  """The tower's outputs kept for the text forward: features and E
  DeepStack features, (1 + E) x [images x P / m^2, D] bf16."""
  E = len(v.deepstack_visual_indexes)
  return (1 + E) * images * (P // v.merge_unit) * D * BF16


def vision_encode_bytes(
  v: VisionConfig, images: int, P: int, tensor: int, attention: str
) -> int:
  """One vision layer's transient while encoding I images (inference):
  the attention transient of a bidirectional [I, Nv, P, P] attention
  (`attention_prefill_bytes` with S = P, K = Nv) + 6 B per MLP element
  [I, P, Fv] + 12 B per hidden element [I, P, Dv] (bf16 x, f32 residual
  and norm) + 6 B per q/k/v element [I, P, 3 Dv] + the f32 pixels
  [I, P, Cp]. Heads and the MLP split over tensor (SAMPLE_RULES)."""
  if not images:
    return 0
  Nv = local_dim(v.num_heads, tensor)
  Fv = local_dim(v.intermediate_size, tensor)
  Hv, Dv = v.head_dim, v.hidden_size
  att = attention_prefill_bytes(images, Nv, Nv, P, P, Hv, attention)
  return (
    att
    + images * P * Fv * 6
    + images * P * Dv * 12
    + images * P * 3 * Nv * Hv * 2
    + images * P * v.patch_dim * F32
  )


def vision_train_activation_bytes(
  v: VisionConfig, images: int, P: int, D: int, tensor: int, attention: str
) -> dict[str, int]:
  """Activation bytes of the tower on I images in a training step.

  The tower's layer scan has no remat, so every layer keeps its forward:
  saved = Lv x (I P (16 Dv + 12 Dv_l + 4 Fv_l) + the attention's saved
    bytes, `attention_train_bytes` with T = P, K = Nv): per element bf16
    x, f32 norm, bf16 h (x2 norms), q/k/v + rotated q, k + attention
    output (Dv_l = Nv_l Hv, heads split over tensor), fc1 and gelu outputs;
  layer: one layer's backward working set, as the text layer's (the
    attention's layer bytes + 12 B per [I, P, Fv_l] + 24 B per [I, P, Dv]);
  io: the f32 pixels [I, P, Cp] + the merged features and their f32
    gradients, (1 + E) [I P / m^2, D] x (2 + 4) B."""
  if not images:
    return {"saved": 0, "layer": 0, "io": 0}
  Nv = local_dim(v.num_heads, tensor)
  Fv = local_dim(v.intermediate_size, tensor)
  Hv, Dv, Lv = v.head_dim, v.hidden_size, v.depth
  att = attention_train_bytes(images, Nv, Nv, P, Hv, attention)
  IP = images * P
  saved = Lv * (IP * (16 * Dv + 12 * Nv * Hv + 4 * Fv) + att["saved"])
  layer = att["layer"] + IP * Fv * 12 + IP * Dv * 24
  E = len(v.deepstack_visual_indexes)
  io = IP * v.patch_dim * F32 + (1 + E) * (IP // v.merge_unit) * D * 6
  return {"saved": saved, "layer": layer, "io": io}


def vision_layer_params(v: VisionConfig, D: int) -> int:
  """One vision block's and the final merger's weights (what fsdp gathers
  at a time in the tower)."""
  Dv, Fv, Q = v.hidden_size, v.intermediate_size, v.merge_unit * v.hidden_size
  return 4 * Dv * Dv + 2 * Dv * Fv + Q * Q + Q * D
