"""Host-side inputs of Qwen3-VL: image patches, image-pad tokens, M-RoPE
positions and feature rows (numpy; nothing here is traced).

A prompt holds, per image, `<|vision_start|>`, one `<|image_pad|>` per
merged patch (h x w / m^2 of them) and `<|vision_end|>`. The M-RoPE rule
(transformers' `Qwen3VLModel.get_rope_index`): text tokens count up on all
three axes; an image starting at position s puts its merged patch (r, c) at
(s, s + r, s + c), and the text after it resumes at s + max(h, w) / m.
All positions are a row's start plus an offset that depends only on the
row's own tokens, so `mrope_offsets` returns offsets from 0 and the
sampler adds each row's running position (`KVCache.next_pos`).

Dimension letters: B rows, T tokens, P patches, Cp values per patch, m the
spatial merge size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.models.qwen3_vl.config import Qwen3VLConfig
from rla_jax.models.qwen3_vl.model import ImageBatch
from rla_jax.models.qwen3_vl.vision import check_grid


@dataclasses.dataclass(frozen=True)
class Image:
  """One preprocessed image: patches [P, Cp] in merge-block order on an
  (h, w) patch grid."""

  patches: np.ndarray
  grid: tuple[int, int]

  def tokens(self, merge: int) -> int:
    """Image-pad tokens it takes: (h / m) x (w / m)."""
    h, w = self.grid
    return (h // merge) * (w // merge)


def image_processor(cfg: Qwen3VLConfig, preprocessor: dict | None = None):
  """transformers' torch-free `Qwen2VLImageProcessorPil`, configured from a
  checkpoint's preprocessor_config.json dict, or from the vision config
  (patch, temporal patch and merge sizes) when there is none."""
  from transformers import Qwen2VLImageProcessorPil

  v = cfg.vision
  kwargs = dict(preprocessor or {})
  kwargs.pop("image_processor_type", None)
  kwargs.pop("processor_class", None)
  kwargs.update(
    patch_size=v.patch_size,
    temporal_patch_size=v.temporal_patch_size,
    merge_size=v.spatial_merge_size,
  )
  return Qwen2VLImageProcessorPil(**kwargs)


def load_image_processor(model_dir: str, cfg: Qwen3VLConfig):
  """`image_processor` configured from model_dir/preprocessor_config.json
  (when the directory has one)."""
  import json
  import os

  path = os.path.join(model_dir, "preprocessor_config.json")
  preprocessor = None
  if os.path.isfile(path):
    with open(path) as f:
      preprocessor = json.load(f)
  return image_processor(cfg, preprocessor)


def preprocess(processor, images: Sequence) -> list[Image]:
  """PIL images or uint8 [H, W, 3] arrays -> `Image`s (one frame each)."""
  out = []
  for img in images:
    enc = processor(images=[img], return_tensors="np")
    t, h, w = (int(x) for x in enc["image_grid_thw"][0])
    if t != 1:
      raise ValueError(f"an image must be one frame, got grid t={t}")
    out.append(Image(np.asarray(enc["pixel_values"], np.float32), (h, w)))
  return out


def expand_image_pads(
  token_ids: Sequence[int], images: Sequence[Image], cfg: Qwen3VLConfig
) -> list[int]:
  """Each single image-pad token of a templated prompt becomes the image's
  h x w / m^2 pad tokens (the processor's expansion), images in order."""
  pad, m = cfg.image_token_id, cfg.vision.spatial_merge_size
  count = sum(1 for t in token_ids if t == pad)
  if count != len(images):
    raise ValueError(
      f"prompt has {count} image-pad tokens for {len(images)} images"
    )
  it = iter(images)
  out: list[int] = []
  for t in token_ids:
    out.extend([pad] * next(it).tokens(m) if t == pad else [t])
  return out


def mrope_offsets(
  token_ids: Sequence[int], images: Sequence[Image], cfg: Qwen3VLConfig
) -> np.ndarray:
  """[n, 3] int32 M-RoPE positions of a row's tokens, from 0 (module
  docstring). Each run of image-pad tokens is consumed image by image;
  a run whose length does not match its images raises ValueError."""
  pad, m = cfg.image_token_id, cfg.vision.spatial_merge_size
  ids = np.asarray(token_ids)
  out = np.zeros((len(ids), 3), np.int32)
  it = iter(images)
  i = cur = 0
  while i < len(ids):
    if ids[i] != pad:
      out[i] = cur
      cur += 1
      i += 1
      continue
    image = next(it, None)
    if image is None:
      raise ValueError(f"image-pad token at {i} has no image left")
    h, w = image.grid[0] // m, image.grid[1] // m
    run = ids[i : i + h * w]
    if len(run) != h * w or np.any(run != pad):
      raise ValueError(
        f"image {image.grid} needs {h * w} image-pad tokens at {i}, "
        f"found {int(np.sum(np.cumprod(run == pad)))}"
      )
    r, c = np.divmod(np.arange(h * w), w)
    out[i : i + h * w] = np.stack([np.full(h * w, cur), cur + r, cur + c], -1)
    cur += max(h, w)
    i += h * w
  if next(it, None) is not None:
    raise ValueError("more images than image-pad runs in the row")
  return out


def _bucket(n: int, minimum: int) -> int:
  """Smallest power of two >= max(n, minimum)."""
  n = max(n, minimum, 1)
  return 1 << (n - 1).bit_length()


def image_batch(
  rows_images: Sequence[Sequence[Image]],
  cfg: Qwen3VLConfig,
  min_images_per_grid: int = 1,
  grids: Sequence[tuple[int, int]] = (),
) -> tuple[ImageBatch, list[list[int]]]:
  """Groups a call's images (rows in order, each row's in order) by patch
  grid. Returns the `ImageBatch` (numpy pixels; each group's image count
  padded to a power of two >= min_images_per_grid with zero images) and,
  per row and image, the feature-table row of its first merged patch.
  Every grid of `grids` gets a group even when no image has it, so calls
  over a fixed set of grids share one structure (one compiled program per
  batch shape)."""
  m = cfg.vision.spatial_merge_size
  order: dict[tuple[int, int], list[tuple[int, int]]] = {
    tuple(g): [] for g in grids
  }
  for r, images in enumerate(rows_images):
    for j, image in enumerate(images):
      check_grid(cfg.vision, *image.grid)
      if image.patches.shape != (
        image.grid[0] * image.grid[1],
        cfg.vision.patch_dim,
      ):
        raise ValueError(
          f"row {r} image {j}: patches {image.patches.shape} do not fit "
          f"grid {image.grid} with {cfg.vision.patch_dim} values per patch"
        )
      order.setdefault(image.grid, []).append((r, j))
  pixels, grids, offset = [], [], 0
  first_row = [[0] * len(images) for images in rows_images]
  for grid in sorted(order):
    members = order[grid]
    count = _bucket(len(members), min_images_per_grid)
    P = grid[0] * grid[1]
    block = np.zeros((count, P, cfg.vision.patch_dim), np.float32)
    for k, (r, j) in enumerate(members):
      block[k] = rows_images[r][j].patches
      first_row[r][j] = offset + k * (P // (m * m))
    pixels.append(block)
    grids.append(grid)
    offset += count * (P // (m * m))
  return ImageBatch(pixels=tuple(pixels), grids=tuple(grids)), first_row


def feature_rows(
  token_ids: Sequence[int],
  images: Sequence[Image],
  first_rows: Sequence[int],
  cfg: Qwen3VLConfig,
) -> np.ndarray:
  """[n] int32: each image-pad token's feature-table row (image j's k-th
  pad token takes first_rows[j] + k), -1 for text tokens."""
  pad, m = cfg.image_token_id, cfg.vision.spatial_merge_size
  out = np.full(len(token_ids), -1, np.int32)
  where = np.flatnonzero(np.asarray(token_ids) == pad)
  start = 0
  for image, first in zip(images, first_rows, strict=True):
    n = image.tokens(m)
    out[where[start : start + n]] = first + np.arange(n)
    start += n
  if start != len(where):
    raise ValueError(f"{len(where)} image-pad tokens for images taking {start}")
  return out


@dataclasses.dataclass(frozen=True)
class ImageLayout:
  """A padded batch's image inputs: offsets [B, T, 3] (M-RoPE positions
  from each row's start; 0 on padding), feature_rows [B, T] (-1: text or
  padding) and the batch's `ImageBatch` (numpy)."""

  offsets: np.ndarray
  feature_rows: np.ndarray
  images: ImageBatch


def image_layout(
  rows_ids: Sequence[Sequence[int]],
  rows_images: Sequence[Sequence[Image]],
  length: int,
  batch: int,
  cfg: Qwen3VLConfig,
  images_per_grid: int = 1,
  align: str = "left",
  grids: Sequence[tuple[int, int]] = (),
) -> ImageLayout:
  """Lays out rows' image inputs as their tokens are padded: left-aligned
  (the sampler's prompts) or right-aligned ("right": training rows);
  rows beyond len(rows_ids) up to batch are empty. images_per_grid and
  grids: as `image_batch`."""
  if len(rows_images) != len(rows_ids):
    raise ValueError(f"{len(rows_images)} image lists for {len(rows_ids)} rows")
  padded = list(rows_images) + [[]] * (batch - len(rows_ids))
  images, first = image_batch(padded, cfg, images_per_grid, grids)
  offsets = np.zeros((batch, length, 3), np.int32)
  rows = np.full((batch, length), -1, np.int32)
  for b, (ids, imgs) in enumerate(zip(rows_ids, rows_images, strict=True)):
    n = len(ids)
    if n > length:
      raise ValueError(f"row {b} has {n} tokens, more than length {length}")
    span = slice(length - n, length) if align == "left" else slice(0, n)
    offsets[b, span] = mrope_offsets(ids, imgs, cfg)
    rows[b, span] = feature_rows(ids, imgs, first[b], cfg)
  return ImageLayout(offsets, rows, images)
