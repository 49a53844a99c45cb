"""Shared numerical pieces of the Qwen forward passes.

Used by the scanned training forward (`qwen.Qwen`) and the layer-unrolled
sampling forward (`unrolled`). Dimension letters as in `config.QwenConfig`:
B batch, T new tokens, S key slots, N query heads, K kv heads, G = N/K,
H head_dim.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


def rms_norm(x, weight, eps):
  """y = w * x / sqrt(mean(x^2) + eps), computed in float32 ([..., D])."""
  x32 = x.astype(jnp.float32)
  x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (weight.astype(jnp.float32) * x32).astype(x.dtype)


def apply_rope(x, positions, theta):
  """Half-split rotary embedding (HF convention).

  x: [B, T, n, H]; positions: [B, T] int. Angle for pair i is
  pos * theta^(-2i/H); x' = x * cos + rotate_half(x) * sin.
  """
  H = x.shape[-1]
  inv_freq = 1.0 / (theta ** (jnp.arange(0, H, 2, dtype=jnp.float32) / H))
  ang = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, H/2]
  cos = jnp.cos(ang)[:, :, None, :]
  sin = jnp.sin(ang)[:, :, None, :]
  x32 = x.astype(jnp.float32)
  x1, x2 = x32[..., : H // 2], x32[..., H // 2:]
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x.dtype)


def grouped_attention(q, k, v, mask):
  """Softmax attention with grouped kv heads, without repeating K/V.

  q: [B, T, N, H]; k, v: [B, K, S, H]; mask: [B, T, S] bool.
  Returns [B, T, N, H]. Scores and softmax in float32.
  """
  B, T, N, H = q.shape
  K = k.shape[1]
  q = q.reshape(B, T, K, N // K, H)
  scores = jnp.einsum("btkgh,bksh->bkgts", q, k,
                      preferred_element_type=jnp.float32)
  scores = scores * (H ** -0.5)
  scores = jnp.where(mask[:, None, None, :, :], scores, MASK_VALUE)
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  out = jnp.einsum("bkgts,bksh->btkgh", probs, v)
  return out.reshape(B, T, N, H)


def decode_attention(q, k, v, mask):
  """`grouped_attention` for one new token per row (T = 1).

  q: [B, 1, N, H]; k, v: [B, K, S, H]; mask: [B, 1, S] bool. Returns
  [B, 1, N, H]. Without the unit T axis XLA:CPU lowers the two batched
  contractions to faster kernels (BENCHMARKS.md, decode profile 2).
  """
  B, _, N, H = q.shape
  K = k.shape[1]
  q = q.reshape(B, K, N // K, H)
  scores = jnp.einsum("bkgh,bksh->bkgs", q, k,
                      preferred_element_type=jnp.float32)
  scores = scores * (H ** -0.5)
  scores = jnp.where(mask[:, :, None, :], scores, MASK_VALUE)  # [B,K,G,S]
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  out = jnp.einsum("bkgs,bksh->bkgh", probs, v)
  return out.reshape(B, 1, N, H)
