"""Per-device bytes of the two phases of an RL step, training one model and
sampling from it, summed from the memory model's terms
(`launch/param_memory.py`, `launch/activation_memory.py`,
`launch/memory_vision.py` for Qwen3-VL).
"""

from __future__ import annotations

import math

from launch.activation_memory import (
  BF16,
  F32,
  attention_kind,
  attention_prefill_bytes,
  kv_cache_bytes_per_device,
  local_dim,
  train_activation_bytes,
)
from launch.memory_model import (
  Workload,
)
from launch.memory_vision import (
  image_feature_bytes,
  images_per_device,
  screenshot_grid,
  vision_encode_bytes,
  vision_layer_params,
  vision_train_activation_bytes,
)
from launch.param_memory import (
  param_count,
  per_device_param_bytes,
  per_device_param_elems,
  text_config,
  vision_config,
)
from rla_jax import sharding as shd


# ------------------------------------------------------------ phases
def train_phase_bytes(
  cfg, mesh, T: int, wl: Workload, images_per_sample: int = 0
) -> dict[str, int]:
  """Per-device bytes while training one model (TRAIN_RULES mesh).

  Qwen3-VL: fp32 params / AdamW / grads include the tower's shards; the
  tower's activations (`vision_train_activation_bytes`) for the images a
  device encodes per micro-batch (`images_per_device`: its samples' when
  wl.images_sharded, else the whole micro-batch's) add to "activations"
  as "vision_activations"."""
  v, t = vision_config(cfg), text_config(cfg)
  p = per_device_param_elems(cfg, mesh, shd.TRAIN_RULES)
  tensor = mesh.shape["tensor"]
  layer_params = (
    param_count(cfg, "text") - 2 * t.vocab_size * t.hidden_size
  ) // t.num_layers
  act = train_activation_bytes(
    t,
    wl.micro_batch_per_device,
    T,
    tensor,
    wl.remat,
    wl.logprob_chunk,
    wl.attention,
  )
  out = {
    "params_f32": p * F32,
    "adam_mu_nu_f32": 2 * p * F32,
    "grads_f32_accum+micro": 2 * p * F32,
    # fsdp all-gathers one layer's bf16 weights (x2: prefetch / backward)
    # and the [D, V] unembedding for the log-prob head.
    "gathered_bf16_weights": (
      2 * layer_params // tensor
      + local_dim(t.vocab_size, tensor) * t.hidden_size
    )
    * BF16,
    "activations": act["saved"] + act["layer"] + act["head"],
  }
  if v is not None and images_per_sample and wl.screen is not None:
    dp = mesh.shape["data"] * mesh.shape["fsdp"]
    images = images_per_device(
      images_per_sample,
      wl.micro_batch_per_device * dp,
      dp,
      wl.images_sharded,
    )
    P = math.prod(screenshot_grid(v, wl.screen))
    va = vision_train_activation_bytes(
      v, images, P, t.hidden_size, tensor, wl.attention
    )
    out["gathered_bf16_weights"] += (
      2 * vision_layer_params(v, t.hidden_size) // tensor * BF16
    )
    out["vision_activations"] = va["saved"] + va["layer"] + va["io"]
  return out


def sample_phase_bytes(
  cfg,
  mesh,
  rows: int,
  prompt: int,
  gen: int,
  prefill_rows: int | None = None,
  attention: str = "einsum",
  images_per_row: int = 0,
  screen: tuple[int, int] | None = None,
  images_sharded: bool = True,
) -> dict[str, int]:
  """Per-device bytes while sampling (SAMPLE_RULES: weights TP-only).

  r = ceil(rows / (data * fsdp)) rows per device; a prefill piece holds
  rp = min(r, prefill_rows) of them (None: the whole batch, rp = r; the
  sampler's `prefill_rows` semantics: rows per batch shard per piece).
  prefill transient, one layer of one piece: the attention transient
  (`attention_prefill_bytes`, [rp, N, P, S] scores for einsum, tiles for
  flash) + 6 B per MLP element [rp, P, F] + last-position f32 logits
  [rp, V]; flash adds the hidden states 12 B per [rp, P, D] (bf16 x, f32
  residual and norm), negligible next to einsum scores and left out there.
  prefill pieces (rp < r): the piece's slice of every layer's cache,
  2 x L x [rp, K, S, H] bf16 (taken, then written back).
  Qwen3-VL: "weights_bf16" is the text decoder, "vision_weights_bf16" the
  tower; with images_per_row screenshots of `screen` per row, the tower
  encodes a device's images (`images_per_device`) before the text
  forward: "image_features" (`image_feature_bytes`) stay through it, and
  the prefill transient is the larger of the text layer's and the vision
  layer's (`vision_encode_bytes`), which run one after the other.
  """
  model_cfg = cfg
  v, cfg = vision_config(cfg), text_config(cfg)
  slots = prompt + gen
  dp = mesh.shape["data"] * mesh.shape["fsdp"]
  tensor = mesh.shape["tensor"]
  r = -(-rows // dp)
  rp = r if prefill_rows is None else min(r, prefill_rows)
  prefill = _text_prefill_transient(cfg, rp, prompt, slots, tensor, attention)
  out = _sampling_weight_bytes(model_cfg, mesh)
  out["kv_cache_bf16"] = kv_cache_bytes_per_device(cfg, dp * r, slots, mesh)
  if v is not None and images_per_row and screen is not None:
    images = images_per_device(images_per_row, rows, dp, images_sharded)
    P = math.prod(screenshot_grid(v, screen))
    out["image_features"] = image_feature_bytes(v, images, P, cfg.hidden_size)
    prefill = max(prefill, vision_encode_bytes(v, images, P, tensor, attention))
  out["prefill_transient"] = prefill
  if rp < r:
    out["prefill_piece_cache"] = _piece_cache_bytes(cfg, rp, slots, tensor)
  return out


def _sampling_weight_bytes(cfg, mesh) -> dict[str, int]:
  """The bf16 sampling copy's shards (SAMPLE_RULES) on one device:
  "weights_bf16" the text decoder, and for Qwen3-VL "vision_weights_bf16"
  the vision tower."""
  out = {
    "weights_bf16": per_device_param_bytes(
      cfg, mesh, shd.SAMPLE_RULES, BF16, "text"
    )
  }
  if vision_config(cfg) is not None:
    out["vision_weights_bf16"] = per_device_param_bytes(
      cfg, mesh, shd.SAMPLE_RULES, BF16, "vision"
    )
  return out


def _text_prefill_transient(
  cfg, rp: int, prompt: int, slots: int, tensor: int, attention: str
) -> int:
  """One text layer's prefill transient for a piece of rp rows (text
  config cfg, P = prompt, S = slots; `sample_phase_bytes` gives the
  terms): attention + MLP + last-position logits, + hidden states for
  flash."""
  N = local_dim(cfg.num_heads, tensor)
  Fl = local_dim(cfg.intermediate_size, tensor)
  K, H = local_dim(cfg.num_kv_heads, tensor), cfg.head_dim
  prefill = (
    attention_prefill_bytes(rp, N, K, prompt, slots, H, attention)
    + rp * prompt * Fl * 6
    + rp * cfg.vocab_size * F32
  )
  if attention_kind(attention) == "flash":
    prefill += rp * prompt * cfg.hidden_size * 12
  return prefill


def _piece_cache_bytes(cfg, rp: int, slots: int, tensor: int) -> int:
  """A prefill piece's slice of every layer's KV cache (text config cfg),
  taken and written back: 2 x L x [rp, K, S, H] bf16."""
  K = local_dim(cfg.num_kv_heads, tensor)
  return 2 * cfg.num_layers * rp * K * slots * cfg.head_dim * BF16
