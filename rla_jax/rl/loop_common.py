"""What every RLAnything loop shares: models, learners, samplers, the step
driver, evaluation schedule, metrics and Orbax checkpoint/resume.

Subclasses implement `build_tasks`, `run_step`, `evaluate`, `task_state`
and `load_task_state` (and may override `model_dirs`); `run_step` is built
from the shared phases of `rla_jax.rl.phases` and `train_models`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
import ml_collections
from jax.experimental import multihost_utils

from rla_jax import sharding as shd
from rla_jax.checkpoint import LoopCheckpointer, fingerprint
from rla_jax.cluster import maybe_initialize_distributed
from rla_jax.errors import ConfigError
from rla_jax.metrics import (
  MetricsWriter,
  keys,
  paired_change_lines,
  write_summary,
)
from rla_jax.metrics.progress import RunProgress
from rla_jax.metrics.run_record import write_run_record
from rla_jax.models import load_qwen
from rla_jax.models.gguf_io import cached_gguf_dir
from rla_jax.rl import agent_text
from rla_jax.rl.phases import StepSamples, timed
from rla_jax.rl.samples import draw_samples
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.trainer import Learner, OptimConfig
from rla_jax.sampling.sampler import Sampler
from rla_jax.tokenizer import load_tokenizer

# The two trained models, in the order their seeds are derived.
ROLES = ("policy", "reward")

T = TypeVar("T")

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
MODEL_DIR_KEYS = ("tokenizer_dir", "policy_dir", "reward_dir")
_PACKAGE_PARENT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def gguf_cache_dir(value: str) -> str:
  """config.model.gguf_cache_dir as an absolute path (a relative one is
  relative to the directory holding the rla_jax package, as
  warmstart.dir)."""
  if not isinstance(value, str) or not value:
    raise ConfigError(
      f"config.model.gguf_cache_dir={value!r} must be a non-empty path"
    )
  return os.path.normpath(os.path.join(_PACKAGE_PARENT, value))


def fingerprinted_model(model: ml_collections.ConfigDict) -> dict:
  """config.model as fingerprinted: without gguf_cache_dir (where the
  converted copy lives does not change the run, as warmstart.dir),
  without attention (the kernels compute the same function, to float
  rounding) and without gguf when it is off, so workdirs written before
  these keys existed keep their fingerprint and resume."""
  d = model.to_dict()
  d.pop("gguf_cache_dir", None)
  d.pop("attention", None)
  if not d.get("gguf"):
    d.pop("gguf", None)
  return d


def uses_given_models(config: ml_collections.ConfigDict) -> bool:
  """True when the run's models come from config.model (policy_dir or a
  GGUF model), not from an embedded warm start."""
  return bool(config.model.policy_dir or config.model.get("gguf"))


def check_loop_optim_keys(section, where: str) -> None:
  """Raises ConfigError naming config `where`.<key> unless updates_per_step
  is an int >= 1 and max_samples (when given) an int >= 0: the optimizer
  keys the loop reads itself (OptimConfig checks the learner's)."""
  for key, low in (("updates_per_step", 1), ("max_samples", 0)):
    value = section.get(key, low)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ConfigError(
        f"config {where}.{key}={value!r} must be an int >= {low}"
      )


def primary_builds_first(build: Callable[[], T], barrier: str) -> T:
  """build() on every process, process 0 first.

  For builders that cache their result on shared storage (the embedded warm
  starts): with several processes, process 0 builds, all wait at `barrier`,
  then every process calls build() again and loads the cached result, so
  no two processes write the same cache directory.
  """
  if jax.process_count() > 1:
    if jax.process_index() == 0:
      build()
    multihost_utils.sync_global_devices(barrier)
  return build()


class LoopBase:
  """Drives `run_step` for config.total_steps steps with resume."""

  title = "RLAnything"
  # The setting's summary keys (rla_jax.metrics.summary.summary_markdown).
  summary_keys = keys.SUMMARY_KEYS

  def __init__(
    self, config: ml_collections.ConfigDict, workdir: str, *, log=logging.info
  ):
    self.config, self.workdir, self.log = config, workdir, log
    self._check_settings()  # bad settings fail before any model work
    self._open_workdir()  # an incompatible workdir too
    self._load_models(self.model_dirs())
    self.build_tasks()
    self.metrics = MetricsWriter(workdir, is_primary=self.is_primary)
    self.progress = RunProgress(
      config.total_steps, self.log if self.is_primary else (lambda _: None)
    )

  def _check_settings(self) -> None:
    """The optimizer sections and the setting's own checks
    (`check_config`), before anything is loaded."""
    c = self.config
    self.max_seq_len = c.rollout.max_prompt_len + c.rollout.max_new_tokens
    self.optim_configs = {
      role: OptimConfig.from_config(
        c.optim[role],
        max_seq_len=self.max_seq_len,
        where=f"config.optim.{role}",
      )
      for role in ROLES
    }
    for role in ROLES:
      check_loop_optim_keys(c.optim[role], f"optim.{role}")
    self.check_config()

  def _open_workdir(self) -> None:
    """Creates the workdir, joins a multi-host run and opens the
    checkpoints, refusing (before any model is loaded or compiled) a
    workdir written with an incompatible config."""
    os.makedirs(self.workdir, exist_ok=True)
    # Library users get multi-host startup too; after the launcher's call
    # this is a no-op.
    maybe_initialize_distributed()
    self.is_primary = jax.process_index() == 0
    self.checkpointer = LoopCheckpointer(
      self.workdir, max_to_keep=self.config.checkpoint.keep
    )
    self.fingerprint = fingerprint(self.fingerprint_fields())
    latest = self.checkpointer.latest_step()
    self._resume_meta = (
      self.checkpointer.check_compatible(latest, self.fingerprint)
      if latest is not None
      else None
    )

  def _load_models(self, dirs: dict) -> None:
    """The tokenizer, the mesh, and for each role (policy, reward) its
    model from dirs[role + "_dir"], its Learner and its Sampler."""
    c = self.config
    self.tokenizer = load_tokenizer(dirs["tokenizer_dir"])
    self.stop_ids = agent_text.end_of_turn_ids(self.tokenizer)
    self.pad_id = self.tokenizer.pad_token_id or 0
    self.mesh = shd.make_mesh(c.mesh.data, c.mesh.fsdp, c.mesh.tensor)
    self.learners, self.samplers = {}, {}
    for role in ROLES:
      model = self.load_model(
        dirs[f"{role}_dir"],
        dtype=DTYPES[c.model.dtype],
        param_dtype=DTYPES[c.model.param_dtype],
        remat=c.model.remat,
        attention=c.model.attention,
        sharding_fn=shd.param_sharding_fn(self.mesh, shd.TRAIN_RULES),
      )
      self.learners[role] = Learner(
        model, self.optim_configs[role], mesh=self.mesh, pad_id=self.pad_id
      )
      self.samplers[role] = Sampler(
        self.learners[role].model(),
        max_prompt_len=c.rollout.max_prompt_len,
        max_new_tokens=c.rollout.max_new_tokens
        if role == "policy"
        else c.reward.max_new_tokens,
        stop_token_ids=self.stop_ids,
        pad_id=self.pad_id,
        mesh=self.mesh if jax.device_count() > 1 else None,
        prefill_rows=c.rollout.get("prefill_rows", 0),
        prefill_tokens=c.rollout.get("prefill_tokens", 0),
        limit_key="config.rollout.max_prompt_len",
        **self.sampler_options(role),
      )

  # ------------------------------------------------------------- hooks
  def check_config(self) -> None:
    """Raises ConfigError naming the key of an inconsistent setting."""

  def fingerprint_fields(self) -> dict:
    c = self.config
    return {
      "name": c.name,
      "seed": c.seed,
      "model": fingerprinted_model(c.model),
      "env": c.env.to_dict(),
      "reward": c.reward.to_dict(),
      "adaptation": c.adaptation.to_dict(),
    }

  def model_dirs(self) -> dict:
    """The configured model directories. With config.model.gguf set, the
    converted GGUF model (cached in model.gguf_cache_dir, converted on
    first use) fills every one of them left empty."""
    m = self.config.model
    dirs = {k: m[k] for k in MODEL_DIR_KEYS}
    if m.get("gguf"):
      cache = gguf_cache_dir(m.gguf_cache_dir)
      converted = primary_builds_first(
        lambda: cached_gguf_dir(m.gguf, cache, log=self.log), "rla_jax_gguf"
      )
      dirs = {k: v or converted for k, v in dirs.items()}
    for key, value in dirs.items():
      if not os.path.isdir(value):
        raise ConfigError(
          f"config.model.{key}: directory {value!r} does not exist"
        )
    return dirs

  def load_model(self, path: str, **kw):
    """A role's model from its checkpoint directory (`load_qwen`'s
    keywords); the GUI loop loads Qwen3-VL."""
    return load_qwen(path, **kw)

  def sampler_options(self, role: str) -> dict:
    """Extra `Sampler` keywords of a role (e.g. its image grids)."""
    del role
    return {}

  def build_tasks(self):
    raise NotImplementedError

  def run_step(self, step: int) -> dict:
    raise NotImplementedError

  def evaluate(self, step: int) -> dict:
    raise NotImplementedError

  def task_state(self) -> dict:
    raise NotImplementedError

  def load_task_state(self, d: dict) -> None:
    raise NotImplementedError

  # ------------------------------------------------------------- shared
  @property
  def policy_sampler(self) -> Sampler:
    return self.samplers["policy"]

  @property
  def reward_sampler(self) -> Sampler:
    return self.samplers["reward"]

  def train(self, role: str, samples, step: int) -> dict:
    """One epoch of `updates_per_step` optimizer steps for `role` over at
    most `max_samples` of the step's samples (`draw_samples`, seeded by
    the config seed, the step and the role)."""
    c = self.config.optim[role]
    learner = self.learners[role]
    available = len(samples)
    samples = draw_samples(
      samples,
      c.max_samples,
      derive_seed(self.config.seed, step, 5, ROLES.index(role)),
    )
    if c.reset_optimizer_each_step:
      learner.reset_optimizer()
    out = learner.train_epoch(
      samples,
      c.updates_per_step,
      lambda done, total: self.progress.phase(
        f"{role} training", done, total, "samples"
      ),
    )
    if out:
      self.samplers[role].update_params(learner.model())
    # fewer than updates_per_step when target_kl stopped the epoch
    metrics = {
      f"{role}/updates": len(out),
      f"{role}/samples_available": available,
      f"{role}/samples_trained": len(samples),
    }
    keys = (
      "loss",
      "pg_loss",
      "kl",
      "ref_kl",
      "clip_frac",
      "grad_norm",
      "ratio",
    )
    for key in keys:
      if out:
        metrics[f"{role}/{key}"] = sum(o[key] for o in out) / len(out)
    if out:
      metrics[f"{role}/first_microbatch_ratio"] = out[0][
        "first_microbatch_ratio"
      ]
    return metrics

  def train_models(
    self, samples: StepSamples, step: int, timings: dict
  ) -> dict:
    """Phase 6 of an RL step: the policy, then (reward.train_rm) the reward
    model, each for one epoch; their wall time is timings["training"]."""
    with timed(timings, "training"):
      metrics = dict(self.train("policy", samples.policy, step))
      if self.config.reward.train_rm:
        metrics.update(self.train("reward", samples.reward, step))
    return metrics

  def _trees(self) -> dict:
    return {
      role: {"params": learner.state, "opt_state": learner.opt_state}
      for role, learner in self.learners.items()
    }

  def save(self, step: int) -> None:
    meta = {
      "step": step,
      "config_fingerprint": self.fingerprint,
      "tasks": self.task_state(),
    }
    self.checkpointer.save(step, self._trees(), meta)

  def restore(self) -> int:
    """Restores the latest checkpoint; returns the next step to run."""
    latest = self.checkpointer.latest_step()
    if latest is None:
      return 0
    trees, meta = self.checkpointer.restore(latest, self._trees())
    for role, learner in self.learners.items():
      learner.state = trees[role]["params"]
      learner.opt_state = trees[role]["opt_state"]
      self.samplers[role].update_params(learner.model())
    self.load_task_state(meta["tasks"])
    self.log(f"resumed from checkpoint step {latest} in {self.workdir}")
    return latest + 1

  def _timed_evaluation(self, step: int) -> dict:
    """`evaluate(step)`, with its progress lines and wall time."""
    t0 = time.perf_counter()
    self.progress.begin_eval(step)
    out = self.evaluate(step)
    self.progress.end_eval(
      step, time.perf_counter() - t0, out.get(keys.EVAL_FULL_SECONDS_ESTIMATE)
    )
    return out

  def run(self) -> list[dict]:
    """Runs (or resumes) the loop; returns the metrics history.

    Metrics row 0 is the evaluation before any update; row s + 1 holds RL
    step s (so a row's index is the number of completed RL steps).
    """
    c = self.config
    start = self.restore()
    self.metrics.truncate_after(start + 1 if start else 0)
    if start == 0 and c.eval.at_start:
      self.metrics.write(0, self._timed_evaluation(-1))
    for step in range(start, c.total_steps):
      t0 = time.perf_counter()
      self.progress.begin_step(step)
      metrics = self.run_step(step)
      self.progress.end_step(step, time.perf_counter() - t0)
      last = step == c.total_steps - 1
      if (c.eval.every and (step + 1) % c.eval.every == 0) or last:
        te = time.perf_counter()
        metrics.update(self._timed_evaluation(step))
        metrics["time/eval"] = time.perf_counter() - te
      metrics["time/step"] = time.perf_counter() - t0
      self.metrics.write(step + 1, metrics)
      if c.checkpoint.every and ((step + 1) % c.checkpoint.every == 0 or last):
        self.save(step)
    history = MetricsWriter.read_history(self.workdir)
    if self.is_primary and history:
      md, png = write_summary(
        history, self.workdir, title=self.title, expected=self.summary_keys
      )
      changes = [f"{line}\n" for line in paired_change_lines(history)]
      self.log(f"{''.join(changes)}summary: {md}\ncurves: {png}")
      # What the run was (its whole config): lets launch/ablation.py read
      # this run later instead of running it again.
      write_run_record(self.workdir, c)
    self.metrics.close()
    self.checkpointer.close()
    return history
