"""The jitted pieces of one optimizer step of `rla_jax.rl.trainer.Learner`.

`accumulate` adds one micro-batch's gradient of the PPO-clip loss SUM
(`ppo_clip_kl_loss`), its denominator and metric sums to a
`GradAccumulator`; `apply_gradients` divides once by the summed
denominator and applies the optimizer, so a step over any number of
micro-batches equals the one-big-batch gradient step. Pure functions of
(graphdef, config, state, batch): the learner jits them with its shardings.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import optax
from flax import nnx, struct

from rla_jax.models.logprobs import batch_logprobs
from rla_jax.rl.losses import METRIC_NAMES, ppo_clip_kl_loss

if TYPE_CHECKING:
  from rla_jax.rl.trainer import OptimConfig


@struct.dataclass
class GradAccumulator:
  """Running sums over the micro-batches of one optimizer step (a pytree).

  grads: sum over micro-batches of d(loss_sum)/d(params), the parameters'
  tree; loss_sum, denom: scalar float32 sums of `ppo_clip_kl_loss`'s
  loss_sum and denom; metric_sums: {METRIC_NAMES: scalar float32 sum}.
  Dividing by denom once gives the one-big-batch values.
  """

  grads: nnx.State
  loss_sum: jax.Array
  denom: jax.Array
  metric_sums: dict[str, jax.Array]

  @classmethod
  def zeros(cls, state: nnx.State) -> GradAccumulator:
    """All sums 0; grads shaped like `state`."""
    zero = jnp.zeros((), jnp.float32)
    return cls(
      grads=jax.tree.map(jnp.zeros_like, state),
      loss_sum=zero,
      denom=zero,
      metric_sums={k: zero for k in METRIC_NAMES},
    )

  def add(self, grads, loss_sum, denom, metrics) -> GradAccumulator:
    """These sums plus one micro-batch's gradient, loss_sum, denom and
    metric sums."""
    return GradAccumulator(
      grads=jax.tree.map(jnp.add, self.grads, grads),
      loss_sum=self.loss_sum + loss_sum,
      denom=self.denom + denom,
      metric_sums=jax.tree.map(jnp.add, self.metric_sums, metrics),
    )


def loss_terms(graphdef, cfg: OptimConfig, state, ref_state, batch):
  """(loss_sum, (denom, metrics)) of one micro-batch ([b, T] arrays); the
  reference policy's log-probs come from ref_state (None: no such term)."""
  model = nnx.merge(graphdef, state)
  lp = batch_logprobs(model, batch, cfg.logprob_chunk)
  ref_lp = None
  if ref_state is not None:
    ref_model = nnx.merge(graphdef, ref_state)
    ref_lp = batch_logprobs(ref_model, batch, cfg.logprob_chunk)
  loss_sum, denom, metrics = ppo_clip_kl_loss(
    lp,
    batch["old_logprobs"],
    batch["advantages"],
    batch["response_mask"],
    clip_eps=cfg.clip_eps,
    kl_beta=cfg.kl_beta,
    ratio_clamp=cfg.ratio_clamp,
    logp_ref=ref_lp,
    ref_kl_beta=cfg.ref_kl_beta,
  )
  return loss_sum, (denom, metrics)


def accumulate(
  graphdef, cfg: OptimConfig, state, ref_state, acc: GradAccumulator, batch
):
  """Adds one micro-batch's gradient of the loss SUM (and its denominator
  and metric sums) to `acc`; batch holds [b, T] arrays. Returns (the new
  accumulator, the micro-batch's mean PPO ratio).

  Micro-batches run one jitted call each (compiled once per T bucket, not
  once per micro-batch count, which a scan over micro-batches would need);
  the accumulator is donated, so the running sums are updated in place.
  """
  grad_fn = jax.value_and_grad(
    functools.partial(loss_terms, graphdef, cfg), has_aux=True
  )
  (loss_sum, (denom, metrics)), grads = grad_fn(state, ref_state, batch)
  acc = acc.add(grads, loss_sum, denom, metrics)
  return acc, metrics["ratio"] / jnp.maximum(denom, 1.0)


def apply_gradients(tx, state, opt_state, acc: GradAccumulator):
  """Divides the summed gradient by the summed denominator once (so the
  step equals the one-big-batch gradient step) and applies AdamW."""
  scale = 1.0 / jnp.maximum(acc.denom, 1.0)
  grads = jax.tree.map(lambda g: g * scale, acc.grads)
  grad_norm = optax.tree.norm(grads)
  updates, opt_state = tx.update(grads, opt_state, state)
  state = optax.apply_updates(state, updates)
  out = {
    "loss": acc.loss_sum * scale,
    "num_samples": acc.denom,
    "grad_norm": grad_norm,
  }
  out.update({k: v * scale for k, v in acc.metric_sums.items()})
  return state, opt_state, out


@functools.partial(jax.jit, static_argnums=(0, 3))
def state_logprobs(graphdef, state, batch, chunk):
  """`batch_logprobs` of the model (graphdef, state); [B, T]."""
  return batch_logprobs(nnx.merge(graphdef, state), batch, chunk)
