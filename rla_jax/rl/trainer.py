"""Partitioned PPO-clip training of a Qwen model on (prompt, response) samples.

One `Learner` owns a model's parameters and AdamW state, placed on a device
mesh with the training rules (fsdp x tensor). `Learner.update` runs one
optimizer step over a mini-batch with exact micro-batch accumulation: one
jitted call per micro-batch adds its gradient of the loss numerator and its
denominator (from `ppo_clip_kl_loss`) to running sums (`GradAccumulator`),
and a jitted apply divides once, so the gradient equals the one-big-batch
gradient. Programs compiled: one accumulate per sequence-length bucket, one
apply; samples are sorted by length so each micro-batch pads only to its
own bucket. Log-probs are computed in sequence chunks (`sequence_logprobs`),
so no [B, T, V] tensor is built.

The same learner trains the policy and the reward model (the paper trains
both with the same loss).

The step's jitted pieces (the micro-batch gradient, the apply) are pure
functions in `rla_jax.rl.train_step`; the batch log-probs are
`rla_jax.models.logprobs.batch_logprobs`.

Multi-process: every process calls `update` with the same global samples
(checked); each process uploads only the rows its devices hold, and the
parameters and optimizer state stay sharded over all processes' devices.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rla_jax import distributed
from rla_jax import sharding as shd
from rla_jax.config_fields import from_section
from rla_jax.models.qwen import Qwen
from rla_jax.rl import train_step
from rla_jax.rl.losses import METRIC_NAMES
from rla_jax.rl.samples import Sample, pack_image_inputs, pack_samples
from rla_jax.sampling.buckets import geometric_buckets, pick_bucket

# The packed arrays `batch_logprobs` reads.
_LOGPROB_KEYS = ("tokens", "mask", "positions", "feature_rows", "images")

# Keys of a config.optim.<role> section read by the loop (LoopBase.train),
# not by the learner.
OPTIM_LOOP_KEYS = (
  "updates_per_step",
  "reset_optimizer_each_step",
  "max_samples",
)


@dataclasses.dataclass(frozen=True)
class OptimConfig:
  """AdamW (learning_rate, b1, b2, eps, weight_decay, grad_clip: global-norm
  clipping, warmup_updates: `learning_rate_schedule`), the PPO-clip loss
  (clip_eps, kl_beta, ratio_clamp, ref_kl_beta), the update layout
  (micro_batch_size rows per jitted call, logprob_chunk sequence positions
  per vocabulary projection, max_seq_len the longest sample) and early stopping
  (target_kl). Built from a config section by `from_config`."""

  learning_rate: float = 1e-6
  # Linear warm-up over the first optimizer updates (0 = constant rate).
  warmup_updates: int = 0
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.0
  grad_clip: float = 1.0
  clip_eps: float = 0.2
  kl_beta: float = 0.01
  # Weight of the k3 KL to the reference policy: the parameters the learner
  # was built with (the warm start), kept frozen. 0 keeps no copy.
  ref_kl_beta: float = 0.0
  # |log-ratio| bound before exp in the loss (`ppo_clip_kl_loss`).
  ratio_clamp: float = 10.0
  micro_batch_size: int = 4
  logprob_chunk: int = 128
  max_seq_len: int = 4096
  # PPO early stopping (`target_kl` of OpenAI Spinning Up's PPO and of SB3):
  # an epoch stops before an update whose mini-batch already shows a mean
  # k3 KL to the behaviour policy above 1.5 * target_kl. 0 disables it.
  target_kl: float = 0.0

  @classmethod
  def from_config(
    cls, section, *, max_seq_len: int, where: str = "config.optim"
  ) -> OptimConfig:
    """Every field from the key of its name in `section` (a config.optim.<role>
    ConfigDict) except max_seq_len, which the loop derives from the rollout
    lengths; the loop's own keys (OPTIM_LOOP_KEYS) are accepted and skipped.

    Raises:
      ConfigError: naming the key (`where`.<key>) of a missing field, an
        unknown key or a value of the wrong type.
    """
    return from_section(
      cls,
      section,
      where=where,
      given={"max_seq_len": max_seq_len},
      other_keys=OPTIM_LOOP_KEYS,
    )


def learning_rate_schedule(learning_rate: float, warmup_updates: int):
  """The rate of optimizer update k (k = 0, 1, ...):

    lr_k = learning_rate * min(1, (k + 1) / warmup_updates)

  so the first update takes learning_rate / warmup_updates and update
  warmup_updates - 1 onwards the full rate. Adam's first update is a sign
  step of size lr in every parameter whatever the gradient's scale; the
  warm-up lets the moments settle first. warmup_updates <= 1 returns the
  constant `learning_rate` (a float, so AdamW keeps no schedule count).
  """
  if warmup_updates <= 1:
    return learning_rate

  def schedule(count):
    return learning_rate * jnp.minimum(1.0, (count + 1) / warmup_updates)

  return schedule


def clipped_adamw(cfg: OptimConfig) -> optax.GradientTransformation:
  """The optimizer of both models: gradients clipped to global norm
  cfg.grad_clip, then AdamW (b1, b2, eps, weight decay) at
  cfg.learning_rate after a linear warm-up of cfg.warmup_updates updates
  (`learning_rate_schedule`)."""
  return optax.chain(
    optax.clip_by_global_norm(cfg.grad_clip),
    optax.adamw(
      learning_rate_schedule(cfg.learning_rate, cfg.warmup_updates),
      b1=cfg.b1,
      b2=cfg.b2,
      eps=cfg.eps,
      weight_decay=cfg.weight_decay,
    ),
  )


class Learner:
  """Parameters + optimizer of one model, and its jitted update."""

  def __init__(
    self,
    model: Qwen,
    cfg: OptimConfig,
    *,
    mesh: Mesh | None = None,
    rules=shd.TRAIN_RULES,
    pad_id: int = 0,
  ):
    self.cfg = cfg
    self.pad_id = pad_id
    self.vl_cfg = getattr(model, "vl_cfg", None)  # a Qwen3-VL model
    if mesh is None:  # one local device; all devices when multi-process
      mesh = (
        shd.make_mesh(1, -1, 1)
        if distributed.is_multiprocess()
        else shd.make_mesh(1, 1, 1, devices=jax.devices()[:1])
      )
    self.mesh = mesh
    self.rules = rules
    model = shd.shard_module(model, self.mesh, rules)
    self.graphdef, self.state = nnx.split(model)
    self.tx = clipped_adamw(cfg)
    state_sh = jax.tree.map(lambda x: x.sharding, self.state)
    # The reference policy: a frozen copy in buffers of its own (the
    # update donates self.state's).
    self.ref_state = (
      jax.jit(lambda s: jax.tree.map(jnp.copy, s), out_shardings=state_sh)(
        self.state
      )
      if cfg.ref_kl_beta > 0
      else None
    )
    self.reset_optimizer()
    self._batch_axis = dict(rules).get("batch")
    self._jit_update_programs(state_sh)
    self.seq_buckets = geometric_buckets(
      32, cfg.max_seq_len, per_octave=4, multiple=32
    )

  def _jit_update_programs(self, state_sh) -> None:
    """The jitted pieces of one update (`train_step`), with the state's
    shardings state_sh: accumulate a micro-batch's gradients, apply them,
    and a zero accumulator."""
    cfg = self.cfg
    opt_sh = jax.tree.map(lambda x: x.sharding, self.opt_state)
    self._accumulate = jax.jit(
      functools.partial(train_step.accumulate, self.graphdef, cfg),
      donate_argnums=(2,),
    )
    # (the accumulator is not donated: no output has its shapes left to
    # reuse it)
    self._apply = jax.jit(
      functools.partial(train_step.apply_gradients, self.tx),
      donate_argnums=(0, 1),
      out_shardings=(state_sh, opt_sh, None),
    )
    # The zero accumulator is placed exactly like _accumulate's output, so
    # a bucket's first and later micro-batches share one program.
    rep = NamedSharding(self.mesh, P())
    self._zero_accumulator = jax.jit(
      train_step.GradAccumulator.zeros,
      out_shardings=train_step.GradAccumulator(
        grads=state_sh,
        loss_sum=rep,
        denom=rep,
        metric_sums={k: rep for k in METRIC_NAMES},
      ),
    )

  @property
  def _fully_addressable(self) -> bool:
    return all(
      d.process_index == jax.process_index() for d in self.mesh.devices.flat
    )

  # ------------------------------------------------------------ models
  def model(self) -> Qwen:
    """The current model (shares this learner's parameter arrays)."""
    return nnx.merge(self.graphdef, self.state)

  def reset_optimizer(self) -> None:
    """Fresh AdamW state (committed to its devices, so the jitted step sees
    the same input placement on every call and never recompiles)."""
    opt_state = jax.jit(self.tx.init)(self.state)
    # Leaves not derived from a parameter (the step count) land on one
    # device; replicate them over the mesh (needed when it spans processes).
    mesh_devices = set(self.mesh.devices.flat)
    replicated = NamedSharding(self.mesh, P())
    self.opt_state = jax.tree.map(
      lambda x: (
        jax.device_put(x, x.sharding)
        if x.sharding.device_set == mesh_devices
        else distributed.put_global(np.asarray(x), replicated)
      ),
      opt_state,
    )

  # ------------------------------------------------------------ update
  def _micro_rows(self) -> int:
    b = self.cfg.micro_batch_size
    axes = (
      (self._batch_axis,)
      if isinstance(self._batch_axis, str)
      else (self._batch_axis or ())
    )
    div = math.prod(self.mesh.shape[a] for a in axes)
    return -(-b // div) * div

  def update(
    self, samples: Sequence[Sample], max_kl: float | None = None
  ) -> dict[str, float] | None:
    """One optimizer step on `samples` (accumulated over micro-batches of
    `micro_batch_size` rows; the last one is padded with empty rows).

    With `max_kl`, the step is not applied (and None is returned) when the
    samples' mean k3 KL to their behaviour log-probs, at the current
    parameters, exceeds it."""
    if not samples:
      raise ValueError("update() needs at least one sample")
    # The step's gradient is a sum over samples, so their grouping into
    # micro-batches is free: sorted by length (stable), each micro-batch is
    # padded only to its own longest sample's bucket.
    samples = sorted(samples, key=lambda s: len(s.prompt) + len(s.response))
    b = self._micro_rows()
    acc, first_ratio = self._zero_accumulator(self.state), None
    for i in range(0, len(samples), b):
      chunk = samples[i : i + b]
      T = pick_bucket(
        len(chunk[-1].prompt) + len(chunk[-1].response),
        self.seq_buckets,
        "sample length",
      )
      packed = pack_samples(chunk, T, b, self.pad_id)
      packed.update(pack_image_inputs(chunk, T, b, self.vl_cfg))
      batch = self._place_batch(packed)
      acc, ratio = self._accumulate(self.state, self.ref_state, acc, batch)
      first_ratio = ratio if first_ratio is None else first_ratio
    if max_kl is not None:
      denom, kl_sum = distributed.to_host((acc.denom, acc.metric_sums["kl"]))
      if float(denom) > 0 and float(kl_sum) / float(denom) > max_kl:
        return None
    self.state, self.opt_state, out = self._apply(
      self.state, self.opt_state, acc
    )
    # mean PPO ratio of the first micro-batch: 1 when the behaviour
    # log-probs equal the trainer's (on-policy, before any update).
    out["first_microbatch_ratio"] = first_ratio
    return {k: float(v) for k, v in distributed.to_host(out).items()}

  def _place_batch(self, packed: dict) -> dict:
    """Packed numpy arrays placed on the mesh: rows sharded over the batch
    axis, an `ImageBatch`'s pixels replicated (checked to be the same on
    every process first, when the mesh spans processes)."""
    if not self._fully_addressable:
      distributed.assert_same_on_all_processes(
        "Learner.update samples", *jax.tree.leaves(packed)
      )
    replicated = NamedSharding(self.mesh, P())

    def place(key, v):
      if key == "images":
        return jax.tree.map(lambda x: distributed.put_global(x, replicated), v)
      spec = P(self._batch_axis, *([None] * (v.ndim - 1)))
      return distributed.put_global(v, NamedSharding(self.mesh, spec))

    return {k: place(k, v) for k, v in packed.items()}

  def train_epoch(
    self,
    samples: Sequence[Sample],
    num_updates: int,
    progress: Callable[[int, int], None] | None = None,
  ) -> list[dict[str, float]]:
    """Splits samples (kept in order) into num_updates optimizer steps; the
    metrics of the steps applied. With cfg.target_kl > 0 the epoch stops at
    the first mini-batch whose KL exceeds 1.5 * target_kl (`update`).
    progress(samples done, samples), if given, follows every update."""
    if not samples:
      return []
    n = max(1, min(num_updates, len(samples)))
    size = -(-len(samples) // n)
    max_kl = 1.5 * self.cfg.target_kl if self.cfg.target_kl > 0 else None
    out = []
    for i in range(0, len(samples), size):
      metrics = self.update(samples[i : i + size], max_kl=max_kl)
      if metrics is None:
        break
      out.append(metrics)
      if progress is not None:
        progress(min(i + size, len(samples)), len(samples))
    return out

  # ------------------------------------------------------------ checks
  def logprobs(self, samples: Sequence[Sample]) -> list[np.ndarray]:
    """Trainer-side log-probs of each sample's response tokens."""
    longest = max(len(s.prompt) + len(s.response) for s in samples)
    T = pick_bucket(longest, self.seq_buckets, "sample length")
    packed = pack_samples(samples, T, len(samples), self.pad_id)
    packed.update(pack_image_inputs(samples, T, len(samples), self.vl_cfg))
    batch = {k: v for k, v in packed.items() if k in _LOGPROB_KEYS}
    lp = train_step.state_logprobs(
      self.graphdef, self.state, batch, self.cfg.logprob_chunk
    )
    lp = distributed.to_host(lp)
    return [
      lp[i, len(s.prompt) : len(s.prompt) + len(s.response)]
      for i, s in enumerate(samples)
    ]
