"""Activation, attention and KV-cache byte models of the memory model.

Activation and transient terms are analytical estimates of what
`rla_jax.models.qwen` materialises, by attention implementation
(`rla_jax.models.attention`, `attention_kind` here): "einsum" (and "xla")
materialise the [B, N, T, S] float32 scores; "blockwise", "pallas_tpu" and
"cudnn" are flash-style and keep only [b, N, block_q, block_k] tiles plus
O(T) row statistics ("auto" resolves to one of these on TPU and GPU). They
are checked against XLA's compiled `memory_analysis()` on a small config by
`launch/memory_plan_compiled.py` (both implementations, whole batch and row
pieces); for 7B/8B the numbers are analytical only. The sampler's KV cache
is sharded by the real rules (`kv_cache_bytes_per_device`). `F32` and
`BF16` are the byte sizes of the precision plan stated in
`launch/memory_model.py`.
"""

from __future__ import annotations

import math

from launch.param_memory import shard_shape, text_config
from rla_jax import sharding as shd
from rla_jax.models.kv_cache import cache_logical_axes

F32, BF16 = 4, 2
# Bytes live per attention score (the einsum attention materialises them).
# Calibrated against XLA GPU compiled memory of Qwen2.5-7B on one H200
# (docs/MEMORY_PLAN_compiled_h200.jsonl): prefill measured ~6.2 B/score;
# train (remat full) ~4 B/score, we keep 6 B (f32 scores + bf16 probs) as a
# conservative bound.
SCORE_BYTES_TRAIN = 6
SCORE_BYTES_PREFILL = 6
# Flash-style attention (`attention._blockwise`): tile sizes (the module's
# defaults) and bytes per element of its tile-bounded temporaries.
BLOCK_Q = BLOCK_K = 128
FLASH_IMPLEMENTATIONS = ("blockwise", "pallas_tpu", "cudnn", "auto")
EINSUM_IMPLEMENTATIONS = ("einsum", "xla")


def kv_cache_bytes_per_device(
  cfg,
  rows: int,
  slots: int,
  mesh,
  rules=shd.SAMPLE_RULES,
  itemsize=BF16,
) -> int:
  """k and v, L buffers of [B, K, S, H] each (bf16), + valid [B, S] bool,
  per device."""
  cfg = text_config(cfg)
  axes = cache_logical_axes(cfg)
  kv_shape = (rows, cfg.num_kv_heads, slots, cfg.head_dim)
  kv = math.prod(
    shard_shape(
      kv_shape,
      shd.logical_to_spec(axes.k[0], kv_shape, mesh, rules),
      mesh.shape,
    )
  )
  valid = math.prod(
    shard_shape(
      (rows, slots),
      shd.logical_to_spec(axes.valid, (rows, slots), mesh, rules),
      mesh.shape,
    )
  )
  return 2 * cfg.num_layers * kv * itemsize + valid


def local_dim(dim: int, size: int) -> int:
  """`dim` split over a mesh axis of `size` when it divides (rule semantics)."""
  return dim // size if dim % size == 0 else dim


def attention_kind(attention: str) -> str:
  """ "einsum" for implementations that materialise the [b, N, T, S] scores
  (einsum, xla), "flash" for the tile-bounded ones (blockwise, pallas_tpu,
  cudnn; "auto" = pallas_tpu on TPU, cudnn on GPU for bf16)."""
  if attention in EINSUM_IMPLEMENTATIONS:
    return "einsum"
  if attention in FLASH_IMPLEMENTATIONS:
    return "flash"
  raise ValueError(
    f"attention must be one of "
    f"{sorted(EINSUM_IMPLEMENTATIONS + FLASH_IMPLEMENTATIONS)}, "
    f"got {attention!r}"
  )


def attention_train_bytes(
  b: int, N: int, K: int, T: int, H: int, attention: str
) -> dict[str, int]:
  """One layer's attention bytes in training (self-attention, S = T).

  einsum: layer = SCORE_BYTES_TRAIN per score [b, N, T, T]; saved (kept
    for the backward pass without remat) = f32 scores + bf16 probs.
  flash (`attention._blockwise`: query tiles looped by lax.map, key tiles
    by lax.scan, FlashAttention-2 custom VJP), with bq = BLOCK_Q,
    bk = BLOCK_K:
    saved = the residuals: m, l [b, N, T] f32 + out [b, T, N, H] bf16 +
      the padded q, k, v tile copies [b, T, N, H], 2 x [b, K, T, H] bf16;
    layer = the residuals + 20 B per tile element [b, N, bq, bk] (f32 s,
      p, dp, ds + bf16 p) + 4 B per [b, N, T] (D = rowsum(dO * out)) +
      10 B per [b, N, T, H] (dO tiles bf16, dq accumulator and the per-key-
      tile dq stack f32) + 12 B per [b, K, T, H] (dk, dv f32 stacks, bf16
      results). Nothing of size T x T.
  """
  if attention_kind(attention) == "einsum":
    scores = b * N * T * T
    return {"saved": scores * (F32 + BF16), "layer": scores * SCORE_BYTES_TRAIN}
  bq, bk = min(BLOCK_Q, T), min(BLOCK_K, T)
  saved = (
    b * N * T * 2 * F32 + b * T * N * H * 2 * BF16 + 2 * b * K * T * H * BF16
  )
  layer = (
    saved
    + b * N * bq * bk * 20
    + b * N * T * F32
    + b * N * T * H * 10
    + b * K * T * H * 12
  )
  return {"saved": saved, "layer": layer}


def attention_prefill_bytes(
  r: int, N: int, K: int, P: int, S: int, H: int, attention: str
) -> int:
  """One layer's attention transient of a cached forward of r rows, P
  queries, S key slots (inference: no residuals kept).

  einsum: SCORE_BYTES_PREFILL per score [r, N, P, S] (f32 scores + bf16
    probs) + the bool mask [r, P, S].
  flash (forward of `attention._blockwise`): 10 B per tile element
    [r, N, bq, bk] (f32 s and p, bf16 p) + the f32 accumulator
    [r, N, bq, H] + 6 B per [r, P, N, H] (q tiles, stacked output blocks,
    output, bf16) + 8 B per [r, N, P] (stacked m, l f32) + the padded k, v
    tile copies 2 x [r, K, S, H] bf16.
  """
  if attention_kind(attention) == "einsum":
    return r * N * P * S * SCORE_BYTES_PREFILL + r * P * S
  bq, bk = min(BLOCK_Q, P), min(BLOCK_K, S)
  return (
    r * N * bq * bk * 10
    + r * N * bq * H * F32
    + r * P * N * H * 6
    + r * N * P * 2 * F32
    + 2 * r * K * S * H * BF16
  )


def train_activation_bytes(
  cfg,
  b: int,
  T: int,
  tensor: int,
  remat: str,
  chunk: int = 128,
  attention: str = "einsum",
) -> dict[str, int]:
  """Activation bytes on one device for a micro-batch of b sequences of T.

  saved: what the layer scan keeps for the backward pass (L copies):
    full -> the bf16 carry x [b, T, D];
    dots -> carry + projection outputs q,k,v [b,T,(N+2K)H], gate/up
            [b,T,F], attn-out and down-out [b,T,D] (dots without batch dims)
            [+ the flash residuals, `attention_train_bytes`];
    none -> dots + the attention's saved bytes (einsum: fp32 scores and
            bf16 probs [b,N,T,T]) + f32 norms.
  layer: the working set of one layer's recomputed forward + backward:
    the attention's layer bytes (`attention_train_bytes`), 12 B per MLP
    element [b,T,F] (3 bf16 tensors and their grads), 24 B per residual
    element [b,T,D] (f32 norm temporaries).
  head: chunked log-probs, 3 f32 [b, C, V] buffers + 2 f32 [b, T, D].
  (The text decoder only; Qwen3-VL's tower: `vision_train_activation_bytes`.)
  """
  cfg = text_config(cfg)
  D, F, H, L = (
    cfg.hidden_size,
    cfg.intermediate_size,
    cfg.head_dim,
    cfg.num_layers,
  )
  N, K = local_dim(cfg.num_heads, tensor), local_dim(cfg.num_kv_heads, tensor)
  Fl, V = local_dim(F, tensor), local_dim(cfg.vocab_size, tensor)
  carry = b * T * D * BF16
  proj = b * T * ((N + 2 * K) * H + 2 * Fl + 2 * D) * BF16
  att = attention_train_bytes(b, N, K, T, H, attention)
  flash = attention_kind(attention) == "flash"
  saved = {
    "full": carry,
    "dots": carry + proj + (att["saved"] if flash else 0),
    "none": carry + proj + att["saved"] + 2 * b * T * D * F32,
  }
  if remat not in saved:
    raise ValueError(f"remat must be one of {sorted(saved)}, got {remat!r}")
  layer = att["layer"] + b * T * Fl * 12 + b * T * D * 24
  head = 3 * b * min(chunk, T) * V * F32 + 2 * b * T * D * F32
  return {"saved": L * saved[remat], "layer": layer, "head": head}
