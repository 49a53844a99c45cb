"""The named phases of one RL step, shared by the ALFWorld, coding and GUI
loops.

One RL step, in the order both loops run it:
  1. draw tasks: the active tasks to roll out and every pending candidate
     (`draw_task_groups`);
  2. roll out: the rollouts of every group and each group's accuracy
     (`StepRollouts`; loop-specific);
  3. resolve candidates: the acceptance rule on the candidates' accuracies;
     accepted candidates replace their parent task, rejected ones are
     deleted from the task registry (`resolve_candidates`, `Resolution`);
  4. judge: reward-model judgements of the groups used
     (`StepJudgements`);
  5. build samples: policy and reward-model samples of the groups used
     (`StepSamples`; loop-specific);
  6. train: the policy, then the reward model (`LoopBase.train_models`);
  7. adapt: harder/easier variants for slots whose active task is outside
     the adaptation band (`adapt_tasks`);
  8. step metrics (`adaptation_metrics`, `timing_metrics`).

A group is used (trains, is judged) iff it is an active task or an
accepted candidate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rla_jax.rl.rewards import step_mask_from_lengths

if TYPE_CHECKING:
  from rla_jax.rl.adaptation import TaskPool
  from rla_jax.rl.samples import Sample

ACTIVE, CANDIDATE = "active", "candidate"


@dataclasses.dataclass(frozen=True)
class TaskGroup:
  """One task rolled out this step: a slot's active task or its pending
  candidate (kind ACTIVE or CANDIDATE), by task id."""

  kind: str
  slot: str
  task_id: str

  def __post_init__(self):
    if self.kind not in (ACTIVE, CANDIDATE):
      raise ValueError(
        f"TaskGroup.kind must be {ACTIVE!r} or {CANDIDATE!r}, got {self.kind!r}"
      )

  @property
  def is_candidate(self) -> bool:
    return self.kind == CANDIDATE


def draw_task_groups(
  active: Sequence[tuple[str, str]], pool: TaskPool
) -> tuple[TaskGroup, ...]:
  """Phase 1: the groups of one step, the given active tasks first.

  active: [(slot, active task id)] to roll out (`TaskPool.sample_active`
  or `TaskPool.active_tasks`); then every pending candidate, in slot order.
  """
  groups = [TaskGroup(ACTIVE, slot, tid) for slot, tid in active]
  groups += [
    TaskGroup(CANDIDATE, slot, rec["candidate_id"])
    for slot, rec in pool.pending_candidates()
  ]
  return tuple(groups)


def group_rows(num_groups: int, per_group: int) -> tuple[list[int], ...]:
  """rows[i] = [i * n, ..., (i + 1) * n - 1]: the rows of group i's n
  rollouts in the step's flat batch (groups in order, n rollouts each)."""
  return tuple(
    list(range(i * per_group, (i + 1) * per_group)) for i in range(num_groups)
  )


@dataclasses.dataclass(frozen=True)
class StepRollouts:
  """Phase 2's record: the step's groups, where their rollouts are and how
  well each group did.

  groups: [G] task groups; rows[i]: the rows of group i's rollouts in the
  step's flat batch of rollouts; accuracies[i]: group i's success rate.
  """

  groups: tuple[TaskGroup, ...]
  rows: tuple[list[int], ...]
  accuracies: tuple[float, ...]

  def __post_init__(self):
    if not len(self.groups) == len(self.rows) == len(self.accuracies):
      raise ValueError(
        f"StepRollouts: {len(self.groups)} groups, {len(self.rows)} row "
        f"lists and {len(self.accuracies)} accuracies must be as many"
      )

  def active_indices(self) -> list[int]:
    """Indices of the active-task groups."""
    return [i for i, g in enumerate(self.groups) if not g.is_candidate]

  def candidate_accuracies(self) -> dict[str, float]:
    """{slot: accuracy} of the candidate groups."""
    return {
      g.slot: acc
      for g, acc in zip(self.groups, self.accuracies, strict=True)
      if g.is_candidate
    }

  def used_indices(self, resolution: Resolution) -> list[int]:
    """Indices of the groups used this step (active or accepted)."""
    return [i for i, g in enumerate(self.groups) if resolution.is_used(g)]

  def used_rollouts(self, resolution: Resolution) -> list[bool]:
    """[E] whether each rollout of the flat batch belongs to a group used
    this step (the episodes the judge judges)."""
    return [
      resolution.is_used(g)
      for g, rows in zip(self.groups, self.rows, strict=True)
      for _ in rows
    ]


@dataclasses.dataclass(frozen=True)
class Resolution:
  """Phase 3's outcome.

  evaluated: {slot: accuracy} of the candidates rolled out this step;
  accepted: {slot: whether the acceptance rule accepted that candidate}.
  """

  evaluated: Mapping[str, float]
  accepted: Mapping[str, bool]

  @property
  def num_accepted(self) -> int:
    return sum(bool(v) for v in self.accepted.values())

  def is_used(self, group: TaskGroup) -> bool:
    """An active task, or a candidate that was accepted."""
    return not group.is_candidate or bool(self.accepted.get(group.slot))


def resolve_candidates(
  pool: TaskPool, registry: dict, rollouts: StepRollouts, step: int
) -> Resolution:
  """Phase 3: `TaskPool.resolve` on the candidates' accuracies (it needs
  nothing else); rejected candidates are deleted from `registry`."""
  evaluated = rollouts.candidate_accuracies()
  accepted = dict(pool.resolve(evaluated, step=step)) if evaluated else {}
  resolution = Resolution(evaluated, accepted)
  for group in rollouts.groups:
    if not resolution.is_used(group):
      registry.pop(group.task_id, None)
  return resolution


def current_groups(
  groups: Sequence[TaskGroup], resolution: Resolution
) -> dict[str, int]:
  """{slot: index of the group now holding the slot's active task}.

  An accepted candidate replaces the task it was derived from.
  """
  current = {}
  for i, g in enumerate(groups):
    if (not g.is_candidate and g.slot not in current) or (
      g.is_candidate and resolution.accepted.get(g.slot)
    ):
      current[g.slot] = i
  return current


@dataclasses.dataclass(frozen=True)
class StepJudgements:
  """Phase 4's record: the judgements of the step's episodes (the loop's
  judge output, None when nothing reads them) and what the rewards read:
  scores [E, K, m] in {+1, -1, 0} (all 0, m = 1, when not judged) and
  mask [E, K] of real steps, for E episodes padded to K steps."""

  judgements: Any | None
  scores: np.ndarray
  mask: np.ndarray

  @classmethod
  def of(cls, judgements) -> StepJudgements:
    """The record of a judge's output (anything with scores and mask)."""
    return cls(judgements, judgements.scores, judgements.mask)

  @classmethod
  def unjudged(cls, num_steps: Sequence[int]) -> StepJudgements:
    """No judgements: scores all 0 (m = 1) on the real steps of episodes of
    num_steps [E] steps."""
    mask = step_mask_from_lengths(num_steps)
    return cls(None, np.zeros((*mask.shape, 1)), mask)


@dataclasses.dataclass
class StepSamples:
  """Phase 5's training data: policy and reward-model samples, and how many
  tasks were inside each accuracy band (ALFWorld reports these)."""

  policy: list[Sample] = dataclasses.field(default_factory=list)
  reward: list[Sample] = dataclasses.field(default_factory=list)
  policy_tasks_in_band: int = 0
  rm_tasks_in_band: int = 0
  # reward.advantage="gigpo": the in-band tasks' real steps, and those of
  # them whose anchor-state step advantage is not 0 (their state was also
  # reached by another rollout whose return differed).
  gigpo_steps: int = 0
  gigpo_credited_steps: int = 0

  def add(self, policy: list, reward: list, stats: dict) -> None:
    """One task's samples and stats (`training_data.task_samples`)."""
    self.policy += policy
    self.reward += reward
    self.policy_tasks_in_band += stats["policy_in_band"]
    self.rm_tasks_in_band += stats["rm_in_band"]
    self.gigpo_steps += stats.get("gigpo_steps", 0)
    self.gigpo_credited_steps += stats.get("gigpo_credited_steps", 0)

  def metrics(self) -> dict[str, float]:
    """train/ counts of the step's samples and bands; with GiGPO, the share
    of in-band steps that got step credit (train/gigpo_step_credit_share:
    near 0 means GiGPO reduces to outcome-only GRPO)."""
    out = {
      "train/policy_samples": len(self.policy),
      "train/rm_samples": len(self.reward),
      "train/policy_tasks_in_band": self.policy_tasks_in_band,
      "train/rm_tasks_in_band": self.rm_tasks_in_band,
    }
    if self.gigpo_steps:
      out["train/gigpo_step_credit_share"] = (
        self.gigpo_credited_steps / self.gigpo_steps
      )
    return out


def adapt_tasks(
  pool: TaskPool,
  registry: dict,
  rollouts: StepRollouts,
  resolution: Resolution,
  propose: Callable[[int, str], Any],
  *,
  variant_id: Callable[[Any], str],
  low_inclusive: bool,
) -> int:
  """Phase 7: new candidates for slots whose active task is outside the
  adaptation band; returns how many were proposed.

  The direction of a slot comes from its current group's accuracy
  (`TaskPool.proposal_directions` with `low_inclusive`); propose(group
  index, direction) returns a variant task or None. A variant whose id
  (`variant_id`) is new enters `registry` and becomes the slot's pending
  candidate.
  """
  current = current_groups(rollouts.groups, resolution)
  active_acc = {slot: rollouts.accuracies[i] for slot, i in current.items()}
  directions = pool.proposal_directions(active_acc, low_inclusive=low_inclusive)
  proposed = 0
  for slot, direction in directions.items():
    variant = propose(current[slot], direction)
    if variant is not None and variant_id(variant) not in registry:
      registry[variant_id(variant)] = variant
      pool.propose(slot, variant_id(variant), direction, active_acc[slot])
      proposed += 1
  return proposed


def adaptation_metrics(pool: TaskPool, proposed: int) -> dict:
  """The task pool's counters after a step (both loops report them)."""
  return {
    "env/accepted_total": pool.accepted_total,
    "env/rejected_total": pool.rejected_total,
    "env/proposed_this_step": proposed,
  }


@contextlib.contextmanager
def timed(timings: dict, key: str) -> Iterator[None]:
  """timings[key] = wall seconds of the `with` body."""
  t0 = time.perf_counter()
  yield
  timings[key] = time.perf_counter() - t0


def timing_metrics(timings: Mapping[str, float]) -> dict:
  """{"time/<phase>": seconds}."""
  return {f"time/{k}": v for k, v in timings.items()}
