"""Continued SFT through the RL learner: its update is an NLL gradient step,
its draws are seeded, and its wall-time budget stops it."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_qwen3_config
from flax import nnx

from rla_jax.metrics import rl_step_seconds
from rla_jax.models import Qwen
from rla_jax.models.logprobs import sequence_logprobs
from rla_jax.rl.continued_sft import ContinuedSFTConfig, continued_sft_step
from rla_jax.rl.samples import Sample
from rla_jax.rl.trainer import Learner, OptimConfig

CFG = tiny_qwen3_config(61)


def _demos(n=12, seed=0):
  rng = np.random.RandomState(seed)
  out = []
  for _ in range(n):
    prompt = list(map(int, rng.randint(2, 61, size=rng.randint(3, 9))))
    response = list(map(int, rng.randint(2, 61, size=rng.randint(2, 6))))
    # old log-probs: placeholders, replaced by the policy's per update
    out.append(Sample(prompt, response, np.zeros(len(response)), 1.0))
  return out


def _mean_nll(model, demos):
  """mean_b (1 / n_b) sum_t -log p(response token t): the loss whose
  gradient an advantage-1 PPO update at ratio 1 follows."""
  T = max(len(d.prompt) + len(d.response) for d in demos)
  tokens = np.zeros((len(demos), T), np.int32)
  resp = np.zeros((len(demos), T), np.float32)
  for i, d in enumerate(demos):
    n = len(d.prompt) + len(d.response)
    tokens[i, :n] = d.prompt + d.response
    resp[i, len(d.prompt) : n] = 1.0
  mask = (np.arange(T)[None] < (tokens > 0).sum(1)[:, None]).astype(np.int32)
  lp = sequence_logprobs(model, jnp.asarray(tokens), jnp.asarray(mask), 32)
  per_seq = -(lp * resp).sum(1) / resp.sum(1)
  return per_seq.mean()


def test_update_is_an_nll_gradient_step():
  demos = _demos(4)
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  grads = jax.grad(lambda s: _mean_nll(nnx.merge(graphdef, s), demos))(state)
  before = jax.tree.map(np.asarray, state)
  learner = Learner(
    model, OptimConfig(learning_rate=1e-3, micro_batch_size=2, kl_beta=0.01)
  )
  cfg = ContinuedSFTConfig(updates=1, batch_size=4)
  out = continued_sft_step(learner, demos, cfg, np.random.default_rng(0))
  assert out["sft/updates"] == 1 and out["sft/samples"] == 4
  np.testing.assert_allclose(
    out["sft/nll"], float(_mean_nll(model, demos)), rtol=0.2
  )
  after = jax.tree.map(np.asarray, nnx.state(learner.model()))
  # Adam's first step moves each parameter by about -lr * sign(g).
  agree, total = 0, 0
  for g, b, a in zip(
    jax.tree.leaves(grads),
    jax.tree.leaves(before),
    jax.tree.leaves(after),
    strict=True,
  ):
    g, step = np.asarray(g), a - b
    big = np.abs(g) > 1e-5
    agree += int(np.sum(np.sign(step[big]) == -np.sign(g[big])))
    total += int(big.sum())
  assert total > 1000 and agree / total > 0.99
  assert float(_mean_nll(learner.model(), demos)) < float(
    _mean_nll(model, demos)
  )


def test_draws_are_seeded_and_without_replacement():
  demos = _demos(12)
  seen = []
  for _ in range(2):
    learner = Learner(
      Qwen(CFG, rngs=nnx.Rngs(1)), OptimConfig(1e-3, micro_batch_size=4)
    )
    out = continued_sft_step(
      learner,
      demos,
      ContinuedSFTConfig(updates=3, batch_size=4),
      np.random.default_rng(7),
    )
    assert out["sft/updates"] == 3 and out["sft/samples"] == 12
    seen.append(out["sft/nll"])
  assert seen[0] == seen[1]
  # Fewer demonstrations than the updates ask for: the step stops at them.
  out = continued_sft_step(
    learner,
    demos,
    ContinuedSFTConfig(updates=9, batch_size=5),
    np.random.default_rng(0),
  )
  assert out["sft/updates"] == 2


def test_wall_time_budget_stops_the_step():
  ticks = itertools.count()  # each reading of the clock is one second later
  learner = Learner(Qwen(CFG, rngs=nnx.Rngs(2)), OptimConfig(1e-3))
  out = continued_sft_step(
    learner,
    _demos(40),
    ContinuedSFTConfig(seconds=3.0, updates=99, batch_size=2),
    np.random.default_rng(0),
    clock=lambda: float(next(ticks)),
  )
  assert out["sft/updates"] == 2  # clock read at 0 (start), then 1, 2, 3
  with pytest.raises(ValueError, match="no demonstrations"):
    continued_sft_step(
      learner, [], ContinuedSFTConfig(), np.random.default_rng(0)
    )


def test_rl_step_seconds_leaves_out_the_evaluation():
  history = [
    {"step": 0, "eval/seconds": 9.0},
    {"step": 1, "time/step": 10.0},
    {"step": 2, "time/step": 30.0, "time/eval": 12.5},
  ]
  assert rl_step_seconds(history) == [10.0, 17.5]


def test_the_loop_runs_continued_sft_in_place_of_rl_steps(
  smoke_warm_start, tmp_path
):
  from configs import alfworld
  from rla_jax.metrics import MetricsWriter
  from rla_jax.rl.loops import make_loop

  c = alfworld.get_config("smoke")
  c.warmstart.dir = smoke_warm_start.dir
  c.total_steps = 2
  c.continued_sft.update(enabled=True, updates=2, batch_size=3)
  c.reward.update(use_judge_signal=False, train_rm=False)
  c.adaptation.enabled = False
  loop = make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
  before = jax.tree.map(np.asarray, loop.learners["policy"].state)
  loop.run()
  history = MetricsWriter.read_history(str(tmp_path / "run"))
  assert [row["step"] for row in history] == [0, 1, 2]
  for row in history[1:]:
    assert row["sft/updates"] == 2 and row["sft/samples"] == 6
    assert np.isfinite(row["sft/nll"]) and "train/rollout_accuracy" not in row
  assert "eval/in_distribution_success" in history[-1]
  after = jax.tree.map(np.asarray, loop.learners["policy"].state)
  assert any(
    not np.array_equal(a, b)
    for a, b in zip(
      jax.tree.leaves(after), jax.tree.leaves(before), strict=True
    )
  )


def test_continued_sft_settings_are_checked(smoke_warm_start, tmp_path):
  from configs import alfworld
  from rla_jax.errors import ConfigError
  from rla_jax.rl.loops import make_loop

  c = alfworld.get_config("smoke")
  c.warmstart.dir = smoke_warm_start.dir
  c.continued_sft.update(enabled=True, batch_size=0)
  with pytest.raises(ConfigError, match=r"continued_sft\.batch_size=0"):
    make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
