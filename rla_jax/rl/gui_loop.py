"""The RLAnything closed loop in the GUI setting (MiniWoB++ in headless
Chromium, or OSWorld desktops; a Qwen3-VL policy and a Qwen3-VL screenshot
judge).

One RL step (`run_step`; all randomness derived from (seed, step)), its
phases in the order the code runs them (`rla_jax.rl.phases`):
  1. Draw tasks: env.num_tasks slots without a pending candidate, and every
     pending candidate.
  2. Roll out every group env.rollouts_per_task times (the same seeded
     page instance; one sampler call per turn for all live agents).
  3. Resolve candidates by the acceptance rule on their accuracy.
  4. Judge: m screenshot judgements of every step of the episodes used.
  5. Build samples: R = O + lambda * mean(S) with step-index
     standardisation for the policy, consistency feedback R * S for the
     judge (`training_data.task_samples`), each sample with its images.
  6. Train the policy and the judge.
  7. Adapt (`rla_jax.rl.gui_adaptation`): tasks outside the band get a
     harder / easier rewrite within their family
     (`envs.gui.tasks.propose_gui_variant`); each proposal's critic summary
     (what the judge saw, which the reference leaves empty) is written to
     critic_summaries.jsonl.
  8. Step metrics (`rla_jax.rl.gui_metrics`); the first episode of the step
     is saved as frames with its actions drawn
     (workdir/episodes/step_NNNN/).
"""

from __future__ import annotations

import os

import numpy as np

from rla_jax.envs.gui.render import save_episode_frames
from rla_jax.envs.gui.tasks import (
  MAX_STEPS,
  GuiTask,
  OSWorldTask,
  gui_task_set,
  load_osworld_examples,
)
from rla_jax.errors import ConfigError
from rla_jax.models.qwen3_vl import Qwen3VLConfig, load_qwen3_vl
from rla_jax.models.qwen3_vl import inputs as vision_inputs
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.gui_adaptation import CriticLog, adapt_gui_tasks
from rla_jax.rl.gui_metrics import evaluation_metrics, step_metrics
from rla_jax.rl.gui_rollout import (
  GuiEpisode,
  ScreenshotEncoder,
  judge_gui_episodes,
  rollout_gui_episodes,
)
from rla_jax.rl.loop_common import (
  LoopBase,
  primary_builds_first,
  uses_given_models,
)
from rla_jax.rl.phases import (
  StepJudgements,
  StepRollouts,
  StepSamples,
  adaptation_metrics,
  draw_task_groups,
  group_rows,
  resolve_candidates,
  timed,
  timing_metrics,
)
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.training_data import RewardConfig, task_samples
from rla_jax.sampling.settings import SamplingParams

BACKENDS = ("miniwob", "osworld")


class GuiLoop(LoopBase):
  """Qwen3-VL policy + screenshot judge + adaptive MiniWoB++ task set."""

  title = "RLAnything on GUI tasks"

  # ------------------------------------------------------------ models
  def check_config(self) -> None:
    c = self.config
    RewardConfig.from_config(c.reward)
    if c.env.backend not in BACKENDS:
      raise ConfigError(
        f"config env.backend={c.env.backend!r} must be one of {BACKENDS}"
      )
    if c.preset == "paper" and not uses_given_models(c):
      raise ConfigError(
        "config gui:paper needs config.model.policy_dir, reward_dir and "
        "tokenizer_dir (local Qwen3-VL-8B directories)"
      )
    if c.env.backend == "osworld":
      self._check_osworld(c.env.osworld)
    if c.env.num_tasks < 1 or c.env.num_slots < c.env.num_tasks:
      raise ConfigError(
        f"config env.num_slots={c.env.num_slots} must be >= "
        f"env.num_tasks={c.env.num_tasks} >= 1"
      )
    if c.env.history_images < 1:
      raise ConfigError(
        f"config env.history_images={c.env.history_images} must be >= 1"
      )

  @staticmethod
  def _check_osworld(o) -> None:
    """env.osworld: an examples directory, and desktop-env unless the
    desktops are recorded trajectories (recorded_dir)."""
    import importlib.util

    if not o.examples_dir or not os.path.isdir(o.examples_dir):
      raise ConfigError(
        f"config env.osworld.examples_dir={o.examples_dir!r}: set it to a "
        "directory of OSWorld example JSONs (OSWorld's "
        "evaluation_examples/examples)"
      )
    if o.recorded_dir:
      if not os.path.isdir(o.recorded_dir):
        raise ConfigError(
          f"config env.osworld.recorded_dir={o.recorded_dir!r} not found"
        )
    elif importlib.util.find_spec("desktop_env") is None:
      raise ConfigError(
        "config env.backend='osworld' needs the desktop-env package "
        "(pip install desktop-env) and a VM provider (docs/GUI.md)"
      )

  def model_dirs(self) -> dict:
    if uses_given_models(self.config):
      dirs = super().model_dirs()
    else:
      from rla_jax.warmstart.gui import embedded_gui_models

      dirs = primary_builds_first(
        lambda: embedded_gui_models(self.config, log=self.log),
        "rla_jax_gui_models",
      )
    self.vl_cfg = Qwen3VLConfig.from_json_file(
      os.path.join(dirs["policy_dir"], "config.json")
    )
    self.encoder = ScreenshotEncoder(
      vision_inputs.load_image_processor(dirs["policy_dir"], self.vl_cfg),
      self.vl_cfg,
    )
    return dirs

  def load_model(self, path: str, **kw):
    return load_qwen3_vl(path, **kw)

  def sampler_options(self, role: str) -> dict:
    """One image grid (the fixed screenshot size), and image counts padded
    to the most a call holds, so every image call of a batch bucket shares
    one program."""
    c = self.config
    if c.env.backend == "osworld":
      h, w = c.env.osworld.screen_height, c.env.osworld.screen_width
    else:
      h, w = 210 * c.env.screenshot_scale, 160 * c.env.screenshot_scale
    grid = self.encoder.image(np.zeros((h, w, 3), np.uint8)).grid
    if role == "policy":
      most = c.env.num_browsers * c.env.history_images
    else:
      most = 3 * max(1, c.reward.judge_batch // c.reward.m)
    return {"image_grids": [grid], "images_per_grid": most}

  # ------------------------------------------------------------ tasks
  def build_tasks(self):
    c = self.config
    if c.env.backend == "osworld":
      self._build_osworld_tasks()
    else:
      self._build_miniwob_tasks()
    self.reward_cfg = RewardConfig.from_config(c.reward)

  def _build_osworld_tasks(self) -> None:
    """Training tasks: the first env.num_slots examples (sorted ids) of
    env.osworld.examples_dir; evaluation: the next eval.num_tasks (the
    first ones again when the directory holds no more)."""
    from rla_jax.envs.gui.osworld import OSWorldEnvironment, RecordedDesktop

    c, o = self.config, self.config.env.osworld
    try:
      examples = load_osworld_examples(o.examples_dir)
    except ValueError as e:
      raise ConfigError(f"config env.osworld.examples_dir: {e}") from None
    ids = sorted(examples)
    n = c.env.num_slots
    train = [OSWorldTask(i, c.env.max_steps) for i in ids[:n]]
    rest = ids[n:] or ids
    self.eval_tasks = [
      OSWorldTask(i, c.env.max_steps) for i in rest[: c.eval.num_tasks]
    ]
    self._set_tasks(train)
    factory = (
      (lambda: RecordedDesktop(o.recorded_dir)) if o.recorded_dir else None
    )
    self.env = OSWorldEnvironment(
      examples,
      num_envs=c.env.num_browsers,
      desktop_kwargs=o.desktop.to_dict(),
      desktop_factory=factory,
      pause_seconds=o.pause_seconds,
      reset_wait_seconds=o.reset_wait_seconds,
      max_steps=MAX_STEPS,  # the loop ends episodes at their task's budget
    )

  def _set_tasks(self, train) -> None:
    c = self.config
    self.registry = {t.task_id: t for t in train}
    self.pool = TaskPool(
      list(self.registry), low=c.adaptation.low, high=c.adaptation.high
    )

  def _build_miniwob_tasks(self) -> None:
    from rla_jax.envs.gui.miniwob import MiniWobConfig, MiniWobEnvironment

    c = self.config
    families, levels = tuple(c.env.families), tuple(c.env.levels)
    train = gui_task_set(
      families, levels, c.env.num_slots, c.seed * 1000, c.env.max_steps
    )
    self._set_tasks(train)
    # Held-out instances: seeds far from the training ones.
    self.eval_tasks = gui_task_set(
      families, levels, c.eval.num_tasks, 10**6 + c.eval.seed, c.env.max_steps
    )
    self.env = MiniWobEnvironment(
      MiniWobConfig(
        num_envs=c.env.num_browsers, screenshot_scale=c.env.screenshot_scale
      )
    )

  def task_state(self) -> dict:
    return {
      "pool": self.pool.to_dict(),
      "registry": {k: t.to_dict() for k, t in self.registry.items()},
    }

  def load_task_state(self, d: dict) -> None:
    self.pool = TaskPool.from_dict(d["pool"])
    task = OSWorldTask if self.config.env.backend == "osworld" else GuiTask
    self.registry = {k: task.from_dict(v) for k, v in d["registry"].items()}

  # ------------------------------------------------------------ pieces
  @staticmethod
  def _sampling(section) -> SamplingParams:
    return SamplingParams(
      temperature=section.temperature,
      top_p=section.top_p,
      greedy=section.greedy,
    )

  def _play(self, tasks, seed, section, timings, phase="rollout"):
    return rollout_gui_episodes(
      tasks,
      self.env,
      self.policy_sampler,
      self.tokenizer,
      self.encoder,
      seed=seed,
      params=self._sampling(section),
      history_images=self.config.env.history_images,
      timings=timings,
      progress=self.progress.phase,
      phase=phase,
    )

  # ------------------------------------------------------------ one step
  def run_step(self, step: int) -> dict:
    """One RL step (module docstring); randomness from (seed, step)."""
    c, t = self.config, {}
    drawn = self.pool.sample_active(
      c.env.num_tasks, np.random.default_rng([c.seed, step, 4])
    )
    groups = draw_task_groups(drawn, self.pool)
    n = c.env.rollouts_per_task
    tasks = [self.registry[g.task_id] for g in groups for _ in range(n)]
    episodes = self._play(tasks, derive_seed(c.seed, step, 1), c.rollout, t)
    rows = group_rows(len(groups), n)
    rolled = StepRollouts(
      tuple(groups),
      rows,
      tuple(float(np.mean([episodes[r].won for r in g])) for g in rows),
    )
    resolution = resolve_candidates(self.pool, self.registry, rolled, step)
    judged = self._judge_used(episodes, rolled, resolution, step, t)
    samples = StepSamples()
    for i in rolled.used_indices(resolution):
      policy, reward, stats = task_samples(
        episodes,
        judged.scores,
        judged.mask,
        judged.judgements,
        rolled.rows[i],
        self.reward_cfg,
        train_rm=c.reward.train_rm,
      )
      samples.add(policy, reward, stats)
    metrics = self.train_models(samples, step, t)
    with timed(t, "adaptation"):
      proposed = self._adapt(episodes, judged, rolled, resolution, step)
    metrics.update(step_metrics(episodes, judged, rolled))
    metrics.update(
      {
        "train/policy_samples": len(samples.policy),
        "train/rm_samples": len(samples.reward),
        "env/accepted_this_step": resolution.num_accepted,
        **adaptation_metrics(self.pool, proposed),
      }
    )
    metrics.update(timing_metrics(t))
    self._save_frames(episodes[0], step)
    return metrics

  def _judge_used(
    self, episodes, rolled: StepRollouts, resolution, step, timings
  ) -> StepJudgements:
    """Phase 4: reward.m screenshot judgements of every step of the
    episodes used (active tasks and accepted candidates), if the judge's
    signal or training reads them; wall time in timings["rm_sampling"]."""
    c = self.config
    if not (c.reward.use_judge_signal or c.reward.train_rm):
      return StepJudgements.unjudged([e.num_steps for e in episodes])
    with timed(timings, "rm_sampling"):
      judged = judge_gui_episodes(
        episodes,
        self.reward_sampler,
        self.tokenizer,
        self.encoder,
        m=c.reward.m,
        seed=derive_seed(c.seed, step, 2),
        params=self._sampling(c.reward.judge_sampling),
        batch_size=c.reward.judge_batch,
        include=rolled.used_rollouts(resolution),
        progress=self.progress.phase,
      )
    return StepJudgements.of(judged)

  def _adapt(self, episodes, judged, rolled, resolution, step) -> int:
    """Phase 7 (`gui_adaptation.adapt_gui_tasks`): how many proposed."""
    if not self.config.adaptation.enabled:
      return 0
    return adapt_gui_tasks(
      self.pool,
      self.registry,
      episodes,
      judged.scores,
      rolled,
      resolution,
      step,
      CriticLog(self.workdir, self.is_primary),
    )

  def _save_frames(self, episode: GuiEpisode, step: int) -> None:
    """The step's first episode as PNG frames with its actions drawn."""
    if self.is_primary:
      save_episode_frames(
        episode.screenshots,
        episode.actions,
        os.path.join(self.workdir, "episodes", f"step_{step:04d}"),
      )

  # ------------------------------------------------------------ eval
  def evaluate(self, step: int) -> dict:
    """Held-out page instances, one rollout each at the eval sampling, the
    same seeds at every evaluation (paired)."""
    c = self.config
    episodes = self._play(
      self.eval_tasks, derive_seed(c.eval.seed, 0), c.eval, {}, phase="eval"
    )
    return evaluation_metrics(episodes)

  def run(self):
    try:
      return super().run()
    finally:
      self.env.close()
