"""Supervised fine-tuning (teacher-forced cross-entropy) of a Qwen model.

Samples are (prompt ids, response ids[, per-response-token weights]) packed
right-padded into [B, T] rows. The loss of a batch is the weighted mean token
negative log-likelihood

    L = sum_{b,t} w_{b,t} * -log p(x_{b,t} | x_{b,<t}) / sum_{b,t} w_{b,t},

with w = the sample's response weight (default 1) on response tokens and
w = prompt_weight on prompt tokens after the first (prompt_weight = 0: plain
response-only SFT; > 0 adds a language modelling term on the prompt, which
gives a tiny model many more training tokens per forward pass). Rows are
packed and log-probs computed as in RL training (`pack_rows`,
`sequence_logprobs`: chunked, no [B, T, V] tensor). One jitted AdamW step
per batch; the sequence length is rounded up to a multiple of
`length_multiple` so few shapes are compiled.
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

from rla_jax.models.logprobs import sequence_logprobs
from rla_jax.models.qwen import Qwen
from rla_jax.rl.samples import pack_rows


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


def _sft_step(graphdef, tx, prompt_weight, chunk, state, opt_state, batch):
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
      _sft_step, graphdef, tx, cfg.prompt_weight, cfg.logprob_chunk
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
