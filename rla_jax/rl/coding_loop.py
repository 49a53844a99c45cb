"""The RLAnything closed loop in the coding setting (reference section 5).

Per RL step, for every active task and pending candidate:
  * the policy writes P programs, the reward model (a unit-test generator)
    writes U tests; every program runs in the sandbox against the
    ground-truth tests and the generated tests;
  * policy reward: fraction of ground-truth tests passed, z-scored within
    the task; reward-model reward: the unit-test reward (a test accepting
    all correct programs earns the number of incorrect programs it rejects,
    otherwise minus the number it accepts), z-scored within the task; only
    tasks with accuracy in the band train;
  * harder/easier variants are proposed for tasks outside the band, by the
    offline family's rule (`propose_variant`) or an LLM env model prompted
    with per-test pass rates and generated tests (reference section 6.3).
"""

from __future__ import annotations

import random
import time

import numpy as np

from rla_jax.envs.coding import (
  SandboxExecutor,
  Task,
  accuracy,
  code_rewards,
  coding_metrics,
  extract_code,
  gt_code_mask,
  offline_train_eval_split,
  parse_generated_test,
  parse_task_proposal,
  propose_variant,
  render_policy_prompt,
  render_task_proposal_prompt,
  render_unit_test_prompt,
  unit_test_rewards,
)
from rla_jax.rl import agent_text
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.advantages import accuracy_in_band
from rla_jax.rl.loop_common import LoopBase, current_groups
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.trainer import Sample


def _sample_texts(loop, sampler, prompt_ids, seed, section, num_samples=1):
  """num_samples decoded texts per prompt (row i * num_samples + j)."""
  out = sampler.generate(
    prompt_ids,
    seed=seed,
    temperature=section.temperature,
    top_p=section.top_p,
    greedy=section.greedy,
    num_samples=num_samples,
  )
  texts = [
    loop.tokenizer.decode(t, skip_special_tokens=True) for t in out.tokens
  ]
  return out, texts


class CodingLoop(LoopBase):
  """Policy coder + unit-test generator + adaptive coding task set."""

  title = "RLAnything on coding"

  def model_dirs(self) -> dict:
    if self.config.model.policy_dir:
      return super().model_dirs()
    from rla_jax.warmstart.coding import embedded_coding_models

    return embedded_coding_models(self.config, log=self.log)

  def build_tasks(self):
    c = self.config
    train, evals = offline_train_eval_split(
      c.env.num_tasks, c.eval.num_tasks, c.seed
    )
    self.registry = {t.task_id: t for t in train}
    self.pool = TaskPool(
      [t.task_id for t in train], low=c.adaptation.low, high=c.adaptation.high
    )
    self.eval_tasks = evals
    self.executor = SandboxExecutor(max_workers=c.env.exec_workers)

  def task_state(self) -> dict:
    return {
      "pool": self.pool.to_dict(),
      "registry": {k: t.to_dict() for k, t in self.registry.items()},
    }

  def load_task_state(self, d: dict) -> None:
    self.pool = TaskPool.from_dict(d["pool"])
    self.registry = {k: Task.from_dict(v) for k, v in d["registry"].items()}

  # ------------------------------------------------------------ rollouts
  def _generate(self, tasks, seed, policy_section, with_tests=True):
    """Programs [n][P] and generated tests [n][U] with their samples."""
    c = self.config
    P, U = c.env.programs_per_task, c.env.tests_per_task
    p_ids = [
      agent_text.chat_ids(self.tokenizer, render_policy_prompt(t.question))
      for t in tasks
    ]
    out, texts = _sample_texts(
      self, self.policy_sampler, p_ids, derive_seed(seed, 1), policy_section, P
    )
    progs = [
      [extract_code(texts[i * P + j]) for j in range(P)]
      for i in range(len(tasks))
    ]
    policy_rec = [
      [
        (p_ids[i], out.tokens[i * P + j], out.logprobs[i * P + j])
        for j in range(P)
      ]
      for i in range(len(tasks))
    ]
    tests, rm_rec = [[] for _ in tasks], [[] for _ in tasks]
    if with_tests and U:
      u_ids = [
        agent_text.chat_ids(
          self.tokenizer,
          render_unit_test_prompt(t.question, t.tests[0] if t.tests else None),
        )
        for t in tasks
      ]
      out, texts = _sample_texts(
        self,
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
          (u_ids[i], out.tokens[i * U + j], out.logprobs[i * U + j])
          for j in range(U)
        ]
        for i in range(len(tasks))
      ]
    return progs, tests, policy_rec, rm_rec

  def _execute(self, task, progs, tests):
    gt = self.executor.run(progs, list(task.tests), task.time_limit_s).passed
    valid = np.array([t is not None for t in tests], bool)
    gen_tests = [t if t is not None else ("", "") for t in tests]
    gen = (
      self.executor.run(progs, gen_tests, task.time_limit_s).passed
      if gen_tests
      else np.zeros((len(progs), 0), bool)
    )
    gen = gen & valid[None, :]
    return gt, gen, valid

  # ------------------------------------------------------------ one step
  def run_step(self, step: int) -> dict:
    c = self.config
    t = {}
    groups = [("active", slot, tid) for slot, tid in self.pool.active_tasks()]
    groups += [
      ("candidate", slot, cand["candidate_id"])
      for slot, cand in self.pool.pending_candidates()
    ]
    tasks = [self.registry[tid] for _, _, tid in groups]
    t0 = time.perf_counter()
    progs, tests, policy_rec, rm_rec = self._generate(
      tasks, derive_seed(c.seed, step), c.rollout
    )
    t["sampling"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = [
      self._execute(task, progs[i], tests[i]) for i, task in enumerate(tasks)
    ]
    t["execution"] = time.perf_counter() - t0
    acc = {i: accuracy(results[i][0]) for i in range(len(groups))}
    cand_acc = {
      slot: acc[i] for i, (k, slot, _) in enumerate(groups) if k == "candidate"
    }
    outcome = dict(self.pool.resolve(cand_acc, step=step)) if cand_acc else {}
    policy_samples, rm_samples = [], []
    for i, (kind, slot, tid) in enumerate(groups):
      if kind == "candidate" and not outcome.get(slot):
        self.registry.pop(tid, None)
        continue
      if not accuracy_in_band(acc[i], *c.reward.policy_band):
        continue
      gt, gen, valid = results[i]
      for (ids, toks, lp), r in zip(policy_rec[i], code_rewards(gt)):
        if toks:
          policy_samples.append(Sample(ids, toks, lp, float(r)))
      if c.reward.train_rm and rm_rec[i] and gt_code_mask(gt).any():
        for (ids, toks, lp), r in zip(
          rm_rec[i], unit_test_rewards(gt_code_mask(gt), gen, valid)
        ):
          if toks and r != 0:
            rm_samples.append(Sample(ids, toks, lp, float(r)))
    t0 = time.perf_counter()
    metrics = dict(self.train("policy", policy_samples))
    if c.reward.train_rm:
      metrics.update(self.train("reward", rm_samples))
    t["training"] = time.perf_counter() - t0
    proposed = 0
    # The group now holding each slot's active task (an accepted candidate
    # replaces the task it was derived from).
    current = current_groups(groups, outcome)
    if c.adaptation.enabled:
      for slot, i in current.items():
        if slot in self.pool.pending:
          continue
        # The reference's coding rule is strict below: acc < low -> easier.
        direction = (
          "harder"
          if acc[i] >= c.adaptation.high
          else "easier"
          if acc[i] < c.adaptation.low
          else None
        )
        if direction is None:
          continue
        variant = self._propose(
          self.registry[groups[i][2]],
          direction,
          acc[i],
          results[i],
          tests[i],
          step,
          i,
        )
        if variant is not None and variant.task_id not in self.registry:
          self.registry[variant.task_id] = variant
          self.pool.propose(slot, variant.task_id, direction, acc[i])
          proposed += 1
    active = [i for i, g in enumerate(groups) if g[0] == "active"]
    m = coding_metrics(
      [results[i][0] for i in active],
      [results[i][1] for i in active],
      [results[i][2] for i in active],
    )
    metrics.update({f"train/{k}": v for k, v in m.items()})
    metrics.update(
      {
        "train/rollout_accuracy": float(np.mean([acc[i] for i in active])),
        "train/policy_samples": len(policy_samples),
        "train/rm_samples": len(rm_samples),
        "train/valid_program_rate": float(
          np.mean([p is not None for i in active for p in progs[i]])
        ),
        "train/valid_test_rate": float(
          np.mean([u is not None for i in active for u in tests[i]] or [0.0])
        ),
        "env/accepted_total": self.pool.accepted_total,
        "env/rejected_total": self.pool.rejected_total,
        "env/proposed_this_step": proposed,
      }
    )
    metrics.update({f"time/{k}": v for k, v in t.items()})
    return metrics

  def _propose(self, task, direction, acc, result, tests, step, i):
    c = self.config
    if c.adaptation.env_model != "llm":
      return propose_variant(
        task, direction, random.Random(derive_seed(c.seed, step, 3, i))
      )
    gt, gen, valid = result
    root = self.registry.get(task.root_id, task)
    text = render_task_proposal_prompt(
      root,
      task,
      direction,
      acc,
      gt.mean(0).tolist(),
      [
        (u[0], u[1], float(gen[:, j].mean()))
        for j, u in enumerate(tests)
        if u is not None
      ],
    )
    ids = agent_text.chat_ids(self.tokenizer, text)
    for attempt in range(c.adaptation.attempts):
      _, texts = _sample_texts(
        self,
        self.reward_sampler,
        [ids],
        derive_seed(c.seed, step, 4, i, attempt),
        c.reward.test_sampling,
      )
      variant = parse_task_proposal(texts[0], task)
      if variant is not None:
        return variant
    return None

  # ------------------------------------------------------------ eval
  def evaluate(self, step: int) -> dict:
    c = self.config
    progs, tests, _, _ = self._generate(
      self.eval_tasks, derive_seed(c.eval.seed, step), c.eval
    )
    res = [
      self._execute(t, progs[i], tests[i])
      for i, t in enumerate(self.eval_tasks)
    ]
    m = coding_metrics(
      [r[0] for r in res], [r[1] for r in res], [r[2] for r in res]
    )
    return {f"eval/{k}": v for k, v in m.items()}

  def run(self):
    try:
      return super().run()
    finally:
      self.executor.close()
