"""The RLAnything closed loop in the coding setting (reference section 5).

One RL step (`run_step`; all randomness derived from (seed, step)), its
phases in the order the code runs them (`rla_jax.rl.phases`):
  1. Draw tasks: env.num_tasks of the env.num_slots slots' active tasks
     (stream (seed, step, 4)) and every pending candidate.
  2. Roll out: for every group the policy writes P programs and the reward
     model (a unit-test generator) writes U tests; every program runs in
     the sandbox against the ground-truth tests and the generated tests.
     A group's accuracy is its pass-all rate.
  3. Resolve candidates (acceptance rule on their accuracy): accepted ones
     replace their parent task and train this step; rejected ones are
     deleted.
  4. Build samples (no judge phase: the reward model's output is the
     tests) of the groups used whose accuracy is inside the band: policy
     reward, the fraction of ground-truth tests passed, z-scored within the
     task; reward-model reward, the unit-test reward (a test accepting all
     correct programs earns the number of incorrect programs it rejects,
     otherwise minus the number it accepts), z-scored within the task.
  5. Train the policy and the reward model.
  6. Adapt: harder/easier variants for tasks outside the band (strict below:
     acc < low -> easier, as the coding reference), by the offline family's
     rule (`propose_variant`) or an LLM env model prompted with per-test
     pass rates and generated tests (reference section 6.3).
  7. Step metrics (`rla_jax.rl.coding_metrics`).
"""

from __future__ import annotations

import random

import numpy as np

from rla_jax.envs.coding import (
  SandboxExecutor,
  Task,
  accuracy,
  code_rewards,
  extract_code,
  gt_code_mask,
  offline_family,
  offline_train_eval_split,
  parse_generated_test,
  propose_variant,
  render_policy_prompt,
  render_unit_test_prompt,
  select_family,
  unit_test_rewards,
)
from rla_jax.errors import ConfigError
from rla_jax.metrics import keys
from rla_jax.rl import agent_text, evaluation
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.advantages import accuracy_in_band
from rla_jax.rl.coding_env_model import (
  PROMPT_COUNT_KEYS,
  CodingLLMEnvModel,
  ProposalRequest,
)
from rla_jax.rl.coding_evaluation import CodingEvaluation
from rla_jax.rl.coding_metrics import step_metrics
from rla_jax.rl.coding_rollout import (
  Execution,
  Response,
  TaskRollout,
  sample_texts,
)
from rla_jax.rl.loop_common import (
  LoopBase,
  primary_builds_first,
  uses_given_models,
)
from rla_jax.rl.phases import (
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
from rla_jax.warmstart import coding_settings
from rla_jax.warmstart.directory import load_warm_start_dir
from rla_jax.warmstart.settings import build_command

FAMILIES = ("select", "classic")


class CodingLoop(CodingEvaluation, LoopBase):
  """Policy coder + unit-test generator + adaptive coding task set."""

  title = "RLAnything on coding"
  summary_keys = keys.CODING_SUMMARY_KEYS

  def check_config(self) -> None:
    """config.env.family and env.levels, config.eval.programs_per_task >=
    1 and tests_per_task >= 0 (ints); finds and checks the warm start in
    config.warmstart.dir (cheap: reads its marker)."""
    c = self.config
    for key, least in (("programs_per_task", 1), ("tests_per_task", 0)):
      value = c.eval[key]
      if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(
          f"config eval.{key}={value!r} must be an int >= {least}"
        )
    if c.env.num_tasks < 1 or c.env.num_slots < c.env.num_tasks:
      raise ConfigError(
        f"config env.num_slots={c.env.num_slots} must be >= "
        f"env.num_tasks={c.env.num_tasks} >= 1 (the tasks each RL step "
        f"draws from the pool's slots)"
      )
    if c.env.family not in FAMILIES:
      raise ConfigError(
        f"config env.family={c.env.family!r} is not one of {FAMILIES}"
      )
    self.warm_start = None
    if c.env.family == "select":
      bad = [v for v in c.env.levels if v not in select_family.LEVELS]
      if bad or not c.env.levels:
        raise ConfigError(
          f"config env.levels={tuple(c.env.levels)!r} must be non-empty "
          f"levels of the select family {select_family.LEVELS}"
        )
    path = coding_settings.coding_warm_start_dir(c.warmstart.dir)
    if path is not None and not uses_given_models(c):
      if c.env.family != "select":
        raise ConfigError(
          "config warmstart.dir: the coding warm start is trained on the "
          "select family; set env.family='select' or warmstart.dir=''"
        )
      settings = coding_settings.warmstart_settings(c)
      self.warm_start = load_warm_start_dir(
        path,
        settings,
        build_command(c),
        digest=coding_settings.coding_config_hash(settings),
      )

  def fingerprint_fields(self) -> dict:
    return {
      **super().fingerprint_fields(),
      "warmstart": {
        k: v for k, v in self.config.warmstart.to_dict().items() if k != "dir"
      },
    }

  def model_dirs(self) -> dict:
    if uses_given_models(self.config):
      return super().model_dirs()
    if self.warm_start is not None:
      self.log(f"warm start: loaded {self.warm_start.describe()}")
      return self.warm_start.model_dirs()
    from rla_jax.warmstart.coding import embedded_coding_models

    return primary_builds_first(
      lambda: embedded_coding_models(self.config, log=self.log),
      "rla_jax_coding_models",
    )

  def build_tasks(self):
    c = self.config
    if c.env.family == "select":
      train, evals = select_family.select_train_eval_split(
        c.env.num_slots, c.eval.num_tasks, c.seed, tuple(c.env.levels)
      )
    else:
      train, evals = offline_train_eval_split(
        c.env.num_slots, c.eval.num_tasks, c.seed
      )
    self.registry = {t.task_id: t for t in train}
    self.pool = TaskPool(
      [t.task_id for t in train], low=c.adaptation.low, high=c.adaptation.high
    )
    self.eval_tasks = evals
    self.executor = SandboxExecutor(max_workers=c.env.exec_workers)
    # reference_program(task) -> a stdin/stdout program solving the task,
    # or None: judges the generated tests at evaluation (`_reference_pass`).
    self.reference_program = offline_family.reference_program
    # The start evaluation's per-run outcomes (evaluation.StartOutcomes),
    # which later evaluations' changes are paired against.
    self.eval_start = None
    self.eval_rule_logged = False
    self.llm_env_model = (
      CodingLLMEnvModel(
        self.reward_sampler,
        self.tokenizer,
        c.reward.test_sampling,
        attempts=c.adaptation.attempts,
        max_prompt_len=c.rollout.max_prompt_len,
        log=self.log,
      )
      if c.adaptation.env_model == "llm"
      else None
    )

  def task_state(self) -> dict:
    return {
      "pool": self.pool.to_dict(),
      "registry": {k: t.to_dict() for k, t in self.registry.items()},
      "eval_start": None
      if self.eval_start is None
      else self.eval_start.record(),
    }

  def load_task_state(self, d: dict) -> None:
    self.pool = TaskPool.from_dict(d["pool"])
    self.registry = {k: Task.from_dict(v) for k, v in d["registry"].items()}
    self.eval_start = evaluation.StartOutcomes.restore(
      d.get("eval_start"), self.eval_pairing_settings(), self.log
    )

  # ------------------------------------------------------------ rollouts
  def _generate(self, tasks, seed, policy_section, P: int, U: int):
    """Programs [n][P] and generated tests [n][U] with their responses
    (policy stream (seed, 1), test generator stream (seed, 2))."""
    c = self.config
    p_ids = [
      agent_text.chat_ids(self.tokenizer, render_policy_prompt(t.question))
      for t in tasks
    ]
    out, texts = sample_texts(
      self.tokenizer,
      self.policy_sampler,
      p_ids,
      derive_seed(seed, 1),
      policy_section,
      P,
    )
    progs = [
      [extract_code(texts[i * P + j]) for j in range(P)]
      for i in range(len(tasks))
    ]
    policy_rec = [
      [
        Response(p_ids[i], out.tokens[i * P + j], out.logprobs[i * P + j])
        for j in range(P)
      ]
      for i in range(len(tasks))
    ]
    tests, rm_rec = [[] for _ in tasks], [[] for _ in tasks]
    if U:
      u_ids = [
        agent_text.chat_ids(
          self.tokenizer,
          render_unit_test_prompt(t.question, t.tests[0] if t.tests else None),
        )
        for t in tasks
      ]
      out, texts = sample_texts(
        self.tokenizer,
        self.reward_sampler,
        u_ids,
        derive_seed(seed, 2),
        c.reward.test_sampling,
        U,
      )
      tests = [
        [parse_generated_test(texts[i * U + j]) for j in range(U)]
        for i in range(len(tasks))
      ]
      rm_rec = [
        [
          Response(u_ids[i], out.tokens[i * U + j], out.logprobs[i * U + j])
          for j in range(U)
        ]
        for i in range(len(tasks))
      ]
    return progs, tests, policy_rec, rm_rec

  def _execute(self, task, progs, tests) -> Execution:
    gt = self.executor.run(progs, list(task.tests), task.time_limit_s).passed
    valid = np.array([t is not None for t in tests], bool)
    gen_tests = [t if t is not None else ("", "") for t in tests]
    gen = (
      self.executor.run(progs, gen_tests, task.time_limit_s).passed
      if gen_tests
      else np.zeros((len(progs), 0), bool)
    )
    gen = gen & valid[None, :]
    return Execution(gt, gen, valid)

  def _play(
    self, tasks, seed: int, section, timings: dict, P: int, U: int
  ) -> list[TaskRollout]:
    """Every task's P programs and U generated tests (wall time
    timings["sampling"]), executed in the sandbox (timings["execution"])."""
    with timed(timings, "sampling"):
      progs, tests, policy_rec, rm_rec = self._generate(
        tasks, seed, section, P, U
      )
    with timed(timings, "execution"):
      executions = [
        self._execute(task, progs[i], tests[i]) for i, task in enumerate(tasks)
      ]
    return [
      TaskRollout(
        programs=progs[i],
        tests=tests[i],
        program_responses=policy_rec[i],
        test_responses=rm_rec[i],
        execution=execution,
      )
      for i, execution in enumerate(executions)
    ]

  # ------------------------------------------------------------ one step
  def run_step(self, step: int) -> dict:
    """One RL step, its phases in the order they run (module docstring):
    draw tasks, roll out, resolve candidates, build samples, train, adapt,
    step metrics (no judge phase: the reward model writes tests, run in
    the roll-out). All randomness comes from (seed, step)."""
    t = {}  # {phase: wall seconds}
    drawn = self.pool.sample_active(
      self.config.env.num_tasks,
      np.random.default_rng([self.config.seed, step, 4]),
    )
    groups = draw_task_groups(drawn, self.pool)
    played, rolled = self._roll_out(groups, step, t)
    resolution = resolve_candidates(self.pool, self.registry, rolled, step)
    samples = self._build_samples(played, rolled, resolution)
    metrics = self.train_models(samples, step, t)
    if self.llm_env_model is not None:
      self.llm_env_model.reset_counts()
    proposed = self._adapt(played, rolled, resolution, step)
    metrics.update(
      step_metrics(
        played,
        rolled,
        samples,
        self.pool,
        proposed,
        self._proposal_prompt_counts(),
      )
    )
    metrics.update(timing_metrics(t))
    return metrics

  def _roll_out(
    self, groups, step: int, timings: dict
  ) -> tuple[list[TaskRollout], StepRollouts]:
    """Phase 2: every group's P programs and U tests, executed; group i's
    programs are rows i * P ... (i + 1) * P - 1 of the policy batch and its
    accuracy is the pass-all rate of its programs."""
    c = self.config
    tasks = [self.registry[g.task_id] for g in groups]
    played = self._play(
      tasks,
      derive_seed(c.seed, step),
      c.rollout,
      timings,
      c.env.programs_per_task,
      c.env.tests_per_task,
    )
    rolled = StepRollouts(
      tuple(groups),
      group_rows(len(groups), c.env.programs_per_task),
      tuple(accuracy(r.execution.gt_pass) for r in played),
    )
    return played, rolled

  def _build_samples(self, played, rolled, resolution) -> StepSamples:
    """Phase 5: of every group used whose accuracy is inside the policy
    band, the programs with their z-scored pass fractions and (train_rm,
    some program correct) the generated tests with their non-zero
    z-scored unit-test rewards."""
    c = self.config
    samples = StepSamples()
    for i in rolled.used_indices(resolution):
      if not accuracy_in_band(rolled.accuracies[i], *c.reward.policy_band):
        continue
      ex = played[i].execution
      rewards = code_rewards(ex.gt_pass)
      for resp, r in zip(played[i].program_responses, rewards, strict=True):
        if resp.tokens:
          samples.policy.append(resp.sample(float(r)))
      correct = gt_code_mask(ex.gt_pass)
      if c.reward.train_rm and played[i].test_responses and correct.any():
        rewards = unit_test_rewards(correct, ex.gen_pass, ex.valid_tests)
        for resp, r in zip(played[i].test_responses, rewards, strict=True):
          if resp.tokens and r != 0:
            samples.reward.append(resp.sample(float(r)))
    return samples

  def _adapt(self, played, rolled, resolution, step: int) -> int:
    """Phase 7 (if adaptation.enabled): proposals for the slots outside the
    band, by the coding reference's rule, strict below (acc < low ->
    easier); returns how many were proposed."""
    if not self.config.adaptation.enabled:
      return 0
    return adapt_tasks(
      self.pool,
      self.registry,
      rolled,
      resolution,
      lambda i, direction: self._propose(played, rolled, step, i, direction),
      variant_id=lambda task: task.task_id,
      low_inclusive=False,
    )

  def _proposal_prompt_counts(self) -> dict[str, int]:
    """The LLM env model's prompt counts this step (0 without one)."""
    if self.llm_env_model is None:
      return dict.fromkeys(PROMPT_COUNT_KEYS, 0)
    return dict(self.llm_env_model.counts)

  def _propose(self, played, rolled, step: int, i: int, direction):
    """A variant of group i's task: the offline family's rule (stream
    (seed, step, 3, i)) or the LLM env model (`CodingLLMEnvModel`, streams
    (seed, step, 4, i, attempt))."""
    c = self.config
    task = self.registry[rolled.groups[i].task_id]
    if self.llm_env_model is None:
      return propose_variant(
        task, direction, random.Random(derive_seed(c.seed, step, 3, i))
      )
    request = ProposalRequest(
      play=played[i],
      task=task,
      root=self.registry.get(task.root_id, task),
      direction=direction,
      accuracy=rolled.accuracies[i],
    )
    return self.llm_env_model.propose(
      request, lambda attempt: derive_seed(c.seed, step, 4, i, attempt)
    )

  def run(self):
    try:
      return super().run()
    finally:
      self.executor.close()
