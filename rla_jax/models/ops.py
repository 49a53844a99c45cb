"""Shared numerical pieces of the Qwen forward passes.

Used by the scanned training forward (`qwen.Qwen`) and the layer-unrolled
sampling forward (`unrolled`). Dimension letters as in `config.QwenConfig`:
B batch, T new tokens, S key slots, N query heads, K kv heads, G = N/K,
H head_dim.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


def rms_norm(x, weight, eps):
  """y = w * x / sqrt(mean(x^2) + eps), computed in float32 ([..., D])."""
  x32 = x.astype(jnp.float32)
  x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (weight.astype(jnp.float32) * x32).astype(x.dtype)


def rope_inv_freq(cfg) -> np.ndarray:
  """Per-pair RoPE frequencies [H/2] float32: theta^(-2i/H), rescaled as
  transformers' `_compute_llama3_parameters` does when cfg.rope_scaling is
  set (kept in numpy: a compile-time constant of the traced forward)."""
  H = cfg.head_dim
  inv_freq = 1.0 / (
    np.float32(cfg.rope_theta) ** (np.arange(0, H, 2, dtype=np.float32) / H)
  )
  s = cfg.rope_scaling
  if s is None:
    return inv_freq.astype(np.float32)
  old_len = s.original_max_position_embeddings
  low_freq_wavelen = old_len / s.low_freq_factor
  high_freq_wavelen = old_len / s.high_freq_factor
  wavelen = 2 * math.pi / inv_freq
  scaled = np.where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq)
  smooth = (old_len / wavelen - s.low_freq_factor) / (
    s.high_freq_factor - s.low_freq_factor
  )
  smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
  medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
  return np.where(medium, smoothed, scaled).astype(np.float32)


def apply_rope(x, positions, inv_freq, pair_axis=None):
  """Half-split rotary embedding (HF convention), plain or multi-axis.

  x: [B, T, n, H]; inv_freq: [H/2] (`rope_inv_freq`). Plain RoPE:
  positions [B, T] int and pair_axis None; the angle of pair i is
  pos * inv_freq[i]. Multi-axis RoPE (Qwen3-VL's interleaved M-RoPE, the
  vision tower's 2-D RoPE): positions [B, T, A] int and pair_axis an [H/2]
  int numpy array naming the axis each pair rotates by; the angle of pair i
  is pos[..., pair_axis[i]] * inv_freq[i]. x' = x * cos + rotate_half(x) *
  sin. Leading axes of positions broadcast against x's.
  """
  H = x.shape[-1]
  pos = positions.astype(jnp.float32)
  if pair_axis is None:
    ang = pos[..., None] * jnp.asarray(inv_freq)
  else:
    ang = jnp.take(pos, jnp.asarray(pair_axis), axis=-1) * jnp.asarray(inv_freq)
  cos = jnp.cos(ang)[:, :, None, :]  # [B, T, 1, H/2]
  sin = jnp.sin(ang)[:, :, None, :]
  x32 = x.astype(jnp.float32)
  x1, x2 = x32[..., : H // 2], x32[..., H // 2 :]
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x.dtype)


def mrope_pair_axis(head_dim: int, mrope_section) -> np.ndarray:
  """Qwen3-VL's interleaved M-RoPE layout: [H/2] int, the position axis (0
  temporal, 1 height, 2 width) of each rotary pair. Pair i rotates by the
  height position when i % 3 == 1 and i < 3 * section[1], by the width
  position when i % 3 == 2 and i < 3 * section[2], else by the temporal
  one (transformers' `Qwen3VLTextRotaryEmbedding.recomposition_frequencies`).
  """
  i = np.arange(head_dim // 2)
  axis = np.zeros_like(i)
  axis[(i % 3 == 1) & (i < 3 * mrope_section[1])] = 1
  axis[(i % 3 == 2) & (i < 3 * mrope_section[2])] = 2
  return axis


def dense(x, w, num_in: int = 1):
  """x [..., I_1..I_n] contracted with w
  [I_1..I_n, O_1..O_m] -> [..., O_1..O_m].

  Runs as one rank-2 GEMM [M, I] x [I, O] (reshapes are free). On XLA:CPU
  the same contraction written as a rank-3 einsum ("btd,df->btf") measured
  2x slower forward+backward (MLP block, B=16, T=256, D=128; see
  BENCHMARKS.md "Layer kernels"), because its transposed backward dots miss
  the plain GEMM path.

  The product accumulates and is returned in float32, then cast to x's
  dtype: XLA:CPU runs a bfloat16 -> bfloat16 dot as a float32 dot of
  upcast inputs, but a bfloat16 -> float32 dot on the bf16 GEMM path
  (measured 211 vs 471 GFLOP/s, [4096, 256] x [256, 768]). Same result;
  a no-op in float32.
  """
  lead = x.shape[: x.ndim - num_in]
  in_size = math.prod(w.shape[:num_in])
  out_shape = w.shape[num_in:]
  y = jnp.matmul(
    x.reshape(-1, in_size),
    w.reshape(in_size, math.prod(out_shape)),
    preferred_element_type=jnp.float32,
  ).astype(x.dtype)
  return y.reshape(*lead, *out_shape)


def grouped_attention(q, k, v, mask):
  """Softmax attention with grouped kv heads, without repeating K/V.

  The forwards call `rla_jax.models.attention.attention` (a structured mask,
  memory-bounded kernels); this dense-mask form stays as its "einsum"
  implementation's reference and for benchmarks/bench_layer_kernels.py.

  q: [B, T, N, H]; k, v: [B, K, S, H]; mask: [B, T, S] bool.
  Returns [B, T, N, H]. Scores and softmax in float32.

  The G = N/K query heads of a kv head and their T positions are folded
  into one row axis, so both products are batched GEMMs over (B, K) with
  the contraction on the minor axis ([B, K, G*T, H] x [B, K, S, H]); this
  measured 3.7x faster forward and 1.5x faster forward+backward on CPU than
  the 5-d einsum it replaces.
  """
  B, T, N, H = q.shape
  K = k.shape[1]
  G = N // K
  q = q.reshape(B, T, K, G, H).transpose(0, 2, 3, 1, 4).reshape(B, K, G * T, H)
  scores = jnp.einsum(
    "bkqh,bksh->bkqs", q, k, preferred_element_type=jnp.float32
  )
  rows_mask = jnp.tile(mask, (1, G, 1))[:, None]  # [B, 1, G*T, S]
  scores = jnp.where(rows_mask, scores * (H**-0.5), MASK_VALUE)
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  out = jnp.einsum(
    "bkqs,bksh->bkqh", probs, v, preferred_element_type=jnp.float32
  ).astype(v.dtype)
  return out.reshape(B, K, G, T, H).transpose(0, 3, 1, 2, 4).reshape(B, T, N, H)


def attention_inputs(cfg, p, x, positions, dt):
  """A decoder layer's head: pre-norm, q/k/v projections (+ biases for
  Qwen2 or attention_bias, + per-head norms for Qwen3), RoPE (llama3-scaled
  with cfg.rope_scaling). x: [B, T, D] -> q [B, T, N, H], k, v [B, T, K, H];
  p holds one layer's weights. Shared by the scanned
  training forward and the unrolled sampling forward."""
  h = rms_norm(x, p["input_norm"], cfg.rms_norm_eps)
  q = dense(h, p["wq"].astype(dt))
  k = dense(h, p["wk"].astype(dt))
  v = dense(h, p["wv"].astype(dt))
  if cfg.qkv_bias:
    q, k, v = (
      q + p["bq"].astype(dt),
      k + p["bk"].astype(dt),
      v + p["bv"].astype(dt),
    )
  if cfg.qk_norm:
    q = rms_norm(q, p["q_norm"], cfg.rms_norm_eps)
    k = rms_norm(k, p["k_norm"], cfg.rms_norm_eps)
  inv_freq = rope_inv_freq(cfg)
  pair_axis = None
  if positions.ndim == 3:  # [B, T, 3] multimodal positions (M-RoPE)
    pair_axis = mrope_pair_axis(cfg.head_dim, cfg.mrope_section)
  return (
    apply_rope(q, positions, inv_freq, pair_axis),
    apply_rope(k, positions, inv_freq, pair_axis),
    v,
  )


def _biased(y, p, name, on, dt):
  """y + p[name] (broadcast over leading axes) when `on`, else y."""
  return y + p[name].astype(dt) if on else y


def attention_output_and_mlp(cfg, p, x, attn, dt):
  """A decoder layer's tail: x + attn @ wo (+ bo), then the pre-norm
  SwiGLU MLP (+ biases with cfg.mlp_bias) with its residual.
  x: [B, T, D]; attn: [B, T, N, H] -> [B, T, D]."""
  o = dense(attn, p["wo"].astype(dt), num_in=2)
  x = x + _biased(o, p, "bo", cfg.o_bias, dt)
  h = rms_norm(x, p["post_attn_norm"], cfg.rms_norm_eps)
  gate = _biased(
    dense(h, p["w_gate"].astype(dt)), p, "b_gate", cfg.mlp_bias, dt
  )
  up = _biased(dense(h, p["w_up"].astype(dt)), p, "b_up", cfg.mlp_bias, dt)
  down = dense(jax.nn.silu(gate) * up, p["w_down"].astype(dt))
  return x + _biased(down, p, "b_down", cfg.mlp_bias, dt)
