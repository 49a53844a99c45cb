"""Per-token log-probabilities computed in vocabulary-safe chunks.

For Qwen's 152k vocabulary a [B, T, V] float32 logits tensor is far larger
than the model's activations, so `token_logprobs` projects hidden states to
logits C positions at a time inside a `lax.scan`, and rematerialises each
chunk in the backward pass: peak extra memory is O(B * C * V), never
O(B * T * V).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
  model, tokens: jax.Array, mask: jax.Array, chunk_size: int = 128
) -> jax.Array:
  """Log-prob of each token given its prefix, under `model`.

  tokens, mask: [B, T] (mask 1 = real token). Returns [B, T] where entry t
  is log p(tokens[:, t] | tokens[:, :t]); entry 0 and padded entries are 0.
  """
  hidden, _ = model.hidden_states(tokens, mask)
  lp = token_logprobs(
    hidden[:, :-1],
    model.lm_head_matrix(),
    tokens[:, 1:],
    chunk_size=chunk_size,
    dtype=model.dtype,
  )
  lp = jnp.pad(lp, ((0, 0), (1, 0)))
  return jnp.where(mask.astype(bool), lp, 0.0)
