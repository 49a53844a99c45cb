"""Continued supervised fine-tuning: the ablation's imitation baseline.

Is RL better than more imitation? In place of an RL step, the policy keeps
training on the warm start's own demonstrations (regenerated from the
resolved warm-start config its marker records: the same games, expert and
verb balance the build trained on) for a wall-time budget or a number of
updates, through the loop's Learner, so the optimizer, checkpoints and
evaluation are the RL runs'.

Each update draws `batch_size` demonstrations and sets their old log-probs
to the current policy's (`Learner.logprobs`): at ratio 1 the PPO-clip loss
with advantage 1 has the gradient of the response tokens' mean
log-likelihood (the clip and the k3 KL term are flat there), so the update
is an SFT step with the RL optimizer. Unlike the warm-start build's SFT it
weights every response token alike (no extra weight on the answer, no
prompt loss). With a wall-time budget the number of updates depends on
the machine, so a resumed run is not update for update the uninterrupted
one; with a number of updates it is (the draws are seeded per RL step).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from rla_jax.errors import ConfigError
from rla_jax.rl.samples import Sample
from rla_jax.rl.trainer import Learner


@dataclasses.dataclass(frozen=True)
class ContinuedSFTConfig:
  """seconds: wall-time budget per RL step (0 = run `updates` updates);
  updates: updates per RL step when seconds is 0; batch_size:
  demonstrations per update."""

  seconds: float = 0.0
  updates: int = 4
  batch_size: int = 16

  @classmethod
  def from_config(cls, section) -> ContinuedSFTConfig:
    """From config.continued_sft; ConfigError naming a bad key."""
    for key, low in (("seconds", 0), ("updates", 1), ("batch_size", 1)):
      value = section[key]
      if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"config continued_sft.{key}={value!r}: not a number")
      if value < low:
        raise ConfigError(
          f"config continued_sft.{key}={value!r} must be >= {low}"
        )
    return cls(
      seconds=float(section.seconds),
      updates=int(section.updates),
      batch_size=int(section.batch_size),
    )


def check_settings(config, given_models: bool) -> None:
  """Raises ConfigError naming the key when config.continued_sft is
  enabled with bad values, or with given model dirs (the demonstrations
  come from a warm start's build config)."""
  section = config.get("continued_sft")
  if section is None or not section.enabled:
    return
  if given_models:
    raise ConfigError(
      "config continued_sft.enabled: the demonstrations come from the "
      "warm start's build config; given model dirs have none"
    )
  ContinuedSFTConfig.from_config(section)


def demonstration_samples(warm_start_config: dict, tokenizer) -> list[Sample]:
  """The policy SFT stage's samples of a warm start (prompt and response
  ids; each demonstration as often as the build's verb balance repeats
  it), as advantage-1 Samples whose old log-probs are filled per update."""
  from rla_jax.warmstart.data import make_data, policy_samples

  pairs = policy_samples(
    tokenizer, make_data(warm_start_config), warm_start_config
  )
  return [
    Sample(list(p), list(r), np.zeros(len(r), np.float32), 1.0)
    for p, r, *_ in pairs
  ]


def continued_sft_step(
  learner: Learner,
  demos: Sequence[Sample],
  cfg: ContinuedSFTConfig,
  rng: np.random.Generator,
  clock: Callable[[], float] = time.perf_counter,
) -> dict:
  """SFT updates on demonstrations drawn by `rng` (without replacement
  within the step) until cfg.seconds have passed (or cfg.updates are done
  when seconds is 0); the step's metrics: sft/updates, sft/samples,
  sft/nll (the drawn response tokens' mean negative log-likelihood, each
  batch before its update) and sft/grad_norm."""
  if not demos:
    raise ValueError("continued SFT: no demonstrations")
  order = rng.permutation(len(demos))
  B, start, out, nll = cfg.batch_size, clock(), [], []
  for first in range(0, len(order) - B + 1, B):
    if cfg.seconds > 0 and clock() - start >= cfg.seconds:
      break
    if cfg.seconds <= 0 and len(out) >= cfg.updates:
      break
    batch = [demos[i] for i in order[first : first + B]]
    current = learner.logprobs(batch)
    nll.append(-float(np.mean(np.concatenate(current))))
    batch = [
      dataclasses.replace(s, old_logprobs=lp)
      for s, lp in zip(batch, current, strict=True)
    ]
    out.append(learner.update(batch))
  metrics = {"sft/updates": len(out), "sft/samples": len(out) * B}
  if out:
    metrics["sft/nll"] = float(np.mean(nll))
    metrics["sft/grad_norm"] = float(np.mean([o["grad_norm"] for o in out]))
  return metrics
