"""PPO-clip surrogate with a k3 KL penalty to
the pre-update policy (reference sec. 3.2), and optionally one to a fixed
reference policy (the warm start), as GRPO's beta term.

Used for both the policy and the generative reward model (same loss, reference
sec. 4).

Dimension letters: B samples (one sample = one (prompt, response) pair with a
scalar advantage), T response-aligned token positions.

Aggregation is "seq-mean-token-mean": each sample's loss is the mean over its
response tokens, and the batch loss is the mean over samples. The function
returns the *unreduced* ``(loss_sum, denom)`` so that micro-batch accumulation
is exact: ``sum_b loss_sum_b / sum_b denom_b`` equals the loss of the
concatenated batch.

Deliberate deviations from the reference:
- Samples whose response mask is empty contribute 0 and are *not* counted in
  ``denom`` (the reference counts them in its batch mean / accumulation
  divisor).
- The loss is computed in float32 whatever the input dtype.
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import jax.numpy as jnp

METRIC_NAMES = ("pg_loss", "kl", "ref_kl", "ratio", "clip_frac")


def ppo_clip_kl_loss(
  logp_new,
  logp_old,
  advantages,
  response_mask,
  clip_eps: float = 0.2,
  kl_beta: float = 0.01,
  ratio_clamp: float = 10.0,
  logp_ref=None,
  ref_kl_beta: float = 0.0,
):
  """Seq-mean-token-mean PPO-clip loss with a k3 KL penalty to pi_old
  and, given logp_ref, one to a fixed reference policy pi_ref.

  Per token t of sample b (only where response_mask[b, t]):
    d[b, t]     = clip(logp_new - logp_old, -ratio_clamp, ratio_clamp)
    rho[b, t]   = exp(d[b, t])
    pg[b, t]    = -min(rho * A[b], clip(rho, 1 - clip_eps, 1 + clip_eps) * A[b])
    kl[b, t]    = exp(clip(logp_old - logp_new, -c, c)) - 1
                  - (logp_old - logp_new)   (k3, c=ratio_clamp)
    rkl[b, t]   = the same k3 with logp_ref in place of logp_old
                  (0 without logp_ref)
  Per sample (n[b] = sum_t response_mask[b, t]):
    l[b]        = (1 / n[b]) * sum_t (pg[b, t] + kl_beta * kl[b, t]
                                      + ref_kl_beta * rkl[b, t])
                  if n[b] > 0, else 0
  Returned:
    loss_sum    = sum_b l[b]                 (scalar float32)
    denom       = #{b : n[b] > 0}            (scalar float32)
    metrics     = dict name -> scalar float32 *sum over valid samples of
                  per-sample token means*; divide by ``denom`` (or use
                  ``combine_micro_batches``): "pg_loss" (mean pg), "kl" (mean
                  k3 KL), "ref_kl" (mean rkl), "ratio" (mean rho),
                  "clip_frac" (fraction of tokens
                  where the clipped branch is strictly smaller, i.e. the
                  gradient is cut).

  Args:
    logp_new: [B, T] log pi_theta of the response tokens (differentiated).
    logp_old: [B, T] log pi_old of the same tokens (treated as constant).
    advantages: [B] one scalar per sample, broadcast over its tokens.
    logp_ref: optional [B, T] log pi_ref of the same tokens (constant).
    response_mask: [B, T] bool/0-1; positions outside it may hold anything
      (even -inf).
  Jittable; the hyper-parameters are Python floats baked into the trace.
  """
  logp_new = jnp.asarray(logp_new, jnp.float32)
  logp_old = jax.lax.stop_gradient(jnp.asarray(logp_old, jnp.float32))
  adv = jax.lax.stop_gradient(jnp.asarray(advantages, jnp.float32))
  mask = jnp.asarray(response_mask).astype(bool)
  if (
    logp_new.ndim != 2
    or logp_old.shape != logp_new.shape
    or mask.shape != logp_new.shape
  ):
    raise ValueError(
      f"ppo_clip_kl_loss: logp_new {logp_new.shape}, logp_old {logp_old.shape} "
      f"and response_mask {mask.shape} must all be [B, T]"
    )
  if adv.shape != logp_new.shape[:1]:
    raise ValueError(
      f"ppo_clip_kl_loss: advantages shape {adv.shape} must be "
      f"[B={logp_new.shape[0]}]"
    )

  # Masked positions get log-ratio 0 before
  # any exp, so padding (even -inf) is inert.
  log_ratio = jnp.where(mask, logp_new - logp_old, 0.0)
  ratio = jnp.exp(jnp.clip(log_ratio, -ratio_clamp, ratio_clamp))
  clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
  a = adv[:, None]
  unclipped_obj = ratio * a
  clipped_obj = clipped * a
  pg = -jnp.minimum(unclipped_obj, clipped_obj)
  kl = _k3(log_ratio, ratio_clamp)
  if logp_ref is None:
    ref_kl = jnp.zeros_like(kl)
  else:
    logp_ref = jax.lax.stop_gradient(jnp.asarray(logp_ref, jnp.float32))
    if logp_ref.shape != logp_new.shape:
      raise ValueError(
        f"ppo_clip_kl_loss: logp_ref {logp_ref.shape} must be "
        f"[B, T]={logp_new.shape}"
      )
    ref_kl = _k3(jnp.where(mask, logp_new - logp_ref, 0.0), ratio_clamp)
  clip_active = (clipped_obj < unclipped_obj).astype(jnp.float32)

  maskf = mask.astype(jnp.float32)
  n_tok = maskf.sum(axis=1)
  valid = n_tok > 0
  inv_n = jnp.where(valid, 1.0 / jnp.maximum(n_tok, 1.0), 0.0)

  def seq_mean_sum(x):
    return jnp.sum(jnp.sum(x * maskf, axis=1) * inv_n)

  pg_sum = seq_mean_sum(pg)
  kl_sum = seq_mean_sum(kl)
  ref_kl_sum = seq_mean_sum(ref_kl)
  loss_sum = pg_sum + kl_beta * kl_sum + ref_kl_beta * ref_kl_sum
  denom = valid.astype(jnp.float32).sum()
  metrics = {
    "pg_loss": pg_sum,
    "kl": kl_sum,
    "ref_kl": ref_kl_sum,
    "ratio": seq_mean_sum(ratio),
    "clip_frac": seq_mean_sum(clip_active),
  }
  return loss_sum, denom, metrics


def _k3(log_ratio, clamp: float):
  """k3 estimate of KL(pi_new || pi_other) per token from
  log_ratio = log pi_new - log pi_other ([B, T]), sampled under pi_old:
  exp(-log_ratio) - 1 + log_ratio (>= 0; the exponent clipped to +-clamp)."""
  return jnp.exp(jnp.clip(-log_ratio, -clamp, clamp)) - 1.0 + log_ratio


def combine_micro_batches(outputs: Iterable[tuple]) -> tuple[float, dict]:
  """Exact batch mean from per-micro-batch
  ``(loss_sum, denom, metrics)`` triples.

  loss = sum(loss_sum) / sum(denom); each metric likewise. Returns (loss,
  metrics) as Python floats; 0.0 everywhere if no micro-batch had a non-empty
  sample.
  """
  total_loss, total_denom = 0.0, 0.0
  totals = {name: 0.0 for name in METRIC_NAMES}
  for loss_sum, denom, metrics in outputs:
    total_loss += float(loss_sum)
    total_denom += float(denom)
    for name in METRIC_NAMES:
      totals[name] += float(metrics[name])
  if total_denom == 0:
    return 0.0, {name: 0.0 for name in METRIC_NAMES}
  return total_loss / total_denom, {
    name: v / total_denom for name, v in totals.items()
  }
