"""The RLAnything closed loop on ALFWorld.

One RL step (all randomness derived from (seed, step)):
  1. Roll out num_tasks slots, drawn from those with no pending candidate,
     and every pending candidate N times with the policy (one sampler call
     per turn for all agents).
  2. Sample m judgements of every step with the reward model.
  3. Resolve candidates: accepted ones replace their parent task and their
     rollouts train this step; rejected ones are dropped (acceptance rule).
  4. Build policy samples (integrated reward, step-index standardisation,
     accuracy band) and reward-model samples (consistency feedback).
  5. Update the policy and the reward model (partitioned PPO-clip steps).
  6. Propose harder/easier variants for tasks outside the band, from critic
     feedback, with the configured environment model.
  7. Evaluate every `eval.every` steps; log; checkpoint.
"""

from __future__ import annotations

import os
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

from rla_jax.envs.alfworld import generate_split
from rla_jax.envs.alfworld.generator import check_task_types
from rla_jax.metrics import keys
from rla_jax.rl import evaluation
from rla_jax.rl.adaptation import TaskPool
from rla_jax.rl.alfworld_rollout import (
  Episode,
  SamplingParams,
  judge_episodes,
  rollout_episodes,
)
from rla_jax.rl.env_model import LLMEnvModel, RuleBasedEnvModel, build_feedback
from rla_jax.rl.loop_common import LoopBase, current_groups
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.training_data import RewardConfig, task_samples


def parse_task_types(value: str) -> tuple[str, ...] | None:
  """config env.task_types: "all" (None: the ALFWorld mix of all six types)
  or comma-separated task-type names; ValueError naming the key otherwise."""
  if not isinstance(value, str):
    raise ValueError(
      f"config env.task_types={value!r} must be a string: "
      f"'all' or comma-separated task types"
    )
  if value.strip() == "all":
    return None
  try:
    return check_task_types(t.strip() for t in value.split(","))
  except ValueError as e:
    raise ValueError(f"config env.task_types={value!r}: {e}") from None


class AlfworldLoop(LoopBase):
  """Policy + generative step judge + adaptive ALFWorld task set."""

  title = "RLAnything on ALFWorld"

  def model_dirs(self) -> dict:
    """Given checkpoint dirs, or the embedded warm start (built once and
    cached under config.warmstart.cache_dir)."""
    c = self.config
    if c.model.policy_dir:
      return super().model_dirs()
    from rla_jax.warmstart import build_warm_start
    from rla_jax.warmstart.coding import cache_root

    settings = self._warmstart_settings()
    out_dir = os.path.join(
      cache_root(c.warmstart.cache_dir), "alfworld", c.warmstart.name
    )
    if jax.process_count() > 1:  # process 0 builds, the others reuse it
      if jax.process_index() == 0:
        build_warm_start(settings, out_dir, log=self.log)
      multihost_utils.sync_global_devices("rla_jax_warmstart")
    result = build_warm_start(settings, out_dir, log=self.log)
    self.warmstart_report = result.get("report", {})
    return {k: result[k] for k in ("tokenizer_dir", "policy_dir", "reward_dir")}

  def fingerprint_fields(self) -> dict:
    return {
      **super().fingerprint_fields(),
      "warmstart": self.config.warmstart.to_dict(),
    }

  @property
  def history_steps(self) -> int | None:
    h = self.config.env.history_steps
    return None if h is None or h < 0 else int(h)

  def check_config(self) -> None:
    e = self.config.env
    parse_task_types(e.task_types)
    if e.num_tasks < 1 or e.num_slots < e.num_tasks:
      raise ValueError(
        f"config env.num_slots={e.num_slots} must be >= "
        f"env.num_tasks={e.num_tasks} >= 1 (the slots each "
        f"RL step draws)"
      )
    k = self.config.eval.rollouts_per_game
    if not isinstance(k, int) or k < 1:
      raise ValueError(
        f"config eval.rollouts_per_game={k!r} must be an int >= 1"
      )
    if not self.config.model.policy_dir:
      from rla_jax.warmstart.config import resolve_config

      resolve_config(self._warmstart_settings())  # bad values fail here

  def _warmstart_settings(self) -> dict:
    """The warm start's settings: config.warmstart.settings, with its seed
    (warmstart.seed, not the RL seed, so RL runs with different seeds, e.g.
    the ablation's, share one cached warm start) and the prompts' room size
    and history window (the warm start must see the prompts the loop will
    render)."""
    c = self.config
    settings = c.warmstart.settings.to_dict()
    settings.update(
      seed=c.warmstart.seed,
      room_size=c.env.room_size,
      history_steps=self.history_steps,
    )
    return settings

  def build_tasks(self):
    c = self.config
    task_types = parse_task_types(c.env.task_types)
    train = generate_split(
      "train",
      c.env.num_slots,
      c.seed,
      room_size=c.env.room_size,
      task_types=task_types,
    )
    self.registry = {g.game_id: g for g in train}
    self.pool = TaskPool(
      [g.game_id for g in train], low=c.adaptation.low, high=c.adaptation.high
    )
    # The judge's reference trajectories: the base policy's OOD episodes
    # (kept by the first evaluation, or by `_ensure_rm_reference`).
    self.rm_reference = None
    self.eval_games = {
      "in_distribution": generate_split(
        "valid_seen",
        c.eval.num_games,
        c.eval.seed,
        room_size=c.env.room_size,
        task_types=task_types,
      ),
      "out_of_distribution": generate_split(
        "valid_unseen",
        c.eval.num_games,
        c.eval.seed,
        room_size=c.env.room_size,
        task_types=task_types,
      ),
    }
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
    self.reward_cfg = RewardConfig(
      lam=c.reward.lam,
      use_judge_signal=c.reward.use_judge_signal,
      policy_band=tuple(c.reward.policy_band),
      rm_band=tuple(c.reward.rm_band),
    )

  # --------------------------------------------------------- state
  def task_state(self) -> dict:
    return {
      "pool": self.pool.to_dict(),
      "registry": {k: g.to_dict() for k, g in self.registry.items()},
      "rm_reference": None
      if self.rm_reference is None
      else [_reference_record(e) for e in self.rm_reference],
    }

  def load_task_state(self, d: dict) -> None:
    from rla_jax.envs.alfworld import Game

    self.pool = TaskPool.from_dict(d["pool"])
    self.registry = {k: Game.from_dict(v) for k, v in d["registry"].items()}
    ood = {g.game_id: g for g in self.eval_games["out_of_distribution"]}
    refs = d.get("rm_reference")
    self.rm_reference = (
      None
      if refs is None
      else [
        Episode(
          task_id=r["task_id"],
          game=ood[r["task_id"]],
          **{k: r[k] for k in _REFERENCE_FIELDS},
        )
        for r in refs
      ]
    )

  # --------------------------------------------------------- pieces
  def _sampling(self, section) -> SamplingParams:
    return SamplingParams(
      temperature=section.temperature,
      top_p=section.top_p,
      greedy=section.greedy,
    )

  def _rollouts(self, games, ids, seed, params, timings, max_steps=None):
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
    )

  def _judge(self, episodes, seed, include=None):
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
    )

  # --------------------------------------------------------- one step
  def run_step(self, step: int) -> dict:
    c = self.config
    N = c.env.rollouts_per_task
    t = {}
    self._ensure_rm_reference(t)
    # 1. rollouts of num_tasks slots drawn from those with no pending
    # candidate, and of every pending candidate
    drawn = self.pool.sample_active(
      c.env.num_tasks, np.random.default_rng([c.seed, step, 4])
    )
    groups = [("active", slot, tid) for slot, tid in drawn]
    groups += [
      ("candidate", slot, cand["candidate_id"])
      for slot, cand in self.pool.pending_candidates()
    ]
    games, ids = [], []
    for _, _, tid in groups:
      games += [self.registry[tid]] * N
      ids += [tid] * N
    episodes = self._rollouts(
      games, ids, derive_seed(c.seed, step, 1), self._sampling(c.rollout), t
    )
    rows = {i: list(range(i * N, (i + 1) * N)) for i in range(len(groups))}
    acc = {i: float(np.mean([episodes[r].won for r in rows[i]])) for i in rows}
    # 2. resolve candidates (acceptance rule: it needs only their accuracy)
    cand_acc = {
      slot: acc[i]
      for i, (kind, slot, _) in enumerate(groups)
      if kind == "candidate"
    }
    outcome = dict(self.pool.resolve(cand_acc, step=step)) if cand_acc else {}
    for i, (kind, slot, tid) in enumerate(groups):
      if kind == "candidate" and not outcome.get(slot):
        self.registry.pop(tid, None)  # rejected candidates are deleted
    # 3. m judgements per step of the episodes that are used (active tasks
    # and accepted candidates; a rejected candidate's episodes are not)
    t0 = time.perf_counter()
    need_judge = (
      c.reward.use_judge_signal or c.reward.train_rm or c.adaptation.enabled
    )
    used = [
      kind == "active" or bool(outcome.get(slot))
      for kind, slot, _ in groups
      for _ in range(N)
    ]
    judged = (
      self._judge(episodes, derive_seed(c.seed, step, 2), include=used)
      if need_judge
      else None
    )
    t["rm_sampling"] = time.perf_counter() - t0
    K = max(e.num_steps for e in episodes)
    scores = judged.scores if judged else np.zeros((len(episodes), K, 1))
    mask = (
      judged.mask
      if judged
      else np.array([[k < e.num_steps for k in range(K)] for e in episodes])
    )
    # 4. training data (active tasks + accepted candidates)
    policy_samples, rm_samples = [], []
    n_policy_tasks = n_rm_tasks = 0
    for i, (kind, slot, _) in enumerate(groups):
      if kind == "candidate" and not outcome.get(slot):
        continue
      p, r, st = task_samples(
        episodes,
        scores,
        mask,
        judged,
        rows[i],
        self.reward_cfg,
        train_rm=c.reward.train_rm,
      )
      policy_samples += p
      rm_samples += r
      n_policy_tasks += st["policy_in_band"]
      n_rm_tasks += st["rm_in_band"]
    # 5. updates
    t0 = time.perf_counter()
    metrics = {}
    metrics.update(self.train("policy", policy_samples))
    if c.reward.train_rm:
      metrics.update(self.train("reward", rm_samples))
    t["training"] = time.perf_counter() - t0
    # 6. adaptation
    t0 = time.perf_counter()
    proposed = 0
    # The group now holding each slot's active task: an accepted candidate
    # replaces the task it was derived from.
    current = current_groups(groups, outcome)
    if c.adaptation.enabled:
      active_acc = {slot: acc[i] for slot, i in current.items()}
      directions = self.pool.proposal_directions(active_acc)
      for slot, direction in directions.items():
        i = current[slot]
        feedback = build_feedback(
          [episodes[r] for r in rows[i]], scores[rows[i]]
        )
        rng = np.random.default_rng([c.seed, step, 3, i])
        variant = self.env_model.propose(
          self.registry[groups[i][2]], direction, feedback, rng
        )
        if variant is not None and variant.game_id not in self.registry:
          self.registry[variant.game_id] = variant
          self.pool.propose(slot, variant.game_id, direction, active_acc[slot])
          proposed += 1
    t["adaptation"] = time.perf_counter() - t0
    # metrics
    active_rows = [
      r for i, (k, _, _) in enumerate(groups) if k == "active" for r in rows[i]
    ]
    metrics.update(
      {
        "train/rollout_accuracy": float(
          np.mean([episodes[r].won for r in active_rows])
        ),
        "train/mean_episode_steps": float(
          np.mean([episodes[r].num_steps for r in active_rows])
        ),
        "train/policy_samples": len(policy_samples),
        "train/rm_samples": len(rm_samples),
        "train/policy_tasks_in_band": n_policy_tasks,
        "train/rm_tasks_in_band": n_rm_tasks,
        "train/judge_positive_rate": float((scores[mask] > 0).mean())
        if judged
        else 0.0,
        "train/judge_unparseable_rate": float((scores[mask] == 0).mean())
        if judged
        else 0.0,
        "env/candidates_evaluated": len(cand_acc),
        "env/accepted_this_step": sum(bool(v) for v in outcome.values()),
        "env/accepted_total": self.pool.accepted_total,
        "env/rejected_total": self.pool.rejected_total,
        "env/proposed_this_step": proposed,
      }
    )
    if self.pool.accepted_accuracies:
      metrics["env/accepted_task_accuracy"] = float(
        np.mean(self.pool.accepted_accuracies)
      )
    metrics.update({f"time/{k}": v for k, v in t.items()})
    return metrics

  # --------------------------------------------------------- evaluation
  def _eval_rollouts(self, name: str, timings: dict) -> list:
    """eval.rollouts_per_game rollouts of every game of eval split `name`,
    with that split's fixed seed (the same episodes for the same policy).

    Episode r * G + g is rollout r of game g (G games), so the first G
    episodes are one rollout of each game whatever the count. Success is the
    mean over all (game, rollout) runs, as the reference reports it (its
    periodic AlfWorld evaluation plays 3 rollouts per game).
    """
    c = self.config
    games = list(self.eval_games[name]) * c.eval.rollouts_per_game
    i = list(self.eval_games).index(name)
    return self._rollouts(
      games,
      [g.game_id for g in games],
      derive_seed(c.eval.seed, 10 + i),
      self._sampling(c.eval),
      timings,
      max_steps=c.eval.max_steps,
    )

  def _ensure_rm_reference(self, timings: dict) -> None:
    """Without an evaluation before training (eval.at_start off, e.g. the
    ablation's later stages), the reference trajectories are rolled out
    before the first update: the same episodes that evaluation would
    keep. Their wall time goes to timings["judge_reference"]."""
    if self.rm_reference is None:
      t0 = time.perf_counter()
      eps = self._eval_rollouts("out_of_distribution", {})
      self.rm_reference = eps[: self.config.eval.num_rm_episodes]
      timings["judge_reference"] = time.perf_counter() - t0

  def evaluate(self, step: int) -> dict:
    """Policy success on the ID and OOD games, and the judge's accuracy on
    the reference trajectories.

    Every evaluation uses the same seeds (common random numbers), so the
    change between two evaluations is not blurred by fresh sampling noise.
    The judge is scored on fixed trajectories, as in the paper (Qwen3-32B
    labels of the base policy's OOD trajectories): the OOD episodes of the
    first evaluation, kept in the checkpoint. Scoring it on the current
    policy's trajectories would mix its change with the policy's.
    """
    del step  # the same seeds at every evaluation
    c = self.config
    out, t = {}, {}
    for name in self.eval_games:
      eps = self._eval_rollouts(name, t)
      out[f"eval/{name}_success"] = float(np.mean([e.won for e in eps]))
      if name == "out_of_distribution" and self.rm_reference is None:
        self.rm_reference = eps[: c.eval.num_rm_episodes]
    refs = self.rm_reference
    judged = self._judge(refs, derive_seed(c.eval.seed, 20))
    labels = evaluation.process_labels(refs)
    out["eval/rm_process_accuracy"] = evaluation.rm_process_accuracy(
      judged.scores, judged.mask, labels
    )
    out["eval/rm_outcome_accuracy"] = evaluation.rm_outcome_accuracy(
      judged.scores, judged.mask, np.array([e.won for e in refs])
    )
    breakdown = evaluation.rm_process_breakdown(
      judged.scores, judged.mask, labels
    )
    out[keys.EVAL_RM_POSITIVE_RATE] = breakdown["positive_rate"]
    out[keys.EVAL_RM_PROCESS_BALANCED_ACCURACY] = breakdown["balanced_accuracy"]
    return out


_REFERENCE_FIELDS = (
  "observations",
  "actions",
  "prompt_texts",
  "response_texts",
  "won",
)


def _reference_record(e: Episode) -> dict:
  """The fields of a reference episode the judge reads (JSON-able)."""
  return {"task_id": e.task_id, **{k: getattr(e, k) for k in _REFERENCE_FIELDS}}
