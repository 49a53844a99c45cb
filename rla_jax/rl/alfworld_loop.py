"""The RLAnything closed loop on ALFWorld.

One RL step (`run_step`; all randomness derived from (seed, step)), its
phases in the order the code runs them (`rla_jax.rl.phases`):
  1. Draw tasks: env.num_tasks slots drawn from those with no pending
     candidate, and every pending candidate.
  2. Roll out every group env.rollouts_per_task times with the policy (one
     sampler call per turn for all agents).
  3. Resolve candidates (acceptance rule: it needs only their accuracy):
     accepted ones replace their parent task and their rollouts train this
     step; rejected ones are deleted.
  4. Judge: m judgements of every step of the episodes used (active tasks
     and accepted candidates) with the reward model.
  5. Build policy samples (integrated reward, step-index standardisation,
     accuracy band) and reward-model samples (consistency feedback).
  6. Train the policy and the reward model (partitioned PPO-clip steps).
  7. Adapt: propose harder/easier variants for tasks outside the band, from
     critic feedback, with the configured environment model.
  8. Step metrics. The driver (`LoopBase.run`) then evaluates every
     `eval.every` steps, logs and checkpoints.
"""

from __future__ import annotations

import functools

import numpy as np

from rla_jax.errors import ConfigError
from rla_jax.rl import continued_sft, evaluation
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.alfworld_evaluation import AlfWorldEvaluation
from rla_jax.rl.alfworld_judge import judge_episodes
from rla_jax.rl.alfworld_metrics import step_metrics
from rla_jax.rl.alfworld_rollout import Episode, rollout_episodes
from rla_jax.rl.alfworld_tasks import (
  evaluation_games,
  parse_task_types,
  training_games,
)
from rla_jax.rl.env_model import LLMEnvModel, RuleBasedEnvModel, build_feedback
from rla_jax.rl.judge_votes import draw_step_columns, judged_steps
from rla_jax.rl.loop_common import LoopBase, uses_given_models
from rla_jax.rl.phases import (
  Resolution,
  StepJudgements,
  StepRollouts,
  StepSamples,
  adapt_tasks,
  draw_task_groups,
  group_rows,
  resolve_candidates,
  timed,
  timing_metrics,
)
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.start_evaluation import check_start_record_settings
from rla_jax.rl.training_data import STEP_SIGNALS, RewardConfig, task_samples
from rla_jax.sampling.settings import SamplingParams
from rla_jax.warmstart import settings as warmstart_settings
from rla_jax.warmstart.directory import WarmStart, load_warm_start_dir


class AlfworldLoop(AlfWorldEvaluation, LoopBase):
  """Policy + generative step judge + adaptive ALFWorld task set."""

  title = "RLAnything on ALFWorld"

  def model_dirs(self) -> dict:
    """Given checkpoint dirs, or the warm start in config.warmstart.dir
    (found and checked by check_config; loaded, never built: every process
    reads the same directory)."""
    if uses_given_models(self.config):
      return super().model_dirs()
    self.log(f"warm start: loaded {self.warm_start.describe()}")
    self.warmstart_report = self.warm_start.report
    return self.warm_start.model_dirs()

  def fingerprint_fields(self) -> dict:
    fields = {
      **super().fingerprint_fields(),
      # Not its directory: the same warm start may live elsewhere.
      "warmstart": {
        k: v for k, v in self.config.warmstart.to_dict().items() if k != "dir"
      },
    }
    sft = self.config.get("continued_sft")
    if sft is not None and sft.enabled:  # (RL runs keep their fingerprint)
      fields["continued_sft"] = sft.to_dict()
    return fields

  @property
  def history_steps(self) -> int | None:
    return warmstart_settings.history_steps(self.config.env)

  def check_config(self) -> None:
    e, r = self.config.env, self.config.reward
    RewardConfig.from_config(r)
    if r.step_signal not in STEP_SIGNALS:
      raise ConfigError(
        f"config reward.step_signal={r.step_signal!r} is not one of "
        f"{STEP_SIGNALS}"
      )
    if r.step_signal != "judge" and r.train_rm:
      raise ConfigError(
        f"config reward.step_signal={r.step_signal!r} replaces the judge's "
        "votes by the expert's step labels: set reward.train_rm=False"
      )
    parse_task_types(e.task_types)
    j = r.judged_steps_per_task
    if isinstance(j, bool) or not isinstance(j, int) or j < 0:
      raise ConfigError(
        f"config reward.judged_steps_per_task={j!r} must be an int >= 0"
      )
    if e.num_tasks < 1 or e.num_slots < e.num_tasks:
      raise ConfigError(
        f"config env.num_slots={e.num_slots} must be >= "
        f"env.num_tasks={e.num_tasks} >= 1 (the slots each "
        f"RL step draws)"
      )
    k = self.config.eval.rollouts_per_game
    if not isinstance(k, int) or k < 1:
      raise ConfigError(
        f"config eval.rollouts_per_game={k!r} must be an int >= 1"
      )
    check_start_record_settings(self.config.eval)
    continued_sft.check_settings(self.config, uses_given_models(self.config))
    if not uses_given_models(self.config):
      self.warm_start = self.find_warm_start()

  def find_warm_start(self) -> WarmStart:
    """The warm start in config.warmstart.dir, checked against this run's
    warm-start settings (`rla_jax.warmstart.settings`): ConfigError for bad
    settings, a missing directory or one built for other settings, naming
    the build command (cheap: reads one JSON marker)."""
    c = self.config
    return load_warm_start_dir(
      warmstart_settings.warm_start_dir(c.warmstart.dir),
      warmstart_settings.resolved_settings(c),
      warmstart_settings.build_command(c),
    )

  def build_tasks(self):
    c = self.config
    train = training_games(c)
    self.registry = {g.game_id: g for g in train}
    self.pool = TaskPool(
      [g.game_id for g in train], low=c.adaptation.low, high=c.adaptation.high
    )
    # The judge's reference trajectories: the base policy's OOD episodes
    # (kept by the first evaluation, or by `_ensure_rm_reference`).
    self.rm_reference = None
    # The start evaluation's per-run outcomes (evaluation.StartOutcomes),
    # which later evaluations' success changes are paired against.
    self.eval_start = None
    self.eval_games = evaluation_games(c)
    if c.adaptation.env_model == "llm":
      self.env_model = LLMEnvModel(
        self.reward_sampler,
        self.tokenizer,
        attempts=c.adaptation.attempts,
        history_steps=self.history_steps,
        max_steps=c.env.max_steps,
      )
    else:
      self.env_model = RuleBasedEnvModel()
    self.reward_cfg = RewardConfig.from_config(c.reward)

  # --------------------------------------------------------- state
  def task_state(self) -> dict:
    return {
      "pool": self.pool.to_dict(),
      "registry": {k: g.to_dict() for k, g in self.registry.items()},
      "rm_reference": None
      if self.rm_reference is None
      else [e.reference_record() for e in self.rm_reference],
      "eval_start": None
      if self.eval_start is None
      else self.eval_start.record(),
    }

  def load_task_state(self, d: dict) -> None:
    from rla_jax.envs.alfworld import Game

    self.pool = TaskPool.from_dict(d["pool"])
    self.registry = {k: Game.from_dict(v) for k, v in d["registry"].items()}
    refs = d.get("rm_reference")
    self.rm_reference = None if refs is None else self.reference_episodes(refs)
    self.eval_start = evaluation.StartOutcomes.restore(
      d.get("eval_start"),
      evaluation.pairing_settings(self.config.eval),
      self.log,
    )

  # --------------------------------------------------------- pieces
  def _sampling(self, section) -> SamplingParams:
    return SamplingParams(
      temperature=section.temperature,
      top_p=section.top_p,
      greedy=section.greedy,
    )

  def _rollouts(
    self, games, ids, seed, params, timings, max_steps=None, phase="rollout"
  ):
    c = self.config
    return rollout_episodes(
      games,
      ids,
      self.policy_sampler,
      self.tokenizer,
      backend=c.env.backend,
      max_steps=max_steps or c.env.max_steps,
      history_steps=self.history_steps,
      seed=seed,
      params=params,
      timings=timings,
      progress=self.progress.phase,
      phase=phase,
    )

  def _judge(self, episodes, seed, include=None, chosen=None):
    c = self.config
    return judge_episodes(
      episodes,
      self.reward_sampler,
      self.tokenizer,
      m=c.reward.m,
      seed=seed,
      params=self._sampling(c.reward.judge_sampling),
      batch_size=c.reward.judge_batch,
      include=include,
      chosen=chosen,
      progress=self.progress.phase,
    )

  # --------------------------------------------------------- one step
  def run_step(self, step: int) -> dict:
    """One RL step, its phases in the order they run (module docstring):
    draw tasks, roll out, resolve candidates, judge, build samples, train,
    adapt, step metrics. All randomness comes from (seed, step)."""
    c, t = self.config, {}  # t: {phase: wall seconds}
    if c.get("continued_sft") is not None and c.continued_sft.enabled:
      return self._continued_sft_step(step)
    self._ensure_rm_reference(t)
    drawn = self.pool.sample_active(
      c.env.num_tasks, np.random.default_rng([c.seed, step, 4])
    )
    groups = draw_task_groups(drawn, self.pool)
    episodes, rolled = self._roll_out(groups, step, t)
    resolution = resolve_candidates(self.pool, self.registry, rolled, step)
    judged = self._judge_used(episodes, rolled, resolution, step, t)
    samples = self._build_samples(episodes, judged, rolled, resolution)
    metrics = self.train_models(samples, step, t)
    with timed(t, "adaptation"):
      proposed = self._adapt(episodes, judged, rolled, resolution, step)
    metrics.update(
      step_metrics(
        episodes,
        judged,
        rolled,
        resolution,
        samples,
        proposed,
        self.pool,
        c.reward.step_signal,
      )
    )
    metrics.update(timing_metrics(t))
    return metrics

  @functools.cached_property
  def demonstrations(self) -> list:
    """The warm start's policy SFT samples (`continued_sft`), made once."""
    return continued_sft.demonstration_samples(
      self.warm_start.report["config"], self.tokenizer
    )

  def _continued_sft_step(self, step: int) -> dict:
    """The imitation baseline's step (`rla_jax.rl.continued_sft`): SFT
    updates on the warm start's demonstrations instead of an RL step."""
    t = {}
    with timed(t, "training"):
      metrics = continued_sft.continued_sft_step(
        self.learners["policy"],
        self.demonstrations,
        continued_sft.ContinuedSFTConfig.from_config(self.config.continued_sft),
        np.random.default_rng([self.config.seed, step, 6]),
      )
      self.policy_sampler.update_params(self.learners["policy"].model())
    metrics.update(timing_metrics(t))
    return metrics

  def _roll_out(
    self, groups, step: int, timings: dict
  ) -> tuple[list[Episode], StepRollouts]:
    """Phase 2: env.rollouts_per_task episodes of every group (one sampler
    call per turn for all agents); episode rows of group i are contiguous."""
    c = self.config
    n = c.env.rollouts_per_task
    games = [self.registry[g.task_id] for g in groups for _ in range(n)]
    ids = [g.task_id for g in groups for _ in range(n)]
    episodes = self._rollouts(
      games,
      ids,
      derive_seed(c.seed, step, 1),
      self._sampling(c.rollout),
      timings,
    )
    rows = group_rows(len(groups), n)
    accuracies = tuple(
      float(np.mean([episodes[r].won for r in g])) for g in rows
    )
    return episodes, StepRollouts(tuple(groups), rows, accuracies)

  def _judge_used(
    self, episodes, rolled: StepRollouts, resolution: Resolution, step, timings
  ) -> StepJudgements:
    """Phase 4: reward.m judgements of the steps of the episodes used
    (active tasks and accepted candidates), if anything reads them: every
    step, or reward.judged_steps_per_task step indices of each task
    (`draw_step_columns`); their wall time is timings["rm_sampling"]. With
    reward.step_signal 'expert' or 'expert_columns', the expert's labels
    instead (`_expert_step_signal`)."""
    c = self.config
    # The steps this RL step trains on, if not all (the judge's cost):
    # whole step-index columns of every group.
    chosen = draw_step_columns(
      rolled.rows,
      [e.num_steps for e in episodes],
      c.reward.judged_steps_per_task,
      np.random.default_rng([c.seed, step, 7]),
    )
    if c.reward.step_signal != "judge":
      columns = chosen if c.reward.step_signal == "expert_columns" else None
      return self._expert_step_signal(episodes, timings, columns)
    with timed(timings, "rm_sampling"):
      need_judge = (
        c.reward.use_judge_signal or c.reward.train_rm or c.adaptation.enabled
      )
      judged = (
        self._judge(
          episodes,
          derive_seed(c.seed, step, 2),
          include=rolled.used_rollouts(resolution),
          chosen=chosen,
        )
        if need_judge
        else None
      )
    if judged is not None:
      return StepJudgements.of(judged)
    return StepJudgements.unjudged([e.num_steps for e in episodes])

  def _expert_step_signal(
    self, episodes, timings, chosen=None
  ) -> StepJudgements:
    """Phase 4 with reward.step_signal='expert' or 'expert_columns': the
    expert's progress label (+1/-1, `evaluation.process_labels`) of every
    step as its one vote, S [N, K, 1], the upper bound of the judge's step
    signal; with `chosen` ([N, K], the columns a judge would judge) only
    those steps (the mask). Wall time in timings["expert_labels"]."""
    with timed(timings, "expert_labels"):
      scores, mask = evaluation.expert_step_scores(episodes)
    if chosen is not None:  # the steps a judge would judge (its own rule)
      _, mask = judged_steps([e.num_steps for e in episodes], chosen=chosen)
      scores = np.where(mask[..., None], scores, 0.0)
    return StepJudgements(None, scores, mask)

  def _build_samples(
    self, episodes, judged: StepJudgements, rolled, resolution
  ) -> StepSamples:
    """Phase 5: policy samples (integrated reward, step-index
    standardisation, policy band) and reward-model samples (consistency
    feedback, rm band) of every group used."""
    samples = StepSamples()
    for i in rolled.used_indices(resolution):
      policy, reward, stats = task_samples(
        episodes,
        judged.scores,
        judged.mask,
        judged.judgements,
        rolled.rows[i],
        self.reward_cfg,
        train_rm=self.config.reward.train_rm,
      )
      samples.add(policy, reward, stats)
    return samples

  def _adapt(self, episodes, judged, rolled, resolution, step: int) -> int:
    """Phase 7 (if adaptation.enabled): proposals for the slots outside the
    band, by the AlfWorld reference's rule (acc <= low -> easier); returns
    how many were proposed."""
    if not self.config.adaptation.enabled:
      return 0
    return adapt_tasks(
      self.pool,
      self.registry,
      rolled,
      resolution,
      lambda i, direction: self._propose(
        episodes, judged, rolled, step, i, direction
      ),
      variant_id=lambda game: game.game_id,
      low_inclusive=True,
    )

  def _propose(self, episodes, judged, rolled, step: int, i: int, direction):
    """A variant of group i's game from its critic feedback, with the
    configured environment model (rng stream (seed, step, 3, i))."""
    c = self.config
    rows = rolled.rows[i]
    feedback = build_feedback([episodes[r] for r in rows], judged.scores[rows])
    rng = np.random.default_rng([c.seed, step, 3, i])
    game = self.registry[rolled.groups[i].task_id]
    return self.env_model.propose(game, direction, feedback, rng)
