"""Tests for rla_jax.rl.losses against a
straightforward numpy implementation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rla_jax.rl.losses import (
  METRIC_NAMES,
  combine_micro_batches,
  ppo_clip_kl_loss,
)


def numpy_ppo_loss(new, old, adv, mask, eps=0.2, beta=0.01, c=10.0):
  """Per-sample loop, float64: the formula
  written out directly (reference sec. 3.2)."""
  loss, denom = 0.0, 0
  metrics = {name: 0.0 for name in METRIC_NAMES}
  for b in range(new.shape[0]):
    idx = np.nonzero(mask[b])[0]
    if idx.size == 0:
      continue
    denom += 1
    d = new[b, idx].astype(np.float64) - old[b, idx].astype(np.float64)
    rho = np.exp(np.clip(d, -c, c))
    unclipped = rho * adv[b]
    clipped = np.clip(rho, 1 - eps, 1 + eps) * adv[b]
    pg = -np.minimum(unclipped, clipped)
    kl = np.exp(np.clip(-d, -c, c)) - 1 + d
    loss += np.mean(pg + beta * kl)
    metrics["pg_loss"] += np.mean(pg)
    metrics["kl"] += np.mean(kl)
    metrics["ratio"] += np.mean(rho)
    metrics["clip_frac"] += np.mean(clipped < unclipped)
  return loss, denom, metrics


def random_batch(seed, b=7, t=11, empty_rows=(2,)):
  rng = np.random.default_rng(seed)
  old = rng.normal(-2.0, 1.0, size=(b, t)).astype(np.float32)
  new = (old + rng.normal(0.0, 0.3, size=(b, t))).astype(np.float32)
  adv = rng.normal(size=b).astype(np.float32)
  mask = rng.random((b, t)) < 0.6
  mask[:, 0] = True
  for r in empty_rows:
    mask[r] = False
  return new, old, adv, mask


def test_matches_numpy_on_random_inputs():
  for seed in range(5):
    new, old, adv, mask = random_batch(seed)
    loss_sum, denom, metrics = ppo_clip_kl_loss(new, old, adv, mask)
    exp_loss, exp_denom, exp_metrics = numpy_ppo_loss(new, old, adv, mask)
    assert float(denom) == exp_denom == 6
    np.testing.assert_allclose(float(loss_sum), exp_loss, rtol=1e-5, atol=1e-6)
    for name in METRIC_NAMES:
      np.testing.assert_allclose(
        float(metrics[name]), exp_metrics[name], rtol=1e-5, atol=1e-6
      )
    # Some tokens are actually clipped in these
    # batches, so clip_frac is exercised.
    assert float(metrics["clip_frac"]) > 0


def test_non_default_hyper_parameters_match_numpy():
  new, old, adv, mask = random_batch(7)
  new = (
    new + 1.0
  )  # push ratios far out so the log-ratio clamp and clipping both matter
  got = ppo_clip_kl_loss(
    new, old, adv, mask, clip_eps=0.1, kl_beta=0.5, ratio_clamp=0.5
  )
  exp = numpy_ppo_loss(new, old, adv, mask, eps=0.1, beta=0.5, c=0.5)
  np.testing.assert_allclose(float(got[0]), exp[0], rtol=1e-5)


def test_hand_computed_single_tokens():
  d = math.log(1.5)
  new = np.array([[d, 0.0], [d, 0.0], [0.5, 0.0]], np.float32)
  old = np.zeros((3, 2), np.float32)
  mask = np.array([[1, 0], [1, 0], [1, 0]], bool)
  adv = np.array([1.0, -1.0, 0.0], np.float32)
  _, denom, m = ppo_clip_kl_loss(new, old, adv, mask, kl_beta=0.0)
  # sample 0: A=+1, rho=1.5 -> min(1.5, 1.2) = 1.2 -> pg -1.2 (clipped);
  # sample 1: A=-1 -> min(-1.5, -1.2) = -1.5 -> pg 1.5 (not clipped);
  # sample 2: A=0 -> 0.
  assert float(denom) == 3
  np.testing.assert_allclose(float(m["pg_loss"]), -1.2 + 1.5 + 0.0, atol=1e-6)
  np.testing.assert_allclose(float(m["clip_frac"]), 1.0, atol=1e-6)
  np.testing.assert_allclose(
    float(m["ratio"]), 1.5 + 1.5 + math.exp(0.5), rtol=1e-6
  )
  # k3 KL: exp(-d) - 1 + d
  expected_kl = 2 * (1 / 1.5 - 1 + d) + (math.exp(-0.5) - 1 + 0.5)
  np.testing.assert_allclose(float(m["kl"]), expected_kl, rtol=1e-5)


def test_token_mean_then_sequence_sum():
  # One sample with 1 token and pg 2, one with 4 tokens and pg 1 each:
  # seq-mean-token-mean gives (2 + 1) / 2 = 1.5, whereas a global token mean
  # would give 6/5.
  new = np.zeros((2, 4), np.float32)
  adv = np.array([-2.0, -1.0], np.float32)
  mask = np.array([[1, 0, 0, 0], [1, 1, 1, 1]], bool)
  loss_sum, denom, _ = ppo_clip_kl_loss(new, new, adv, mask)
  assert float(loss_sum) / float(denom) == pytest.approx(1.5)


def test_micro_batch_accumulation_is_exact():
  new, old, adv, mask = random_batch(11, b=9, empty_rows=(0, 5))
  full_sum, full_denom, full_metrics = ppo_clip_kl_loss(new, old, adv, mask)
  full_loss = float(full_sum) / float(full_denom)
  splits = [
    (0, 1),
    (1, 4),
    (4, 9),
  ]  # includes a micro-batch holding only an empty sample
  outs = [
    ppo_clip_kl_loss(new[a:b], old[a:b], adv[a:b], mask[a:b]) for a, b in splits
  ]
  assert float(outs[0][1]) == 0
  loss, metrics = combine_micro_batches(outs)
  np.testing.assert_allclose(loss, full_loss, rtol=1e-6)
  for name in METRIC_NAMES:
    np.testing.assert_allclose(
      metrics[name], float(full_metrics[name]) / float(full_denom), rtol=1e-6
    )


def test_all_empty_batch():
  z = np.zeros((2, 3), np.float32)
  loss_sum, denom, metrics = ppo_clip_kl_loss(
    z, z, np.ones(2, np.float32), np.zeros((2, 3), bool)
  )
  assert float(loss_sum) == 0 and float(denom) == 0
  assert combine_micro_batches([(loss_sum, denom, metrics)]) == (
    0.0,
    {n: 0.0 for n in METRIC_NAMES},
  )


def test_gradient_at_new_equals_old_is_plain_policy_gradient():
  new, _, adv, mask = random_batch(3)

  def ppo(lp):
    return ppo_clip_kl_loss(lp, jnp.asarray(new), adv, mask)[0]

  def plain_pg(
    lp,
  ):  # -(sum_b A_b * mean_{t in y_b} log pi(y_t)), the REINFORCE surrogate
    m = jnp.asarray(mask, jnp.float32)
    n = jnp.maximum(m.sum(1), 1.0)
    return -jnp.sum(adv * (lp * m).sum(1) / n)

  g = jax.grad(ppo)(jnp.asarray(new))
  g_pg = jax.grad(plain_pg)(jnp.asarray(new))
  np.testing.assert_allclose(
    np.asarray(g), np.asarray(g_pg), rtol=1e-6, atol=1e-7
  )
  # And in closed form: dL/dlogp[b, t] = -A_b * mask[b, t] / n_b.
  n = np.maximum(mask.sum(1), 1)
  np.testing.assert_allclose(
    np.asarray(g), -adv[:, None] * mask / n[:, None], rtol=1e-6, atol=1e-7
  )


def test_gradient_is_zero_where_clipped():
  new = np.array([[math.log(1.5), 0.0]], np.float32)
  g = jax.grad(
    lambda lp: ppo_clip_kl_loss(
      lp,
      np.zeros((1, 2), np.float32),
      np.ones(1, np.float32),
      np.array([[1, 1]], bool),
      kl_beta=0.0,
    )[0]
  )(jnp.asarray(new))
  assert float(g[0, 0]) == 0.0 and float(g[0, 1]) == pytest.approx(-0.5)


def test_padding_with_minus_inf_is_inert():
  new, old, adv, mask = random_batch(4)
  new_p, old_p = new.copy(), old.copy()
  new_p[~mask] = -np.inf
  old_p[~mask] = -np.inf
  out = ppo_clip_kl_loss(new_p, old_p, adv, mask)
  ref = ppo_clip_kl_loss(new, old, adv, mask)
  np.testing.assert_allclose(float(out[0]), float(ref[0]), rtol=1e-6)
  g = jax.grad(lambda lp: ppo_clip_kl_loss(lp, old_p, adv, mask)[0])(
    jnp.asarray(new_p)
  )
  assert np.all(np.isfinite(np.asarray(g)))
  assert np.all(np.asarray(g)[~mask] == 0)


def test_jit_and_bfloat16_inputs():
  new, old, adv, mask = random_batch(5)
  eager = ppo_clip_kl_loss(new, old, adv, mask)
  jitted = jax.jit(ppo_clip_kl_loss)(new, old, adv, mask)
  np.testing.assert_allclose(float(jitted[0]), float(eager[0]), rtol=1e-6)
  out_bf16 = ppo_clip_kl_loss(
    jnp.asarray(new, jnp.bfloat16), jnp.asarray(old, jnp.bfloat16), adv, mask
  )
  assert out_bf16[0].dtype == jnp.float32 and out_bf16[1].dtype == jnp.float32


def test_shape_errors():
  z = np.zeros((2, 3), np.float32)
  with pytest.raises(ValueError, match="advantages"):
    ppo_clip_kl_loss(z, z, np.zeros(3, np.float32), np.ones((2, 3), bool))
  with pytest.raises(ValueError, match=r"\[B, T\]"):
    ppo_clip_kl_loss(
      z, z[:, :2], np.zeros(2, np.float32), np.ones((2, 3), bool)
    )


def test_reference_kl_term_matches_numpy_and_is_zero_at_the_reference():
  new, old, adv, mask = random_batch(3)
  rng = np.random.default_rng(11)
  ref = (new + rng.normal(0.0, 0.4, size=new.shape)).astype(np.float32)
  base_sum, _, base = ppo_clip_kl_loss(new, old, adv, mask)
  loss_sum, denom, m = ppo_clip_kl_loss(
    new, old, adv, mask, logp_ref=ref, ref_kl_beta=0.3
  )
  # k3 of log pi_new - log pi_ref per token, token mean, sample sum.
  expected = 0.0
  for b in range(new.shape[0]):
    idx = np.nonzero(mask[b])[0]
    if idx.size:
      d = new[b, idx].astype(np.float64) - ref[b, idx]
      expected += np.mean(np.exp(-d) - 1 + d)
  assert expected > 0
  np.testing.assert_allclose(float(m["ref_kl"]), expected, rtol=1e-5)
  np.testing.assert_allclose(
    float(loss_sum), float(base_sum) + 0.3 * expected, rtol=1e-5
  )
  assert float(base["ref_kl"]) == 0.0
  # At the reference itself the term and its gradient vanish.
  grad = jax.grad(
    lambda lp, r: ppo_clip_kl_loss(
      lp, old, adv, mask, logp_ref=r, ref_kl_beta=5.0
    )[0]
  )
  np.testing.assert_allclose(
    np.asarray(grad(jnp.asarray(new), jnp.asarray(new))),
    np.asarray(grad(jnp.asarray(new), None)),
    atol=1e-6,
  )
  with pytest.raises(ValueError, match="logp_ref"):
    ppo_clip_kl_loss(new, old, adv, mask, logp_ref=ref[:, :3])
