"""Layer-unrolled forward over a KV cache: the sampling path.

Training runs `Qwen.hidden_states` without a cache: layers stacked along L
and run with `lax.scan` (compile time flat in depth, rematerialisation).
Prefill and decode run this forward instead:
  * the layers are unrolled in Python over per-layer weight arrays
    (`unstack`), so no step slices a stacked weight or indexes a
    layer-stacked cache;
  * each layer's [B, K, S, H] cache buffer (`KVCache`) is written in place
    (dynamic_update_slice under donation).
On this project's 2-core CPU a decode step ran 1.35-2.1x faster than
through the scanned forward (docs/benchmark-history.md, "Sampler decode,
round 2"; the same page records that a B=32 prefill of the hidden-256
model got ~13% slower). The cost: compile time grows linearly with depth
(sampling programs compile once per shape bucket).

Parameters are a plain pytree (`UnrolledParams`): {"embed": [V, D],
"final_norm": [D], "lm_head": [D, V] (untied models only), "layers": L dicts
of the per-layer weights named as in `qwen.LAYER_PARAM_AXES`, without the
leading L axis}. Dimension letters as in `config.QwenConfig`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rla_jax.models.attention import attention as masked_attention
from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import KVCache
from rla_jax.models.ops import (
  attention_inputs,
  attention_output_and_mlp,
  rms_norm,
)
from rla_jax.models.visual_tokens import (
  VisualTokens,
  add_deepstack,
  place_features,
)

UnrolledParams = dict[str, Any]


def unstack(model, dtype=None) -> UnrolledParams:
  """Per-layer parameters of a `Qwen` model (floating ones cast to dtype).

  Traceable: inside a jit it slices the stacked [L, ...] parameters once.
  """
  cast = (
    (lambda x: x)
    if dtype is None
    else (
      lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x
    )
  )
  stacked = {name: p[...] for name, p in model.layers.items()}
  out = {
    "embed": cast(model.embed[...]),
    "final_norm": cast(model.final_norm[...]),
    "layers": tuple(
      {name: cast(w[i]) for name, w in stacked.items()}
      for i in range(model.cfg.num_layers)
    ),
  }
  if not model.cfg.tie_word_embeddings:
    out["lm_head"] = cast(model.lm_head[...])
  return out


def logical_axes(model) -> UnrolledParams:
  """Logical axes of `unstack(model)`'s arrays (tuples of names, the
  stacked parameters' `logical_axes` without "layers"), same tree."""

  def axes(p):
    return tuple(p.logical_axes)

  layer = {name: axes(p)[1:] for name, p in model.layers.items()}
  out = {
    "embed": axes(model.embed),
    "final_norm": axes(model.final_norm),
    "layers": tuple(dict(layer) for _ in range(model.cfg.num_layers)),
  }
  if not model.cfg.tie_word_embeddings:
    out["lm_head"] = axes(model.lm_head)
  return out


def _layer(cfg: QwenConfig, p, x, positions, valid, ck, cv, end, dt, impl):
  """One decoder layer. x: [B, T, D]; valid: [B, S] bool (the updated
  cache.valid); ck, cv: this layer's [B, K, S, H] cache. Returns (x', ck',
  cv') with the chunk's keys and values written at slots [end, end + T);
  query i (slot end + i) attends slots j <= end + i with valid[b, j]."""
  q, k, v = attention_inputs(cfg, p, x, positions, dt)
  ck = jax.lax.dynamic_update_slice(
    ck, k.transpose(0, 2, 1, 3).astype(ck.dtype), (0, 0, end, 0)
  )
  cv = jax.lax.dynamic_update_slice(
    cv, v.transpose(0, 2, 1, 3).astype(cv.dtype), (0, 0, end, 0)
  )
  q_slot = end + jnp.arange(x.shape[1], dtype=jnp.int32)
  attn = masked_attention(
    q, ck.astype(dt), cv.astype(dt), valid, q_slot, implementation=impl
  )
  x = attention_output_and_mlp(cfg, p, x, attn, dt)
  return x, ck, cv


def forward(
  cfg: QwenConfig,
  params: UnrolledParams,
  tokens: jax.Array,
  mask: jax.Array | None,
  cache: KVCache,
  positions: jax.Array | None = None,
  dtype=jnp.float32,
  attention: str = "auto",
  visual: VisualTokens | None = None,
) -> tuple[jax.Array, KVCache]:
  """Appends a chunk to the cache; returns final-norm hidden states
  [B, T, D] and the updated cache.

  tokens: [B, T] int; mask: [B, T] (1 = real token, 0 = padding; default
  all real). The chunk is written at slots [cache.end, cache.end + T) and
  each token attends to every valid earlier slot and to itself. positions
  ([B, T], or [B, T, 3] M-RoPE positions) default to the running count of
  real tokens (padding never shifts positions); the cache's next_pos
  becomes one past the largest position of a real token (unchanged for a
  row with none). visual: image features placed at image-pad tokens
  (`visual_tokens`). attention: a `rla_jax.models.attention`
  implementation.
  """
  B, T = tokens.shape
  mask = jnp.ones((B, T), bool) if mask is None else mask.astype(bool)
  if positions is None:
    positions = cache.next_pos[:, None] + jnp.cumsum(mask, axis=1) - 1
    positions = jnp.maximum(positions, 0).astype(jnp.int32)
  valid = jax.lax.dynamic_update_slice(cache.valid, mask, (0, cache.end))
  x = params["embed"].astype(dtype)[tokens]
  if visual is not None:
    x = place_features(x, visual)
  ks, vs = list(cache.k), list(cache.v)
  for i, p in enumerate(params["layers"]):
    x, ks[i], vs[i] = _layer(
      cfg, p, x, positions, valid, ks[i], vs[i], cache.end, dtype, attention
    )
    if visual is not None:
      x = add_deepstack(x, visual, i)
  h = rms_norm(x, params["final_norm"], cfg.rms_norm_eps)
  new_cache = KVCache(
    k=tuple(ks),
    v=tuple(vs),
    valid=valid,
    end=cache.end + T,
    next_pos=next_positions(cache.next_pos, positions, mask),
  )
  return h, new_cache


def next_positions(next_pos, positions, mask):
  """[B] the position a row's next token takes: one past the largest
  position of the chunk's real tokens (over all axes of [B, T, 3] M-RoPE
  positions), or next_pos for a row with no real token. For the default
  running-count positions this is next_pos + the row's real-token count."""
  pos = positions if positions.ndim == 2 else positions.max(axis=-1)
  last = jnp.where(mask, pos, -1).max(axis=1)
  return jnp.where(mask.any(axis=1), last + 1, next_pos).astype(jnp.int32)


def logits(
  cfg: QwenConfig, params: UnrolledParams, h: jax.Array, dtype=jnp.float32
) -> jax.Array:
  """[..., D] final hidden states -> [..., V] float32 logits."""
  h = h.astype(dtype)
  if cfg.tie_word_embeddings:
    return jnp.einsum(
      "...d,vd->...v",
      h,
      params["embed"].astype(dtype),
      preferred_element_type=jnp.float32,
    )
  return jnp.einsum(
    "...d,dv->...v",
    h,
    params["lm_head"].astype(dtype),
    preferred_element_type=jnp.float32,
  )
