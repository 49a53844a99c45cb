"""Supervised fine-tuning (teacher-forced cross-entropy) of a Qwen model:
the resumable training run.

`train_sft` takes one jitted AdamW step (`sft_loss.sft_step`, the loss and
its batches) per batch on a warmup-cosine schedule, logs, runs a `Probe`
that may stop it at a target competence, and with a checkpoint directory
saves (Orbax) and resumes exactly where an interrupted run stopped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from rla_jax.models.qwen import Qwen
from rla_jax.warmstart.sft_loss import (
  length_grouped_batches,
  pack_sft_batch,
  sft_step,
)


@dataclasses.dataclass(frozen=True)
class SFTConfig:
  steps: int
  batch_size: int
  learning_rate: float
  prompt_weight: float = 0.0
  warmup_frac: float = 0.05
  final_lr_frac: float = 0.1
  weight_decay: float = 0.01
  grad_clip: float = 1.0
  length_multiple: int = 64
  logprob_chunk: int = 128
  # Stop after this many steps of the `steps`-step schedule (0 = run it all):
  # a shorter run that is step for step the start of the full one.
  stop_after: int = 0

  def __post_init__(self):
    if self.steps < 0 or self.batch_size < 1 or self.learning_rate <= 0:
      raise ValueError(f"bad SFT config {self}")
    if not 0 <= self.stop_after <= self.steps:
      raise ValueError(f"stop_after must be in [0, steps], got {self}")
    if self.prompt_weight < 0:
      raise ValueError(f"prompt_weight must be >= 0, got {self.prompt_weight}")


def lr_schedule(cfg: SFTConfig) -> optax.Schedule:
  """Linear warmup to learning_rate, cosine decay to final_lr_frac of it."""
  warm = max(1, int(cfg.warmup_frac * cfg.steps))
  return optax.warmup_cosine_decay_schedule(
    0.0,
    cfg.learning_rate,
    warm,
    max(cfg.steps, warm + 1),
    end_value=cfg.learning_rate * cfg.final_lr_frac,
  )


@dataclasses.dataclass(frozen=True)
class Probe:
  """A periodic measurement during SFT: every `every` steps (and after the
  last), `measure(model)` returns metrics; training stops after the first
  probe whose metrics satisfy `done` (the warm start stops at a target
  competence rather than at a step count)."""

  every: int
  measure: Callable[[Qwen], dict]
  done: Callable[[dict], bool]


@dataclasses.dataclass
class SFTResult:
  """The trained model, logged step metrics, probe results (each with its
  "step") and the number of steps run (< cfg.steps if a probe stopped it)."""

  model: Qwen
  history: list[dict]
  probes: list[dict]
  steps_run: int


def _adamw(cfg: SFTConfig) -> optax.GradientTransformation:
  """AdamW on the lr_schedule after clipping the global gradient norm."""
  return optax.chain(
    optax.clip_by_global_norm(cfg.grad_clip),
    optax.adamw(lr_schedule(cfg), weight_decay=cfg.weight_decay),
  )


def train_sft(
  model: Qwen,
  samples: Sequence[tuple],
  cfg: SFTConfig,
  *,
  seed: int,
  pad_id: int = 0,
  log: Callable[[str], None] = print,
  name: str = "sft",
  log_every: int = 50,
  probe: Probe | None = None,
  checkpoint_dir: str | None = None,
  checkpoint_every: int = 0,
) -> SFTResult:
  """Runs up to cfg.steps AdamW steps on `samples`.

  With `checkpoint_dir`, the parameters, optimizer state, logs and probe
  results are saved (Orbax) every `checkpoint_every` steps and at every
  probe, and a later call with the same arguments resumes from the latest
  save: the batches are a fixed function of `seed`, so the resumed run
  takes the same steps an uninterrupted one would.
  """
  if not samples:
    raise ValueError(f"{name}: no training samples")
  tx = _adamw(cfg)
  graphdef, state = _donatable_split(model)
  progress = _SFTProgress(state, tx.init(state), [], [], 0)
  run = _SFTRun(
    samples=samples,
    cfg=cfg,
    pad_id=pad_id,
    log=log,
    name=name,
    log_every=log_every,
    probe=probe,
    checkpoint_every=checkpoint_every,
    graphdef=graphdef,
    step_fn=_jit_sft_step(graphdef, tx, cfg),
    batches=_batch_order(samples, cfg, seed),
    ckpt=_SFTCheckpoint(checkpoint_dir, name) if checkpoint_dir else None,
  )
  if run.ckpt is not None and run.ckpt.latest() is not None:
    progress = _resume(run, progress)
    if _target_reached_before(run, progress):
      return _result(run, progress, progress.steps_done)
  return _train_steps(run, progress)


@dataclasses.dataclass
class _SFTProgress:
  """Where an SFT run stands: parameters and optimizer state after
  `steps_done` steps, the logged step metrics and the probe results."""

  state: nnx.State
  opt_state: optax.OptState
  history: list[dict]
  probes: list[dict]
  steps_done: int


@dataclasses.dataclass(frozen=True)
class _SFTRun:
  """One train_sft call's fixed parts: its arguments, the model's graphdef,
  the jitted step, the batches (sample indices per step) and checkpoints."""

  samples: Sequence[tuple]
  cfg: SFTConfig
  pad_id: int
  log: Callable[[str], None]
  name: str
  log_every: int
  probe: Probe | None
  checkpoint_every: int
  graphdef: nnx.GraphDef
  step_fn: Callable
  batches: list[np.ndarray]
  ckpt: _SFTCheckpoint | None

  @property
  def last_step(self) -> int:
    """The step count the run ends at: stop_after, else the schedule's."""
    return self.cfg.stop_after or self.cfg.steps


def _donatable_split(model: Qwen) -> tuple[nnx.GraphDef, nnx.State]:
  """(graphdef, a copy of the state): the step donates its state, and the
  copy keeps `model` valid."""
  graphdef, state = nnx.split(model)
  return graphdef, jax.tree.map(jnp.copy, state)


def _jit_sft_step(graphdef, tx, cfg: SFTConfig) -> Callable:
  """The jitted AdamW step (state, opt_state, batch) -> (state, opt_state,
  metrics), donating the state and optimizer state."""
  return jax.jit(
    functools.partial(
      sft_step, graphdef, tx, cfg.prompt_weight, cfg.logprob_chunk
    ),
    donate_argnums=(0, 1),
  )


def _batch_order(samples, cfg: SFTConfig, seed: int) -> list[np.ndarray]:
  """The sample indices of each of the cfg.steps batches: length-grouped,
  a fixed function of `seed`."""
  rng = np.random.default_rng([seed, 0x5F7])
  lengths = [len(s[0]) + len(s[1]) for s in samples]
  return length_grouped_batches(lengths, cfg.batch_size, cfg.steps, rng)


def _resume(run: _SFTRun, progress: _SFTProgress) -> _SFTProgress:
  """The progress of the run's latest checkpoint (restored into the shapes
  of `progress`'s state and optimizer state)."""
  state, opt_state, meta = run.ckpt.restore(progress.state, progress.opt_state)
  resumed = _SFTProgress(
    state, opt_state, meta["history"], meta["probes"], meta["step"]
  )
  run.log(
    f"[warmstart] {run.name}: resumed at step {resumed.steps_done} from "
    f"{run.ckpt.directory}"
  )
  return resumed


def _target_reached_before(run: _SFTRun, progress: _SFTProgress) -> bool:
  """Whether a resumed run's last probe already met the probe's target."""
  return bool(
    progress.probes
    and run.probe is not None
    and run.probe.done(progress.probes[-1])
  )


def _result(run: _SFTRun, progress: _SFTProgress, steps_run: int) -> SFTResult:
  """The SFTResult of `progress`: its model, history and probes."""
  return SFTResult(
    nnx.merge(run.graphdef, progress.state),
    progress.history,
    progress.probes,
    steps_run,
  )


def _train_steps(run: _SFTRun, progress: _SFTProgress) -> SFTResult:
  """Steps from progress.steps_done to the run's last step, logging,
  probing and saving; stops after the first probe that meets its target."""
  last = run.last_step
  for step in range(progress.steps_done, last):
    metrics = _take_step(run, progress, step)
    if step % run.log_every == 0 or step == last - 1:
      _log_step(run, progress, step, metrics)
    stop = _probe_if_due(run, progress)
    if _save_due(run, progress, stop):
      run.ckpt.save(
        progress.steps_done,
        progress.state,
        progress.opt_state,
        progress.history,
        progress.probes,
      )
    if stop:
      run.log(
        f"[warmstart] {run.name}: probe target reached after "
        f"{progress.steps_done} steps"
      )
      return _result(run, progress, progress.steps_done)
  return _result(run, progress, last)


def _take_step(run: _SFTRun, progress: _SFTProgress, step: int) -> dict:
  """One jitted AdamW step on batch `step`, applied to `progress`; returns
  the step's (device) metrics."""
  batch = pack_sft_batch(
    [run.samples[i] for i in run.batches[step]],
    run.cfg.batch_size,
    run.cfg.length_multiple,
    run.pad_id,
  )
  progress.state, progress.opt_state, metrics = run.step_fn(
    progress.state, progress.opt_state, batch
  )
  progress.steps_done = step + 1
  return metrics


def _log_step(
  run: _SFTRun, progress: _SFTProgress, step: int, metrics: dict
) -> None:
  """Appends step `step`'s metrics (as floats, with its "step") to the
  history and logs them."""
  m = {k: float(v) for k, v in jax.device_get(metrics).items()}
  m["step"] = step
  progress.history.append(m)
  run.log(
    f"[warmstart] {run.name} step {step}/{run.cfg.steps} "
    f"loss {m['loss']:.4f} response_loss {m['response_loss']:.4f} "
    f"grad_norm {m['grad_norm']:.3f}"
  )


def _probe_if_due(run: _SFTRun, progress: _SFTProgress) -> bool:
  """Runs the probe if one is due after progress.steps_done steps (every
  probe.every and after the last); whether it met the target."""
  done_steps = progress.steps_done
  if run.probe is None or not (
    done_steps % run.probe.every == 0 or done_steps == run.last_step
  ):
    return False
  model = nnx.merge(run.graphdef, progress.state)
  result = {"step": done_steps, **run.probe.measure(model)}
  progress.probes.append(result)
  run.log(f"[warmstart] {run.name} probe {json.dumps(result)}")
  return run.probe.done(result)


def _save_due(run: _SFTRun, progress: _SFTProgress, stop: bool) -> bool:
  """Whether to checkpoint after progress.steps_done steps: when stopping,
  after the last step, every checkpoint_every steps and after a probe."""
  if run.ckpt is None:
    return False
  done_steps = progress.steps_done
  every = run.checkpoint_every
  return bool(
    stop
    or done_steps == run.last_step
    or (every and done_steps % every == 0)
    or (progress.probes and progress.probes[-1]["step"] == done_steps)
  )


class _SFTCheckpoint:
  """Orbax saves of one SFT run (the loop's checkpointer, one tree)."""

  def __init__(self, directory: str, name: str):
    from rla_jax.checkpoint import LoopCheckpointer

    self.directory = os.path.join(directory, name)
    self.inner = LoopCheckpointer(self.directory, max_to_keep=1)

  def latest(self) -> int | None:
    return self.inner.latest_step()

  def save(self, step, state, opt_state, history, probes) -> None:
    meta = {"step": step, "history": history, "probes": probes}
    self.inner.save(step, {"sft": {"params": state, "opt": opt_state}}, meta)

  def restore(self, state, opt_state):
    trees, meta = self.inner.restore(
      self.latest(), {"sft": {"params": state, "opt": opt_state}}
    )
    return trees["sft"]["params"], trees["sft"]["opt"], meta
