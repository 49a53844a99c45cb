"""Learner: on-policy ratio, exact micro-batch accumulation, real updates."""

import dataclasses

import jax
import numpy as np
import pytest
from conftest import tiny_qwen3_config
from flax import nnx

from rla_jax.models import Qwen
from rla_jax.rl.samples import Sample, draw_samples, pack_rows, pack_samples
from rla_jax.rl.trainer import Learner, OptimConfig, learning_rate_schedule
from rla_jax.sampling.sampler import Sampler
from rla_jax.warmstart.sft_loss import pack_sft_batch

CFG = tiny_qwen3_config(97)


def _samples(model, seed=0):
  rng = np.random.RandomState(seed)
  prompts = [
    list(map(int, rng.randint(2, 97, size=n))) for n in (3, 9, 14, 5, 7, 11)
  ]
  out = Sampler(model, max_prompt_len=16, max_new_tokens=6).generate(
    prompts, seed=seed
  )
  adv = rng.randn(len(prompts))
  return [
    Sample(p, t, lp, float(a))
    for p, t, lp, a in zip(prompts, out.tokens, out.logprobs, adv, strict=True)
  ]


def test_first_microbatch_ratio_is_one_and_params_move():
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  samples = _samples(model)
  learner = Learner(model, OptimConfig(learning_rate=1e-2, micro_batch_size=2))
  before = jax.tree.map(np.asarray, nnx.state(learner.model()))
  out = learner.update(samples)
  # The sampler's behaviour log-probs equal the trainer's: ratio 1, no clip.
  assert abs(out["first_microbatch_ratio"] - 1.0) < 1e-5
  assert abs(out["ratio"] - 1.0) < 1e-5 and out["clip_frac"] == 0.0
  assert out["num_samples"] == len(samples)
  after = jax.tree.map(np.asarray, nnx.state(learner.model()))
  moved = [
    np.abs(a - b).max()
    for a, b in zip(
      jax.tree.leaves(after), jax.tree.leaves(before), strict=True
    )
  ]
  assert min(moved) > 0
  second = learner.update(samples)  # now off-policy: the ratio moves
  assert abs(second["first_microbatch_ratio"] - 1.0) > 1e-4


@pytest.mark.parametrize("micro", [1, 4])
def test_micro_batch_accumulation_equals_one_batch(micro):
  model = Qwen(CFG, rngs=nnx.Rngs(1))
  samples = _samples(model, seed=1)
  results = {}
  for mb in (micro, 8):
    # Adam's first step moves a parameter by lr * g / (|g| + eps): at the
    # default eps 1e-8 a gradient that nearly cancels to ~eps turns f32
    # summation-order rounding into parameter differences of up to lr (one
    # element of 2,048 differed by 1.006e-6 on a 2-core EPYC). eps 1e-3
    # keeps the step proportional to g there, so the parameters compare
    # the accumulated gradients themselves at the same 1e-6.
    learner = Learner(
      Qwen(CFG, rngs=nnx.Rngs(1)),
      OptimConfig(learning_rate=1e-3, eps=1e-3, micro_batch_size=mb),
    )
    out = learner.update(samples)
    results[mb] = (out, jax.tree.map(np.asarray, nnx.state(learner.model())))
  (a_out, a_params), (b_out, b_params) = results[micro], results[8]
  assert a_out["loss"] == pytest.approx(b_out["loss"], abs=1e-6)
  assert a_out["grad_norm"] == pytest.approx(b_out["grad_norm"], rel=1e-5)
  for x, y in zip(
    jax.tree.leaves(a_params), jax.tree.leaves(b_params), strict=True
  ):
    np.testing.assert_allclose(x, y, atol=1e-6)


def test_pack_samples_rejects_misaligned_logprobs():
  s = Sample([1, 2], [3, 4, 5], np.zeros(2, np.float32), 1.0)
  with pytest.raises(ValueError, match="2 old log-probs for 3 response"):
    pack_samples([s], 8, 1)
  packed = pack_samples(
    [Sample([1, 2], [3], np.ones(1, np.float32), 2.0)], 4, 2
  )
  assert packed["response_mask"].tolist() == [[0, 0, 1, 0], [0, 0, 0, 0]]
  assert packed["old_logprobs"][0, 2] == 1.0


def test_rl_and_sft_batches_share_one_packer():
  """pack_samples and pack_sft_batch are pack_rows with old log-probs /
  weights as the per-response-token values."""
  pairs = [([5, 6, 7], [8, 9]), ([4], [3, 2, 1])]
  values = [np.array([0.5, -1.0]), np.array([2.0, 0.0, 3.0])]
  rows = pack_rows(pairs, values, 6, 3, pad_id=1)
  assert rows["tokens"].tolist() == [
    [5, 6, 7, 8, 9, 1],
    [4, 3, 2, 1, 1, 1],
    [1, 1, 1, 1, 1, 1],
  ]
  assert rows["mask"].tolist() == [
    [1, 1, 1, 1, 1, 0],
    [1, 1, 1, 1, 0, 0],
    [0] * 6,
  ]
  assert rows["response_mask"].tolist() == [
    [0, 0, 0, 1, 1, 0],
    [0, 1, 1, 1, 0, 0],
    [0] * 6,
  ]
  assert rows["response_values"].tolist() == [
    [0, 0, 0, 0.5, -1.0, 0],
    [0, 2.0, 0, 3.0, 0, 0],
    [0] * 6,
  ]
  rl = pack_samples(
    [Sample(p, r, v, 1.5) for (p, r), v in zip(pairs, values, strict=True)],
    6,
    3,
    pad_id=1,
  )
  sft = pack_sft_batch(
    [(p, r, v) for (p, r), v in zip(pairs, values, strict=True)], 3, 6, 1
  )
  for key in ("tokens", "mask"):
    np.testing.assert_array_equal(rl[key], rows[key])
    np.testing.assert_array_equal(sft[key], rows[key])
  np.testing.assert_array_equal(rl["response_mask"], rows["response_mask"])
  np.testing.assert_array_equal(rl["old_logprobs"], rows["response_values"])
  np.testing.assert_array_equal(sft["response_weight"], rows["response_values"])
  assert rl["advantages"].tolist() == [1.5, 1.5, 0.0]
  # SFT: T = the longest sample rounded up; weights default to 1
  sft = pack_sft_batch([([5], [6, 7])], 1, 4, 0)
  assert sft["response_weight"].tolist() == [[0, 1, 1, 0]]
  with pytest.raises(ValueError, match="2 weights for 3 response tokens"):
    pack_sft_batch([([1], [2, 3, 4], [1.0, 1.0])], 1, 8, 0)


def test_ratio_clamp_reaches_the_loss():
  """Behaviour log-probs 5 below the trainer's: every token's log-ratio is
  5, so the mean ratio is e^5 at the default clamp and e^0.5 at 0.5."""
  model = Qwen(CFG, rngs=nnx.Rngs(4))
  samples = _samples(model, seed=4)
  current = Learner(model, OptimConfig()).logprobs(samples)
  shifted = [
    Sample(s.prompt, s.response, lp - 5.0, s.advantage)
    for s, lp in zip(samples, current, strict=True)
  ]
  for clamp, ratio in ((10.0, np.exp(5.0)), (0.5, np.exp(0.5))):
    learner = Learner(
      Qwen(CFG, rngs=nnx.Rngs(4)),
      OptimConfig(learning_rate=1e-3, ratio_clamp=clamp),
    )
    out = learner.update(shifted)
    assert out["ratio"] == pytest.approx(ratio, rel=1e-4)


def test_updates_of_any_size_reuse_one_program_per_length_bucket():
  """Micro-batches run one jitted call each, so a new sample count (1..6
  samples = 1..3 micro-batches of 2) compiles nothing once the sequence
  bucket is warm."""
  from rla_jax.compile_counter import CompileCounter

  model = Qwen(CFG, rngs=nnx.Rngs(2))
  samples = _samples(model, seed=2)
  learner = Learner(model, OptimConfig(learning_rate=1e-3, micro_batch_size=2))
  learner.update(samples)  # warm-up: compiles accumulate + apply
  with CompileCounter() as counter:
    for n in (1, 2, 3, 5, 6, 4):
      out = learner.update(samples[:n])
      assert out["num_samples"] == n
  assert counter.count == 0


def test_one_micro_batch_warms_every_later_micro_batch():
  """The zero carry is placed like the accumulate output, so after an
  update of ONE micro-batch, updates of several compile nothing (an
  uncommitted zero carry compiled a second accumulate program)."""
  from rla_jax.compile_counter import CompileCounter

  model = Qwen(CFG, rngs=nnx.Rngs(2))
  samples = _samples(model, seed=2)
  learner = Learner(model, OptimConfig(learning_rate=1e-3, micro_batch_size=2))
  learner.update(samples[:2])  # warm-up: a single micro-batch
  with CompileCounter() as counter:
    learner.update(samples)  # three micro-batches, same length bucket
  assert counter.count == 0


def test_micro_batches_pad_to_their_own_length_bucket(monkeypatch):
  """Samples of 7..45 tokens span the 32 and 64 buckets: sorted by length,
  micro-batches of 2 pad to their own bucket (32, 32, 64), and the update
  equals one batch padded to 64."""
  from rla_jax.rl import trainer

  model = Qwen(CFG, rngs=nnx.Rngs(3))
  rng = np.random.RandomState(3)
  prompts = [
    list(map(int, rng.randint(2, 97, size=n))) for n in (40, 3, 33, 8, 20, 2)
  ]
  out = Sampler(model, max_prompt_len=48, max_new_tokens=5).generate(
    prompts, seed=3
  )
  samples = [
    Sample(p, t, lp, float(a))
    for p, t, lp, a in zip(
      prompts, out.tokens, out.logprobs, rng.randn(6), strict=True
    )
  ]
  assert sorted(len(s.prompt) + len(s.response) for s in samples)[3] <= 32
  seen = []

  def recording_pack(chunk, seq_len, num_rows, pad_id=0):
    seen.append((num_rows, seq_len))
    return pack_samples(chunk, seq_len, num_rows, pad_id)

  monkeypatch.setattr(trainer, "pack_samples", recording_pack)
  results = {}
  for mb in (2, 8):
    learner = Learner(
      Qwen(CFG, rngs=nnx.Rngs(3)),
      OptimConfig(learning_rate=1e-3, micro_batch_size=mb),
    )
    stats = learner.update(samples)
    results[mb] = (stats, jax.tree.map(np.asarray, nnx.state(learner.model())))
  assert seen == [(2, 32), (2, 32), (2, 64), (8, 64)]
  assert results[2][0]["loss"] == pytest.approx(results[8][0]["loss"], abs=1e-6)
  for x, y in zip(
    jax.tree.leaves(results[2][1]), jax.tree.leaves(results[8][1]), strict=True
  ):
    np.testing.assert_allclose(x, y, atol=1e-5)  # float sum order


def _kl_to_behaviour(learner, samples):
  """Mean over samples of the token-mean k3 KL(behaviour || current), numpy."""
  out = []
  for s, lp in zip(samples, learner.logprobs(samples), strict=True):
    d = np.asarray(s.old_logprobs, np.float64) - lp  # log pi_old - log pi
    out.append(np.mean(np.exp(d) - 1.0 - d))
  return float(np.mean(out))


def test_target_kl_stops_the_epoch_before_an_update_past_the_limit():
  model = Qwen(CFG, rngs=nnx.Rngs(3))
  samples = _samples(model, seed=3) * 2  # 12 samples: 4 updates of 3
  full = Learner(
    Qwen(CFG, rngs=nnx.Rngs(3)),
    OptimConfig(learning_rate=3e-2, micro_batch_size=4),
  )
  assert len(full.train_epoch(samples, 4)) == 4  # target_kl 0: no stop
  # After one big step, the second mini-batch's KL (numpy, at the updated
  # parameters) decides whether the second step runs.
  probe = Learner(
    Qwen(CFG, rngs=nnx.Rngs(3)),
    OptimConfig(learning_rate=3e-2, micro_batch_size=4),
  )
  probe.update(samples[:3])
  kl = _kl_to_behaviour(probe, samples[3:6])
  assert kl > 1e-3
  for target, applied in ((kl / 1.5 * 0.9, 1), (kl / 1.5 * 1.1, 2)):
    learner = Learner(
      Qwen(CFG, rngs=nnx.Rngs(3)),
      OptimConfig(learning_rate=3e-2, micro_batch_size=4, target_kl=target),
    )
    out = learner.train_epoch(samples, 4)
    assert len(out) >= applied
    if applied == 1:
      assert len(out) == 1
      # the stopped epoch left the parameters of its one update
      for x, y in zip(
        jax.tree.leaves(nnx.state(learner.model())),
        jax.tree.leaves(nnx.state(probe.model())),
        strict=True,
      ):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-6)


def test_draw_samples_keeps_order_draws_uniformly_and_is_seeded():
  items = list(range(10))
  assert draw_samples(items, 0, seed=1) == items  # 0 = all
  assert draw_samples(items, 10, seed=1) == items  # they fit
  drawn = draw_samples(items, 4, seed=7)
  assert len(drawn) == 4 == len(set(drawn)) and drawn == sorted(drawn)
  assert drawn == draw_samples(items, 4, seed=7)
  ref = sorted(np.random.default_rng(7).choice(10, size=4, replace=False))
  assert drawn == [int(i) for i in ref]
  # Uniform: over many seeds every item is drawn about 4/10 of the time.
  counts = np.zeros(10)
  for seed in range(2000):
    counts[draw_samples(items, 4, seed=seed)] += 1
  np.testing.assert_allclose(counts / 2000, 0.4, atol=0.05)
  with pytest.raises(ValueError, match="max_samples must be >= 0"):
    draw_samples(items, -1, seed=0)


def _largest_step(learner, samples):
  before = jax.tree.map(np.asarray, nnx.state(learner.model()))
  learner.update(samples)
  after = jax.tree.map(np.asarray, nnx.state(learner.model()))
  return max(
    float(np.abs(a - b).max())
    for a, b in zip(
      jax.tree.leaves(after), jax.tree.leaves(before), strict=True
    )
  )


def test_learning_rate_schedule_warms_up_linearly():
  assert learning_rate_schedule(3e-4, 0) == 3e-4
  assert learning_rate_schedule(3e-4, 1) == 3e-4
  schedule = learning_rate_schedule(4e-4, 4)
  got = [float(schedule(k)) for k in range(6)]
  np.testing.assert_allclose(got, [1e-4, 2e-4, 3e-4, 4e-4, 4e-4, 4e-4])


def test_warm_up_scales_the_learners_first_updates():
  # Adam's first update is lr * sign(g) in every parameter with a gradient:
  # its largest step is the rate of that update.
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  samples = _samples(model)
  cfg = OptimConfig(learning_rate=1e-2, micro_batch_size=2, warmup_updates=4)
  learner = Learner(model, cfg)
  np.testing.assert_allclose(_largest_step(learner, samples), 2.5e-3, 1e-3)
  constant = Learner(Qwen(CFG, rngs=nnx.Rngs(0)), OptimConfig(1e-2))
  np.testing.assert_allclose(_largest_step(constant, samples), 1e-2, 1e-3)
  # A reset optimizer restarts the warm-up.
  learner.reset_optimizer()
  np.testing.assert_allclose(_largest_step(learner, samples), 2.5e-3, 1e-3)


def test_reference_kl_pulls_the_policy_back_to_the_frozen_start():
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  samples = _samples(model)
  start = jax.tree.map(np.asarray, nnx.state(model))
  cfg = OptimConfig(
    learning_rate=1e-2, micro_batch_size=2, kl_beta=0.0, ref_kl_beta=1.0
  )
  learner = Learner(model, cfg)
  first = learner.update(samples)
  assert first["ref_kl"] == 0.0  # the start is the reference
  for _ in range(3):
    learner.update(samples)
  # The reference stays the start although the updates donate the state.
  for a, b in zip(
    jax.tree.leaves(jax.tree.map(np.asarray, learner.ref_state)),
    jax.tree.leaves(start),
    strict=True,
  ):
    np.testing.assert_array_equal(a, b)
  # With no advantage left, only the reference term moves the policy: its
  # KL to the start falls from update to update.
  neutral = [dataclasses.replace(s, advantage=0.0) for s in samples]
  kls = [learner.update(neutral)["ref_kl"] for _ in range(4)]
  assert kls[0] > 1e-4 and kls[-1] < 0.5 * kls[0], kls
  # Without the term no copy is kept.
  plain = Learner(Qwen(CFG, rngs=nnx.Rngs(0)), OptimConfig(1e-2))
  assert plain.ref_state is None and plain.update(samples)["ref_kl"] == 0.0
