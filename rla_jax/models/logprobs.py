"""Per-token log-probabilities computed in vocabulary-safe chunks, and a
model's log-probs of a packed batch (`sequence_logprobs`, `batch_logprobs`).

For Qwen's 152k vocabulary a [B, T, V] float32 logits tensor is far larger
than the model's activations, so `token_logprobs` projects hidden states to
logits C positions at a time inside a `lax.scan`, and rematerialises each
chunk in the backward pass: peak extra memory is O(B * C * V), never
O(B * T * V).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
  from rla_jax.models.qwen import Qwen


def token_logprobs(
  hidden: jax.Array,
  lm_head: jax.Array,
  targets: jax.Array,
  chunk_size: int = 128,
  dtype=jnp.float32,
) -> jax.Array:
  """log softmax(hidden @ lm_head)[target] for every position.

  hidden: [B, T, D] final-norm hidden states; lm_head: [D, V];
  targets: [B, T] int token ids. Returns [B, T] float32.
  """
  B, T, D = hidden.shape
  C = max(1, min(chunk_size, T))
  pad = (-T) % C
  if pad:
    hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))
    targets = jnp.pad(targets, ((0, 0), (0, pad)))
  n = (T + pad) // C
  h_chunks = hidden.reshape(B, n, C, D).transpose(1, 0, 2, 3)
  t_chunks = targets.reshape(B, n, C).transpose(1, 0, 2)
  w = lm_head.astype(dtype)

  @jax.checkpoint
  def chunk_logprobs(h, t):
    logits = jnp.einsum(
      "bcd,dv->bcv", h.astype(dtype), w, preferred_element_type=jnp.float32
    )
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, t[..., None], axis=-1)[..., 0]
    return picked - lse

  def body(_, xs):
    return None, chunk_logprobs(*xs)

  _, out = jax.lax.scan(body, None, (h_chunks, t_chunks))
  return out.transpose(1, 0, 2).reshape(B, n * C)[:, :T]


def sequence_logprobs(
  model: Qwen,
  tokens: jax.Array,
  mask: jax.Array,
  chunk_size: int = 128,
  positions: jax.Array | None = None,
  visual=None,
) -> jax.Array:
  """Per-token log-probs of a padded batch under `model`.

    lp[b, 0] = 0 (no prediction),
    lp[b, t] = log p(tokens[b, t] | tokens[b, <t]) for t >= 1 where
               mask[b, t] = 1, and 0 at padded positions,

  tokens, mask: [B, T] (mask 1 = real token); returns [B, T] float32,
  aligned with tokens. The vocabulary projection runs in sequence chunks of
  `chunk_size` (`token_logprobs`), so no [B, T, V] tensor is built.
  positions ([B, T, 3] M-RoPE) and visual (`VisualTokens`): a Qwen3-VL
  batch's image inputs.
  """
  hidden, _ = model.hidden_states(
    tokens, mask, positions=positions, visual=visual
  )
  lp = token_logprobs(
    hidden[:, :-1],
    model.lm_head_matrix(),
    tokens[:, 1:],
    chunk_size=chunk_size,
    dtype=model.dtype,
  )
  lp = jnp.pad(lp, ((0, 0), (1, 0)))
  return jnp.where(mask.astype(bool), lp, 0.0)


def batch_logprobs(model: Qwen, batch: dict, chunk: int) -> jax.Array:
  """`sequence_logprobs` of a packed batch, with its image inputs when it
  has them (`pack_image_inputs`)."""
  if "images" not in batch:
    return sequence_logprobs(model, batch["tokens"], batch["mask"], chunk)
  visual = model.visual_tokens(batch["images"], batch["feature_rows"])
  return sequence_logprobs(
    model, batch["tokens"], batch["mask"], chunk, batch["positions"], visual
  )
