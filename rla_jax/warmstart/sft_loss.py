"""The SFT objective and its batches: packing samples into rows, the
weighted token loss, one optimizer step on it, length-grouped batch order and
the response loss of a model on held-out samples.

Samples are (prompt ids, response ids[, per-response-token weights]) packed
right-padded into [B, T] rows. The loss of a batch is the weighted mean token
negative log-likelihood

    L = sum_{b,t} w_{b,t} * -log p(x_{b,t} | x_{b,<t}) / sum_{b,t} w_{b,t},

with w = the sample's response weight (default 1) on response tokens and
w = prompt_weight on prompt tokens after the first (prompt_weight = 0: plain
response-only SFT; > 0 adds a language modelling term on the prompt, which
gives a tiny model many more training tokens per forward pass). Rows are
packed and log-probs computed as in RL training (`pack_rows`,
`sequence_logprobs`: chunked, no [B, T, V] tensor). The sequence length is
rounded up to a multiple of `length_multiple` so few shapes are compiled.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from rla_jax.models.logprobs import sequence_logprobs
from rla_jax.models.qwen import Qwen
from rla_jax.rl.samples import pack_rows


def pack_sft_batch(
  samples: Sequence[tuple], num_rows: int, length_multiple: int, pad_id: int
) -> dict[str, np.ndarray]:
  """[num_rows, T] tokens / mask / response_weight, T = longest rounded up
  to a multiple of length_multiple (`pack_rows`, the RL packer).

  A sample is (prompt ids, response ids) or (prompt ids, response ids,
  weights) with one weight per response token (default all 1). Rows beyond
  len(samples) are empty.
  """
  longest = max(len(s[0]) + len(s[1]) for s in samples)
  T = -(-longest // length_multiple) * length_multiple
  rows = pack_rows(
    [(s[0], s[1]) for s in samples],
    [np.ones(len(s[1]), np.float32) if len(s) < 3 else s[2] for s in samples],
    T,
    num_rows,
    pad_id,
    values_name="weights",
  )
  return {
    "tokens": rows["tokens"],
    "mask": rows["mask"],
    "response_weight": rows["response_values"],
  }


def weighted_nll(model: Qwen, batch: dict, prompt_weight: float, chunk: int):
  """(sum_t w_t * nll_t, sum_t w_t, response nll sum, response token count).

  batch: tokens, mask, response_weight [B, T]. Position t's target is token t;
  position 0 has no prediction. "Response" tokens are those with weight > 0.
  """
  lp = sequence_logprobs(model, batch["tokens"], batch["mask"], chunk)[:, 1:]
  real = batch["mask"][:, 1:].astype(jnp.float32)
  rw = batch["response_weight"][:, 1:]
  resp = (rw > 0).astype(jnp.float32)
  w = rw + prompt_weight * real * (1.0 - resp)
  nll = -lp
  return (jnp.sum(w * nll), jnp.sum(w), jnp.sum(resp * nll), jnp.sum(resp))


def sft_step(graphdef, tx, prompt_weight, chunk, state, opt_state, batch):
  """One optimizer step (tx: train_sft's AdamW) on the weighted mean NLL of
  `batch` (the loss above); (state, opt_state, metrics: loss,
  response_loss, grad_norm)."""

  def loss_fn(st):
    num, den, rnum, rden = weighted_nll(
      nnx.merge(graphdef, st), batch, prompt_weight, chunk
    )
    return num / jnp.maximum(den, 1.0), rnum / jnp.maximum(rden, 1.0)

  (loss, resp_loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(state)
  updates, opt_state = tx.update(grads, opt_state, state)
  state = optax.apply_updates(state, updates)
  return (
    state,
    opt_state,
    {
      "loss": loss,
      "response_loss": resp_loss,
      "grad_norm": optax.tree.norm(grads),
    },
  )


@functools.partial(jax.jit, static_argnums=(0, 2))
def _response_nll(graphdef, state, chunk, batch):
  _, _, rnum, rden = weighted_nll(nnx.merge(graphdef, state), batch, 0.0, chunk)
  return rnum, rden


def length_grouped_batches(
  lengths: Sequence[int],
  batch_size: int,
  num_batches: int,
  rng: np.random.Generator,
  group: int = 8,
) -> list[np.ndarray]:
  """num_batches index arrays of size batch_size (or fewer if the data is
  smaller): epochs of random permutations, cut into groups of `group`
  batches whose members are sorted by length (less padding), group order
  kept random."""
  n = len(lengths)
  bs = min(batch_size, n)
  out: list[np.ndarray] = []
  lengths = np.asarray(lengths)
  while len(out) < num_batches:
    perm = rng.permutation(n)
    per_group = bs * group
    for g in range(0, n - bs + 1, per_group):
      chunk = perm[g : g + per_group]
      chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
      batches = [chunk[i : i + bs] for i in range(0, len(chunk) - bs + 1, bs)]
      for j in rng.permutation(len(batches)):
        out.append(batches[j])
  return out[:num_batches]


def response_loss(
  model: Qwen,
  samples: Sequence[tuple],
  *,
  batch_size: int = 16,
  pad_id: int = 0,
  length_multiple: int = 64,
  chunk: int = 128,
) -> float:
  """Mean per-token NLL of the response tokens of `samples` under `model`."""
  graphdef, state = nnx.split(model)
  num = den = 0.0
  order = np.argsort([len(s[0]) + len(s[1]) for s in samples], kind="stable")
  for i in range(0, len(samples), batch_size):
    part = [samples[j] for j in order[i : i + batch_size]]
    batch = pack_sft_batch(part, batch_size, length_multiple, pad_id)
    n, d = _response_nll(graphdef, state, chunk, batch)
    num, den = num + float(n), den + float(d)
  return num / max(den, 1.0)
